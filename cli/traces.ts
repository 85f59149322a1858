// `baton traces`: export trace rows from a running router (GET /traces) to stdout, streamed: a
// 100 000-row export goes from socket to stdout chunk by chunk, at the pace stdout takes it.
import { pipeline } from 'node:stream/promises';
import { request } from 'undici';
import { parseFlags, UsageError } from '../lib/args.ts';

const HELP = `usage: baton traces --url ROUTER [options] > out.jsonl

  --url URL            the router, e.g. http://127.0.0.1:30080
  --format F           jsonl (default) or csv
  --request ID         rows of one logical request
  --worker URL         attempt rows on one worker
  --outcome O          finished, failed, cancelled, budget_exhausted or drained
  --kind K             attempt or request
  --since MS           rows that ended at or after MS (epoch milliseconds)
  --admin-token T      the router's admin token (default: $BATON_ADMIN_TOKEN)

Rows are described in docs/trace-rows.md.`;

const OPTIONS = {
  help: { type: 'boolean' },
  url: { type: 'string' },
  format: { type: 'string' },
  request: { type: 'string' },
  worker: { type: 'string' },
  outcome: { type: 'string' },
  kind: { type: 'string' },
  since: { type: 'string' },
  'admin-token': { type: 'string' },
} as const;

/** A failure at run time (not the command line's): one line on stderr, exit code 1. */
class ExportError extends Error {}

export function exportUrl(argv: string[]): { url: URL; token: string | null } | null {
  const v = parseFlags(argv, OPTIONS);
  if (v.help) return null;
  if (!v.url) throw new UsageError('--url is required (the router, e.g. http://127.0.0.1:30080)');
  let base: URL;
  try {
    base = new URL(v.url);
  } catch {
    throw new UsageError(`--url must be a URL like http://127.0.0.1:30080, got '${v.url}'`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new UsageError(`--url must be http(s), got '${v.url}'`);
  if (v.format !== undefined && v.format !== 'jsonl' && v.format !== 'csv') throw new UsageError(`--format must be jsonl or csv, got '${v.format}'`);
  if (v.since !== undefined && !(Number.isFinite(Number(v.since)) && Number(v.since) >= 0)) {
    throw new UsageError(`--since must be epoch milliseconds, got '${v.since}'`);
  }
  const url = new URL('traces', base.href.endsWith('/') ? base.href : base.href + '/');
  for (const key of ['format', 'request', 'worker', 'outcome', 'kind', 'since'] as const) {
    const value = v[key];
    if (value !== undefined) url.searchParams.set(key, value);
  }
  return { url, token: v['admin-token'] ?? process.env.BATON_ADMIN_TOKEN ?? null };
}

async function exportTo(out: NodeJS.WritableStream, url: URL, token: string | null): Promise<void> {
  let res;
  try {
    res = await request(url, { method: 'GET', headers: token ? { authorization: `Bearer ${token}` } : {} });
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string } };
    throw new ExportError(`cannot reach the router at ${url.origin}: ${e.code ?? e.cause?.code ?? e.message}`);
  }
  if (res.statusCode !== 200) {
    const text = (await res.body.text().catch(() => '')).slice(0, 2000);
    let message = text.trim();
    try {
      const body = JSON.parse(text) as { message?: unknown; error?: { message?: unknown } };
      message = String(body.message ?? body.error?.message ?? message);
    } catch {
      // not JSON: show the text as it came
    }
    const hint = res.statusCode === 401 ? ' (pass --admin-token or set BATON_ADMIN_TOKEN)' : '';
    throw new ExportError(`the router answered ${res.statusCode}: ${message || '(no body)'}${hint}`);
  }
  try {
    await pipeline(res.body, out);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    // `baton traces ... | head`: the reader had enough; that is not an error.
    if (e.code === 'EPIPE') return;
    throw new ExportError(`the export was cut off: ${e.code ?? e.message}`);
  }
}

export async function run(argv: string[]): Promise<void> {
  const target = exportUrl(argv);
  if (!target) {
    console.log(HELP);
    return;
  }
  try {
    await exportTo(process.stdout, target.url, target.token);
  } catch (err) {
    if (!(err instanceof ExportError)) throw err;
    console.error(`baton traces: ${err.message}`);
    process.exitCode = 1;
  }
}
