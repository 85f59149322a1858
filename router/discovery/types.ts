// The discovery seam: where workers come from besides the command line and the worker API.
// A source (static list, watched file, Kubernetes Pods, Kubernetes EndpointSlices) reports what it
// sees; the reconciler (reconciler.ts) owns the workers sources added, and only those: a worker
// added by hand or through the worker API is never touched by discovery.
import type { FormatName } from '../core/types.ts';

/** One worker as a source sees it, keyed by something stable across restarts of the source (a pod UID). */
export interface DiscoveredWorker {
  /** Stable id within the source (Kubernetes: the pod's UID; a file: the URL). */
  key: string;
  url: string;
  /** A format the source insists on (a pod annotation); undefined: probe it as today. */
  format?: FormatName;
  /** What the dashboard shows next to the worker: pod name, namespace, node, ... */
  meta?: DiscoveredMeta;
  /** P/D role the source gives it (a pod matched by --prefill-selector / --decode-selector, docs/pd.md). */
  pdRole?: 'prefill' | 'decode';
  /** A prefill pod's bootstrap port (its `sglang.ai/bootstrap-port` annotation); null: probe it. */
  bootstrapPort?: number | null;
}

export interface DiscoveredMeta {
  /** The source's name: 'static', 'file', 'k8s-pods', 'k8s-endpointslices'. */
  source: string;
  /** A name the source gives the worker (the watched file's `name`). */
  name?: string;
  pod?: string;
  namespace?: string;
  node?: string;
  /** Why the worker went away or is going, read from its status (evicted, OOMKilled, exit code ...). */
  reason?: string;
}

/** What a source knows about its own health: shown in /workers, /metrics, events and the dashboard. */
export type DiscoveryState =
  | { kind: 'synced'; at: number }
  | { kind: 'stale'; since: number; detail: string }
  | { kind: 'forbidden'; detail: string } // RBAC: the missing verb, e.g. "list pods in namespace x"
  | { kind: 'unreachable'; detail: string };

/** What a source calls; the reconciler implements it. */
export interface DiscoverySink {
  /** The worker exists and may take requests (a Running and Ready pod). Idempotent. */
  upsert(w: DiscoveredWorker): void;
  /**
   * The worker is going away at `deadline` (epoch ms; a pod's deletionTimestamp): it takes nothing
   * new, and its streams that would not finish in time are continued elsewhere before then.
   */
  drain(key: string, deadline: number, reason?: string): void;
  /** The worker is gone now (no grace left). */
  remove(key: string, reason?: string): void;
  /**
   * A full listing (initial list, every re-list after a reconnect and on the re-list timer): keys the
   * source owns that are absent from `all` are removed, so a delete missed during a dropped watch
   * cannot leave a stale worker.
   */
  resync(all: DiscoveredWorker[]): void;
  state(s: DiscoveryState): void;
}

export interface DiscoverySource {
  readonly name: string;
  start(sink: DiscoverySink): Promise<void>;
  stop(): Promise<void>;
}
