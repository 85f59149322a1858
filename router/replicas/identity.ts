// A router's identity among replicas, and the routes that show them (docs/replicas.md).
//
// Every router process has a replica id (4 lowercase hex, fixed length so that the rids it
// carries stay prefix-free: router/migration/rid.ts), an index (its slot under the primary of
// `--replicas`, 0 for a lone router) and an epoch (how many times that slot was restarted). A
// lone router is the one-replica case: GET /replicas answers one entry, its own.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Routes } from '../http/routes.ts';
import type { RouterMetrics } from '../metrics.ts';
import { setRidIdentity } from '../migration/rid.ts';
import type { ReplicaOutcome, WorkerWrite } from '../http/worker-writes.ts';

export type ReplicaState = 'up' | 'restarting' | 'crashed';

export interface ReplicaIdentity {
  id: string;
  index: number;
  epoch: number;
}

/** One line of GET /replicas (the contract the dashboard hub reads). */
export interface ReplicaEntry extends ReplicaIdentity {
  pid: number;
  /** The replica's own address: its /events, /traces, /workers, /metrics, /requests/... alone. */
  url: string;
  started_at: number;
  state: ReplicaState;
}

/** The latest reload of a `--replicas` primary (SIGHUP; docs/replicas.md, "Reload"). */
export interface ReloadStatus {
  state: 'reloading' | 'done' | 'failed';
  started_at: number;
  ended_at: number | null;
  /** The slot being replaced (reloading), or the one whose new process failed to start (failed). */
  slot: number | null;
  /** Why it failed. */
  message: string | null;
  /** Replaced processes still draining their requests. */
  draining: { index: number; epoch: number; pid: number }[];
}

/** The body of GET /replicas; `reload` once the primary has reloaded. */
export interface ReplicaList {
  replicas: ReplicaEntry[];
  reload?: ReloadStatus | null;
}

/** A replica's line to its primary (router/replicas/replica-main.ts fills it over IPC). */
export interface ReplicaLink {
  identity: ReplicaIdentity;
  /** The replica's own loopback port (0: any free one). */
  ownPort: number;
  /** Share the router's port with SO_REUSEPORT (independent processes, Node >= 22.12) rather than node:cluster's handle. */
  reusePort: boolean;
  /** The primary's latest list. */
  list(): Promise<ReplicaList>;
  /** /metrics over every replica, aggregated by the primary. */
  aggregatedMetrics(): Promise<string>;
  /**
   * Called once the router serves on both addresses, with its shared address and how to read its
   * metrics (prom-client's JSON form, for the primary's aggregation).
   */
  up(url: string, ownUrl: string, startedAt: number, metrics: () => Promise<unknown[]>): void;
  /**
   * Called once the router's configured workers are in, before `up`: the worker writes made on
   * the shared port so far are applied (resolves when they are), then each new one as it comes,
   * and the other replicas' prefixes go to `learnPrefixes`.
   */
  attach(sync: ReplicaSync): Promise<void>;
  /** Hand a worker write this replica applied on the shared port to the others (through the primary); every replica's outcome. */
  write(op: WorkerWrite): Promise<ReplicaOutcome[]>;
  /** Send cache_aware's prefixes to the others; `written` once the channel has written them. */
  sharePrefixes(batch: unknown, written: () => void): void;
}

/** What a replica does with what the others send (router/index.ts fills it). */
export interface ReplicaSync {
  /** Apply another replica's worker write: null when done, else why not. */
  apply(op: WorkerWrite): Promise<string | null>;
  /** Another replica's prefixes (router/pool/prefix-share.ts PrefixBatch). */
  learnPrefixes(batch: unknown): void;
}

/** A replica id: 4 lowercase hex digits. */
export function replicaId(n: number): string {
  return (n & 0xffff).toString(16).padStart(4, '0');
}

/** This process's identity (a lone router draws a random id), which its rids then carry. */
export function adoptIdentity(link: ReplicaLink | undefined): ReplicaIdentity {
  const identity = link?.identity ?? { id: replicaId(randomBytes(2).readUInt16BE(0)), index: 0, epoch: 0 };
  setRidIdentity(identity.id, identity.epoch);
  return identity;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

export interface ReplicaRouteParts {
  identity: ReplicaIdentity;
  link: ReplicaLink | undefined;
  metrics: RouterMetrics;
  startedAt: number;
  /** The router's own address (a replica's loopback one), once listening. */
  ownUrl(): string;
  /** The port every replica shares (the router's --port once bound). */
  sharedPort(): number;
}

/**
 * GET /replicas (admin), and for a replica GET /metrics: on the shared port, every replica's
 * metrics aggregated by the primary; on the replica's own port, its own. Added before the
 * router's own routes, so that this /metrics is the one matched.
 */
export function addReplicaRoutes(routes: Routes, p: ReplicaRouteParts): void {
  routes.add('GET', '/replicas', async (_req, res) => {
    if (!p.link) return send(res, 200, { replicas: [{ ...p.identity, pid: process.pid, url: p.ownUrl(), started_at: p.startedAt, state: 'up' }] });
    try {
      send(res, 200, await p.link.list());
    } catch (err) {
      send(res, 503, { object: 'error', message: `the primary did not answer: ${(err as Error).message}`, type: 'ServiceUnavailableError', param: null, code: 503 });
    }
  }, true);
  const link = p.link;
  if (!link) return;
  routes.add('GET', '/metrics', async (req, res) => {
    let text: string;
    if (req.socket.localPort === p.sharedPort()) {
      try {
        text = await link.aggregatedMetrics();
      } catch (err) {
        return send(res, 503, { object: 'error', message: `metrics over the replicas are unavailable (${(err as Error).message}); each replica's own are on its url in GET /replicas`, type: 'ServiceUnavailableError', param: null, code: 503 });
      }
    } else text = await p.metrics.exposition();
    res.writeHead(200, { 'content-type': p.metrics.registry.contentType });
    res.end(text);
  }, false);
}
