// The messages between the primary of `--replicas` and its replicas (node:cluster's or
// child_process's IPC channel, with the `advanced` serialization so that NaN survives).
import type { RouterConfig } from '../config.ts';
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
  | { t: 'metrics'; n: number; metrics: unknown[] };

export type FromPrimary =
  | { t: 'answer'; n: number; body?: ReplicaList | string; error?: string }
  | { t: 'collect'; n: number }
  /** A reload replaced this replica: leave the shared port, drain, exit (replica-main.ts). */
  | { t: 'retire' }
  /**
   * Stop (listen: false) or start again listening on the replica's own port, keeping its open
   * connections: a reload's new replica of the slot binds the same fixed port (--replica-admin-port-base).
   */
  | { t: 'own-port'; listen: boolean };
