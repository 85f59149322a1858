// `baton serve`: the router with the dashboard in browser mode, and by default a simulated
// cluster with traffic, all in this process (the simulated workers are child processes).
import { REASONING_PARSER_NAMES, TOOL_PARSER_NAMES } from '../router/parsers/names.ts';
import { intFlag, parseFlags, UsageError } from '../lib/args.ts';
import { clusterConfig, RENDERER_DIST, resolveAppOptions, startApp, type AppHandle, type AppOptions } from '../host/app.ts';
import { parseReplicas, startReplicatedApp, type ReplicatedAppHandle } from '../host/replicated-app.ts';
import { ReplicasStartError } from '../host/replicas-process.ts';
import { ensureRendererBuilt, RendererBuildError } from '../host/renderer-build.ts';
import { ConfigError, loadConfig, type RouterConfig } from '../router/config.ts';

// Every line fits 80 columns (test/host/serve-help.test.ts): a terminal wraps longer ones mid-word.
const HELP = `usage: baton serve [options]

  --port P               port of the router and the dashboard
                         (default 30080; 0 picks a free one)
  --host H               address to bind (default 127.0.0.1: the dashboard
                         is meant for loopback)
  --worker URL           a dev-cluster worker (repeatable); with none, a
                         simulated cluster starts
  --sim N                simulated workers to start (default 3 without
                         --worker, else 0)
  --traffic              run the traffic generator (the default with a
                         simulated cluster only)
  --no-traffic           do not run it
  --migration-limit N    migrations per request (default 3; 0 = off)
  --policy NAME          routing policy (default cache_aware)
  --token-interval-ms T  simulated workers' time between tokens (default 20)
  --sim-format F         the simulated workers' wire format:
                           sglang  SGLang workers (the default)
                           vllm    vLLM workers
                           mixed   half each, with traffic in both formats
                           openai  SGLang workers on a real tokenizer (Qwen3's,
                                   bundled), the router's OpenAI front
                                   (/v1/chat/completions) and chat traffic
                           pd      SGLang workers in P/D roles, half prefill and
                                   half decode (default 2 + 2), behind the
                                   router in P/D mode (docs/pd.md)
  --sim-pd               the same as --sim-format pd
  --tool-call-parser NAME
                         parse tool calls out of chat answers, as baton
                         router does (docs/openai.md); with --sim-format
                         openai the default is qwen25 (the simulated Qwen3
                         model's <tool_call> format)
  --reasoning-parser NAME
                         separate <think> reasoning, as baton router does;
                         with --sim-format openai the default is qwen3
  --replicas N           the router as N processes on the one --port
                         (docs/replicas.md), the dashboard from a hub over
                         them on a port of its own (default 1: one router,
                         in this process; also replicas: in --config)
  --config FILE          router settings from a YAML file
                         (docs/configuration.md), e.g. Kubernetes discovery
                         (docs/kubernetes.md); host, port, workers and the
                         admin token stay this command's

  --router URL           a dashboard hub over running routers instead
                         (repeatable): no router, cluster or traffic of its
                         own; a --replicas primary brings each of its
                         replicas (GET /replicas); docs/dashboard.md
                         "Several routers"
  --router-token T       admin token the routers want (Authorization:
                         Bearer T)
  --router-discovery F   find the routers with the discovery settings of a
                         YAML config file (docs/configuration.md: the
                         Kubernetes Pods or EndpointSlices source selecting
                         the router pods by label); with or without --router

Open the printed dashboard URL in a browser. Ctrl-C stops the traffic, the
router (or its replicas, then the hub) and the simulated workers.`;

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
  'sim-format': { type: 'string' },
  'sim-pd': { type: 'boolean' },
  'tool-call-parser': { type: 'string' },
  'reasoning-parser': { type: 'string' },
  config: { type: 'string' },
  replicas: { type: 'string' },
  router: { type: 'string', multiple: true },
  'router-token': { type: 'string' },
  'router-discovery': { type: 'string' },
} as const;

/** `baton serve --router URL ...`: the dashboard over routers that already run (host/hub/). */
async function runHub(routers: string[], v: { port?: string; host?: string; worker?: string[]; sim?: string; traffic?: boolean; config?: string; replicas?: string; 'router-token'?: string; 'router-discovery'?: string }): Promise<void> {
  for (const flag of ['worker', 'sim', 'traffic', 'config', 'replicas'] as const) {
    if (v[flag] !== undefined) throw new UsageError(`--${flag} does not go with --router: the hub follows routers, it runs none`);
  }
  try {
    await ensureRendererBuilt();
  } catch (err) {
    if (err instanceof RendererBuildError) throw new UsageError(err.message);
    throw err;
  }
  const { startHub } = await import('../host/hub/server.ts');
  const sources = [];
  if (v['router-discovery'] !== undefined) {
    // The router's own discovery sources, read from the file, here finding routers instead of workers.
    const { SOURCES } = await import('../router/discovery/index.ts');
    const cfg = { ...loadConfigOrUsage(v['router-discovery']) };
    for (const make of SOURCES) {
      const source = make(cfg);
      if (source) sources.push(source);
    }
    if (sources.length === 0) throw new UsageError(`${v['router-discovery']} turns on no discovery source (docs/kubernetes.md)`);
  }
  const { HostError } = await import('../host/host-error.ts');
  const { defaultPrefsFile, PrefsFile } = await import('../host/prefs.ts');
  let hub: Awaited<ReturnType<typeof startHub>>;
  try {
    hub = await startHub({
      routers,
      port: v.port !== undefined ? intFlag('port', v.port, 0) : 30080,
      host: v.host ?? '127.0.0.1',
      staticRoot: RENDERER_DIST,
      sources,
      // The theme and windows every other `baton serve` page uses (host/prefs.ts).
      prefs: new PrefsFile(defaultPrefsFile()),
      ...(v['router-token'] ? { headers: { authorization: `Bearer ${v['router-token']}` } } : {}),
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new UsageError(`port ${v.port ?? 30080} is already in use (try --port 0)`);
    if (err instanceof HostError) throw new UsageError(err.message);
    throw err;
  }
  const stop = async (signal: string) => {
    console.log(`baton serve: ${signal}, stopping`);
    await hub.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  console.log(`baton serve: hub over ${hub.status().routers.map((r) => `${r.label} ${r.url}`).join(', ')}`);
  console.log(`baton serve: listening on ${hub.url}`);
  console.log(`dashboard on ${hub.dashboardUrl}`);
}

function loadConfigOrUsage(file: string): RouterConfig {
  try {
    return loadConfig({ file, env: process.env });
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
}

/** The file's router settings (with BATON_* over them), less what `baton serve` decides itself. */
export function routerSettings(file: string): Partial<RouterConfig> {
  let cfg: RouterConfig;
  try {
    cfg = loadConfig({ file, env: process.env });
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
  const { host: _h, port: _p, workers: _w, adminToken: _a, ...rest } = cfg;
  return rest;
}

/**
 * The host's options from `baton serve`'s flags (no --router: that is the hub of runHub), with
 * `replicas` from --replicas, else the --config file's (or BATON_REPLICAS over it), else 1.
 */
export function appOptionsFromArgv(argv: string[]): AppOptions & { replicas: number } {
  const v = parseFlags(argv, OPTIONS);
  if (v.traffic && v['no-traffic']) throw new UsageError('--traffic and --no-traffic contradict each other');
  if (v['sim-pd'] && v['sim-format'] !== undefined && v['sim-format'] !== 'pd') throw new UsageError(`--sim-pd and --sim-format ${v['sim-format']} contradict each other`);
  const simFormatFlag = v['sim-pd'] ? 'pd' : v['sim-format'];
  if (simFormatFlag !== undefined && simFormatFlag !== 'sglang' && simFormatFlag !== 'vllm' && simFormatFlag !== 'mixed' && simFormatFlag !== 'openai' && simFormatFlag !== 'pd') throw new UsageError(`--sim-format must be sglang, vllm, mixed, openai or pd, got '${simFormatFlag}'`);
  const simFormat: 'sglang' | 'vllm' | 'mixed' | 'openai' | 'pd' | undefined = simFormatFlag;
  if (simFormat === 'pd' && v.sim !== undefined && intFlag('sim', v.sim, 0) === 1) throw new UsageError('--sim-pd needs at least 2 simulated workers (a prefill and a decode)');
  const tp = v['tool-call-parser'];
  if (tp !== undefined && !Object.hasOwn(TOOL_PARSER_NAMES, tp)) throw new UsageError(`--tool-call-parser must be one of ${Object.keys(TOOL_PARSER_NAMES).join(', ')}, got '${tp}'`);
  const rp = v['reasoning-parser'];
  if (rp !== undefined && !Object.hasOwn(REASONING_PARSER_NAMES, rp)) throw new UsageError(`--reasoning-parser must be one of ${Object.keys(REASONING_PARSER_NAMES).join(', ')}, got '${rp}'`);
  const router = v.config !== undefined ? routerSettings(v.config) : undefined;
  const { replicas: fromFile, ...settings } = router ?? {};
  let replicas = fromFile ?? 1;
  try {
    if (v.replicas !== undefined) replicas = parseReplicas(v.replicas);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return {
    ...(v.port !== undefined ? { port: intFlag('port', v.port, 0) } : {}),
    ...(v.host !== undefined ? { host: v.host } : {}),
    workers: v.worker ?? [],
    ...(v.sim !== undefined ? { sim: intFlag('sim', v.sim, 0) } : {}),
    ...(v.traffic ? { traffic: true } : v['no-traffic'] ? { traffic: false } : {}),
    ...(v['migration-limit'] !== undefined ? { migrationLimit: intFlag('migration-limit', v['migration-limit'], 3) } : {}),
    ...(v.policy !== undefined ? { policy: v.policy } : {}),
    ...(v['token-interval-ms'] !== undefined ? { simTokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 20) } : {}),
    ...(simFormat !== undefined ? { simFormat } : {}),
    ...(v['tool-call-parser'] !== undefined ? { toolCallParser: v['tool-call-parser'] } : {}),
    ...(v['reasoning-parser'] !== undefined ? { reasoningParser: v['reasoning-parser'] } : {}),
    ...(router !== undefined ? { router: settings } : {}),
    replicas,
  };
}

/** What `baton serve` runs: one router with the dashboard on its port, or replicas with a hub. */
interface ServeHost {
  close(): Promise<void>;
  lines(): string[];
}

export async function run(argv: string[]): Promise<void> {
  const v = parseFlags(argv, OPTIONS);
  if (v.help) {
    console.log(HELP);
    return;
  }
  if (v.router !== undefined || v['router-discovery'] !== undefined) return runHub(v.router ?? [], v);
  const opts = appOptionsFromArgv(argv);
  const { sim, traffic } = resolveAppOptions(opts);
  try {
    await ensureRendererBuilt();
  } catch (err) {
    if (err instanceof RendererBuildError) throw new UsageError(err.message);
    throw err;
  }

  let host: ServeHost;
  try {
    const fleet = workersWords(opts, sim);
    host = opts.replicas > 1 ? replicated(await startReplicatedApp({ ...opts, replicas: opts.replicas }), fleet, traffic) : embedded(await startApp(opts), fleet, traffic);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new UsageError(`port ${opts.port ?? 30080} is already in use (try --port 0)`);
    if (err instanceof ConfigError || (err instanceof ReplicasStartError && err.usage) || /worker URL/.test(e.message ?? '')) throw new UsageError(e.message);
    throw err;
  }

  let stoppingSince = 0;
  const stop = async (signal: string) => {
    if (stoppingSince > 0) {
      // Ctrl-C reaches both `npm start` and this process, which forwards it: a repeat within a
      // second is that echo. A later one means the user will not wait for a clean stop.
      if (Date.now() - stoppingSince > 1000) process.exit(130);
      return;
    }
    stoppingSince = Date.now();
    console.log(`baton serve: ${signal}, stopping`);
    await host.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  for (const line of host.lines()) console.log(line);
}

/**
 * The workers `baton serve` starts with, in words: `3 workers (3 simulated)`; a simulated P/D
 * cluster by role, `2 prefill + 2 decode workers (4 simulated)`, from the roles the cluster is
 * given (the router's probe of them may not have answered yet). Workers given with --worker are
 * counted apart: their roles are the router's to probe.
 */
export function workersWords(opts: AppOptions, sim: number): string {
  const given = opts.workers?.length ?? 0;
  const roles = sim > 0 ? clusterConfig(opts, sim).roles : undefined;
  if (roles === undefined) return `${sim + given} worker${sim + given === 1 ? '' : 's'} (${sim} simulated)`;
  const prefill = roles.filter((r) => r === 'prefill').length;
  return `${prefill} prefill + ${roles.length - prefill} decode workers (${sim} simulated${given > 0 ? `, ${given} more given` : ''})`;
}

function embedded(app: AppHandle, fleet: string, traffic: boolean): ServeHost {
  return {
    close: () => app.close(),
    lines: () => [
      `baton serve: listening on ${app.router.url}`,
      `baton serve: ${fleet}, traffic generator ${traffic ? 'on' : 'off'}`,
      `dashboard on ${app.dashboardUrl}`,
    ],
  };
}

function replicated(app: ReplicatedAppHandle, fleet: string, traffic: boolean): ServeHost {
  return {
    close: () => app.close(),
    lines: () => [
      `baton serve: listening on ${app.routerUrl} (${app.replicas.length} replicas by ${app.mode === 'cluster' ? 'node:cluster' : 'SO_REUSEPORT'})`,
      ...app.replicas.map((r) => `  replica ${r.index}: id ${r.id}, pid ${r.pid}, ${r.url}`),
      `baton serve: ${fleet}, traffic generator ${traffic ? 'on' : 'off'}; dashboard hub on ${app.url}`,
      `dashboard on ${app.dashboardUrl}`,
    ],
  };
}
