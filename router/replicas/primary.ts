// The primary of `baton router --replicas N` (docs/replicas.md): N full routers on one port, each
// with its own pool, breakers, trace ring and event bus; nothing shared on the request path.
//
// It wires the parts of router/replicas/ and answers the replicas' messages:
// - a spawner starts the processes, one per way of sharing the port: node:cluster with SCHED_NONE
//   on Node 20 (cluster-spawner.ts); independent processes binding the port with SO_REUSEPORT on
//   Node >= 22.12 and 23.1+ (reuseport-spawner.ts). Either way no connection passes through the
//   primary;
// - the supervisor (supervisor.ts) restarts a replica that exits, with backoff under a new epoch,
//   and leaves one in a crash loop down; it keeps the list GET /replicas answers (replicas ask it
//   over IPC);
// - the reload coordinator (reload.ts) replaces the replicas one slot at a time (SIGHUP, `reload()`);
// - what the replicas share (share.ts): cache_aware's prefixes and the worker writes made on the
//   shared port;
// - /metrics aggregated over the replicas (aggregate.ts).
import type { RouterConfig } from '../config.ts';
import type { ReloadStatus, ReplicaEntry, ReplicaList } from './identity.ts';
import type { FromReplica } from './ipc.ts';
import { MetricsAggregator } from './aggregate.ts';
import { clusterSpawner } from './cluster-spawner.ts';
import { ReloadCoordinator } from './reload.ts';
import { reusePortSpawner } from './reuseport-spawner.ts';
import { ReplicaShare } from './share.ts';
import type { Child, Spawner } from './spawner.ts';
import { Supervisor, type Slot } from './supervisor.ts';

export { ReplicaStartError } from './supervisor.ts';

/** Whether this Node's net.Server.listen takes `reusePort` (added in v22.12.0 and v23.1.0). */
export function reusePortSupported(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/** The spawner this Node supports: SO_REUSEPORT where `listen` takes it, node:cluster before. */
function spawnerForThisNode(): Spawner {
  return reusePortSupported() ? reusePortSpawner() : clusterSpawner();
}

export interface PrimaryHandle {
  /** The shared address every replica serves. */
  readonly url: string;
  readonly mode: 'cluster' | 'reuseport';
  list(): ReplicaEntry[];
  /** The latest reload, or null when none ran. */
  reloadStatus(): ReloadStatus | null;
  /**
   * Replace every replica, one slot at a time (docs/replicas.md, "Reload"). During a reload a
   * further call is queued (several coalesce into one) and resolves when that one has run.
   */
  reload(): Promise<ReloadStatus>;
  /** SIGTERM each replica (in index order; each drains as a lone router does) and wait for them, SIGKILL after `graceMs` + 5 s. */
  stop(graceMs: number, signal?: NodeJS.Signals): Promise<void>;
}

export interface PrimaryOptions {
  log(line: string): void;
  /** Called when every replica has crashed (none left to restart). */
  onAllCrashed?(): void;
  /**
   * A reload's config: the flags and environment as given, the config file read again. Throws
   * (a ConfigError) when the file no longer parses: the reload then replaces nothing.
   */
  reloadConfig?(): RouterConfig;
}

export async function startPrimary(config: RouterConfig, opts: PrimaryOptions): Promise<PrimaryHandle> {
  const spawner = spawnerForThisNode();
  const port = await spawner.port(config.host, config.port);
  const sup = new Supervisor(spawner, { ...config, port }, {
    log: opts.log,
    onAllCrashed: () => opts.onAllCrashed?.(),
    message: (slot, child, m) => void onMessage(slot, child, m),
  });
  const share = new ReplicaShare(sup);
  const metrics = new MetricsAggregator(sup);
  const reloads = new ReloadCoordinator(sup, config, port, opts);

  function replicaList(): ReplicaList {
    const reload = reloads.status();
    return reload ? { replicas: sup.list(), reload } : { replicas: sup.list() };
  }

  async function onMessage(slot: Slot, child: Child, m: FromReplica): Promise<void> {
    if (m.t === 'own-port') return reloads.onOwnPort(child, m);
    if (m.t === 'prefixes') return share.relayPrefixes(child, m.batch);
    if (m.t === 'sync') return share.sync(child);
    if (m.t === 'applied') return share.onApplied(m.n, m.error);
    if (m.t === 'write') {
      // Any process, a retiring one too: it still serves the connections it holds.
      child.send({ t: 'written', n: m.n, outcomes: await share.fanOut(child, m.op) });
      return;
    }
    if (m.t === 'metrics') return metrics.onMetrics(m.n, m.metrics);
    if (m.t === 'ask') {
      // Any replica, a retiring one too: its own url still answers while it drains.
      try {
        const body = m.what === 'replicas' ? replicaList() : await metrics.aggregate();
        child.send({ t: 'answer', n: m.n, body });
      } catch (err) {
        child.send({ t: 'answer', n: m.n, error: (err as Error).message });
      }
      return;
    }
    sup.lifecycle(slot, child, m);
  }

  await sup.startAll();
  return {
    url: sup.sharedUrl,
    mode: spawner.mode,
    list: () => sup.list(),
    reloadStatus: () => reloads.status(),
    reload: () => reloads.reload(),
    stop: (graceMs, signal) => sup.stop(graceMs, signal),
  };
}
