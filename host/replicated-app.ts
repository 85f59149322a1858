// `baton serve --replicas N` and the desktop app's `--replicas N`: the embedded default (a
// simulated cluster or the given workers, and traffic) with the router as N replicas on one port
// (router/replicas/, under a primary in host/replicas-process.ts), and the dashboard served by a
// hub following that primary (host/hub/): a host of one router is the one-replica case.
import type { EventListener } from '../router/api.ts';
import { clusterConfig, RENDERER_DIST, resolveAppOptions, routerConfig, trafficFormats, type AppDeps, type AppOptions } from './app.ts';
import type { HostActions, RequestOutput } from './contract.ts';
import type { HubHandle } from './hub/server.ts';
import { defaultPrefsFile, PrefsFile } from './prefs.ts';
import type { ReplicasLike } from './replicas-process.ts';
import { SimControl, type SimClusterLike } from './sim-control.ts';
import { TrafficGenerator } from './traffic.ts';
import type { ReplicaEntry } from '../router/replicas/identity.ts';
import { autoReplicas } from '../router/cpu-limit.ts';

export interface ReplicatedAppDeps {
  startCluster: AppDeps['startCluster'];
  startReplicas(config: Parameters<AppDeps['startRouter']>[0] & { replicas: number }, log: (line: string) => void): Promise<ReplicasLike>;
}

export interface ReplicatedAppOptions extends Omit<AppOptions, 'deps'> {
  replicas: number;
  /** The hub's port (the dashboard, its API and /events); default 0: a free one. `port` is the replicas'. */
  dashboardPort?: number;
  /** The primary's lines (a replica restarted). Default: console.log. */
  log?: (line: string) => void;
  deps?: Partial<ReplicatedAppDeps>;
}

export interface ReplicatedAppHandle {
  /** The replicas' shared address: clients, and the traffic generator, send there. */
  routerUrl: string;
  mode: 'cluster' | 'reuseport';
  /** The replicas as they started (GET /replicas on routerUrl has them now). */
  replicas: ReplicaEntry[];
  /** The hub's address (the dashboard's API, /events, /traces) and the dashboard's. */
  url: string;
  dashboardUrl: string;
  hub: HubHandle;
  actions: HostActions;
  subscribe(listener: EventListener): () => void;
  requestOutput(id: string): Promise<RequestOutput | null>;
  /** Stops the traffic, then the replicas, then the hub, then the workers. */
  close(): Promise<void>;
}

/** The count of --replicas (or BATON_REPLICAS, replicas: in a config file): 1 to 64 or auto, as router/config.ts reads it. */
export function parseReplicas(value: string | number, what = '--replicas'): number {
  if (value === 'auto') return autoReplicas(64);
  const n = typeof value === 'number' ? value : value.trim() === '' ? NaN : Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new RangeError(`${what} must be an integer from 1 to 64, got '${value}'`);
  return n;
}

const defaultDeps: ReplicatedAppDeps = {
  startCluster: async (config) => (await import('./sim-process.ts')).startDetachedCluster(config),
  startReplicas: async (config, log) => (await import('./replicas-process.ts')).startDetachedReplicas(config, log),
};

export async function startReplicatedApp(opts: ReplicatedAppOptions): Promise<ReplicatedAppHandle> {
  if (!Number.isInteger(opts.replicas) || opts.replicas < 2) throw new Error(`replicas must be an integer of at least 2 here (1 is startApp's host), got ${opts.replicas}`);
  const deps = { ...defaultDeps, ...opts.deps };
  const log = opts.log ?? console.log;
  const { sim, traffic } = resolveAppOptions(opts);
  let cluster: SimClusterLike | null = null;
  let replicas: ReplicasLike | null = null;
  let generator: TrafficGenerator | null = null;
  let hub: HubHandle | null = null;
  let closing: Promise<void> | null = null;
  // In this order, unlike the start's: no request is sent to a replica that is closing, and the
  // hub sees the replicas go before it stops; the workers outlive every router.
  const close = () => (closing ??= (async () => {
    const steps: [string, (() => Promise<void>) | undefined][] = [
      ['traffic', generator ? () => generator!.stop() : undefined],
      ['replicas', replicas ? () => replicas!.stop() : undefined],
      ['hub', hub ? () => hub!.close() : undefined],
      ['workers', cluster ? async () => { await cluster!.stop(); } : undefined],
    ];
    for (const [what, step] of steps) await step?.().catch((err: Error) => console.error(`baton: while stopping the ${what}: ${err.message}`));
  })());
  try {
    if (sim > 0) cluster = await deps.startCluster(clusterConfig(opts, sim));
    const simulated = cluster?.workers() ?? [];
    const base = routerConfig(opts);
    // Every replica is given every worker: a replica keeps its own pool (docs/replicas.md).
    replicas = await deps.startReplicas({ ...base, workers: [...simulated.map((w) => w.url), ...(base.workers ?? [])], replicas: opts.replicas }, log);
    if (traffic) generator = new TrafficGenerator({ url: replicas.url, settings: opts.trafficSettings ?? {}, formats: trafficFormats(opts) });
    const { startHub } = await import('./hub/server.ts');
    const started = cluster;
    const staticRoot = opts.staticRoot === undefined ? RENDERER_DIST : opts.staticRoot;
    hub = await startHub({
      routers: [replicas.url],
      routerUrl: replicas.url,
      host: opts.host ?? '127.0.0.1',
      port: opts.dashboardPort ?? 0,
      staticRoot,
      local: { sim: started ? new SimControl(started) : null, traffic: generator },
      // The replicas know the simulated workers by URL only: the hub marks them by their index.
      simIndex: (url) => started?.workers().find((w) => w.url.replace(/\/$/, '') === url)?.index ?? null,
      prefs: opts.prefsFile === null ? null : new PrefsFile(opts.prefsFile ?? defaultPrefsFile()),
    });
    const h = hub;
    return {
      routerUrl: replicas.url,
      mode: replicas.mode,
      replicas: replicas.replicas,
      url: h.url,
      dashboardUrl: h.dashboardUrl,
      hub: h,
      actions: h.actions,
      subscribe: (listener) => h.hub.bus.subscribe(listener),
      requestOutput: (id) => h.requestOutput(id),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
