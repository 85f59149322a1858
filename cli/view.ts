// `baton view FILE.jsonl|FILE.csv`: open an exported trace file in the dashboard, offline. The
// same views as live (requests, their attempts and migrations, charts, the rows), no router.
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { intFlag, UsageError } from '../lib/args.ts';
import { parseArgs } from 'node:util';
import { RENDERER_DIST } from '../host/app.ts';
import { ensureRendererBuilt, RendererBuildError } from '../host/renderer-build.ts';
import { startViewServer } from '../host/view-server.ts';

const HELP = `usage: baton view FILE [options]

Opens a trace file (JSON Lines or CSV, as 'baton traces', the dashboard's Export or a router's
--trace-file write them) in the dashboard: the same views as live, with no router. Open the
printed address in a browser. A file can also be dropped onto a running dashboard.

  --port P     port to serve the page on (default 0: any free port)
  --host H     address to bind (default 127.0.0.1)`;

function bytes(n: number): string {
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export async function run(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' }, port: { type: 'string' }, host: { type: 'string' } }, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError((err as Error).message.split('\n')[0]!.trim());
  }
  const { values: v, positionals } = parsed;
  if (v.help) {
    console.log(HELP);
    return;
  }
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'name the trace file to open: baton view FILE.jsonl' : 'one file at a time');
  const file = positionals[0]!;
  if (!existsSync(file)) throw new UsageError(`no such file: ${file}`);
  const info = await stat(file);
  if (!info.isFile()) throw new UsageError(`not a file: ${file}`);
  try {
    await ensureRendererBuilt();
  } catch (err) {
    if (err instanceof RendererBuildError) throw new UsageError(err.message);
    throw err;
  }
  let server;
  try {
    const { defaultPrefsFile, PrefsFile } = await import('../host/prefs.ts');
    server = await startViewServer({ file, port: intFlag('port', v.port, 0), ...(v.host !== undefined ? { host: v.host } : {}), staticRoot: RENDERER_DIST, prefs: new PrefsFile(defaultPrefsFile()) });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new UsageError(`port ${v.port} is already in use (try --port 0)`);
    throw err;
  }
  console.log(`baton view: ${file} (${bytes(info.size)}), no router`);
  console.log(`dashboard on ${server.pageUrl}`);
  const stop = () => void server.close().finally(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
