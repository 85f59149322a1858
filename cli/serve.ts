// `baton serve`: the router with the dashboard in browser mode, and by default a simulated
// cluster with traffic, all in this process (the simulated workers are child processes).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { intFlag, parseFlags, UsageError } from './args.ts';
import { RENDERER_DIST, resolveAppOptions, startApp, type AppHandle } from '../host/app.ts';

const HELP = `usage: baton serve [options]

  --port P               port of the router and the dashboard (default 30080; 0 picks one)
  --host H               address to bind (default 127.0.0.1; the dashboard is meant for loopback)
  --worker URL           a dev-cluster worker (repeatable); with none, a simulated cluster starts
  --sim N                simulated workers to start (default 3 without --worker, else 0)
  --traffic              run the traffic generator (default with a simulated cluster only)
  --no-traffic           do not run it
  --migration-limit N    migrations per request (default 3; 0 = off)
  --policy NAME          routing policy (default least_inflight)
  --token-interval-ms T  simulated workers' time between tokens (default 20)

Open the printed dashboard URL in a browser. Ctrl-C stops the router, the traffic and the
simulated workers.`;

const OPTIONS = {
  help: { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  worker: { type: 'string', multiple: true },
  sim: { type: 'string' },
  traffic: { type: 'boolean' },
  'no-traffic': { type: 'boolean' },
  'migration-limit': { type: 'string' },
  policy: { type: 'string' },
  'token-interval-ms': { type: 'string' },
} as const;

/** Builds the dashboard when there is no build yet (a fresh clone): `vite build`, in process. */
async function ensureRendererBuilt(): Promise<void> {
  if (existsSync(join(RENDERER_DIST, 'index.html'))) return;
  console.log('baton serve: building the dashboard (vite build)…');
  let vite: typeof import('vite');
  try {
    vite = await import('vite');
  } catch {
    throw new UsageError(`no dashboard build in ${RENDERER_DIST} and vite is not installed to make one: run 'npm install' then 'npm run build'`);
  }
  await vite.build({ configFile: join(RENDERER_DIST, '../../vite.config.ts'), logLevel: 'warn' });
}

export async function run(argv: string[]): Promise<void> {
  const v = parseFlags(argv, OPTIONS);
  if (v.help) {
    console.log(HELP);
    return;
  }
  if (v.traffic && v['no-traffic']) throw new UsageError('--traffic and --no-traffic contradict each other');
  const opts = {
    ...(v.port !== undefined ? { port: intFlag('port', v.port, 0) } : {}),
    ...(v.host !== undefined ? { host: v.host } : {}),
    workers: v.worker ?? [],
    ...(v.sim !== undefined ? { sim: intFlag('sim', v.sim, 0) } : {}),
    ...(v.traffic ? { traffic: true } : v['no-traffic'] ? { traffic: false } : {}),
    ...(v['migration-limit'] !== undefined ? { migrationLimit: intFlag('migration-limit', v['migration-limit'], 3) } : {}),
    ...(v.policy !== undefined ? { policy: v.policy } : {}),
    ...(v['token-interval-ms'] !== undefined ? { simTokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 20) } : {}),
  };
  const { sim, traffic } = resolveAppOptions(opts);
  await ensureRendererBuilt();

  let app: AppHandle;
  try {
    app = await startApp(opts);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new UsageError(`port ${opts.port ?? 30080} is already in use (try --port 0)`);
    if (e.constructor?.name === 'ConfigError' || /worker URL/.test(e.message ?? '')) throw new UsageError(e.message);
    throw err;
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      // A second Ctrl-C: the user does not want to wait for a clean stop.
      process.exit(130);
    }
    stopping = true;
    console.log(`baton serve: ${signal}, stopping`);
    await app.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  const workers = app.router.workers();
  console.log(`baton serve: listening on ${app.router.url}`);
  console.log(`baton serve: ${workers.length} workers (${sim} simulated), traffic generator ${traffic ? 'on' : 'off'}`);
  console.log(`dashboard on ${app.dashboardUrl}`);
}
