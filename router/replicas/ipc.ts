// The messages between the primary of `--replicas` and its replicas (node:cluster's or
// child_process's IPC channel, with the `advanced` serialization so that NaN and typed arrays
// survive).
import type { RouterConfig } from '../config.ts';
import type { ReplicaOutcome, WorkerWrite } from '../http/worker-writes.ts';
import type { ReplicaIdentity, ReplicaList } from './identity.ts';

/** What the primary hands a replica in BATON_REPLICA_SPEC. */
export interface ReplicaSpec {
  config: RouterConfig;
  identity: ReplicaIdentity;
  ownPort: number;
  reusePort: boolean;
}

export type FromReplica =
  | { t: 'up'; url: string; ownUrl: string; startedAt: number; pid: number }
  /** The replica could not start; `usage`: because of a setting (a usage error at the CLI). */
  | { t: 'fatal'; message: string; usage: boolean }
  /** A question for the primary; answered by `answer` with the same n. */
  | { t: 'ask'; n: number; what: 'replicas' | 'metrics' }
  /** The answer to `own-port`: whether the replica's own port now listens, or why it could not. */
  | { t: 'own-port'; listening: boolean; error?: string }
  /** The answer to `collect`: prom-client's JSON form of this replica's registry. */
  | { t: 'metrics'; n: number; metrics: unknown[] }
  /**
   * cache_aware's prefixes this replica sent to workers (router/pool/prefix-share.ts PrefixBatch),
   * for the other replicas; the primary relays it unread (replicas/ knows no pool).
   */
  | { t: 'prefixes'; batch: unknown }
  /**
   * The replica's configured workers are in: it takes the worker writes made so far (answered by
   * `writes`), then each new one (`apply`), and the others' prefixes. Before it, messages sent to
   * a starting process could arrive before it listens for them.
   */
  | { t: 'sync' }
  /** A worker write this replica applied on the shared port, for the others; answered by `written` with the same n. */
  | { t: 'write'; n: number; op: WorkerWrite }
  /** The answer to `apply`: null when applied, else why not. */
  | { t: 'applied'; n: number; error: string | null };

export type FromPrimary =
  | { t: 'answer'; n: number; body?: ReplicaList | string; error?: string }
  | { t: 'collect'; n: number }
  /** A reload replaced this replica: leave the shared port, drain, exit (replica-main.ts). */
  | { t: 'retire' }
  /**
   * Stop (listen: false) or start again listening on the replica's own port, keeping its open
   * connections: a reload's new replica of the slot binds the same fixed port (--replica-admin-port-base).
   */
  | { t: 'own-port'; listen: boolean }
  /** Another replica's prefixes (FromReplica `prefixes`). */
  | { t: 'prefixes'; batch: unknown }
  /** The answer to `sync`: the worker writes made on the shared port so far (the latest per worker URL), to apply in order. */
  | { t: 'writes'; ops: WorkerWrite[] }
  /** Another replica's worker write, to apply here; answered by `applied` with the same n. */
  | { t: 'apply'; n: number; op: WorkerWrite }
  /** The answer to `write`: every replica's outcome, in index order. */
  | { t: 'written'; n: number; outcomes: ReplicaOutcome[] };
