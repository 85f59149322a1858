// Writes to the worker list (the worker API's add, remove, drain and undrain; /flush_cache) as
// data, and their way to every replica of `--replicas` (docs/replicas.md, "Worker writes").
//
// Each replica is a whole router with its own pool, so a write made on the shared port reaches
// the replica that took the connection. That replica applies it, then hands it to the primary,
// which applies it on every other replica over IPC and keeps it for the replicas that start later
// (a restart, a reload). A write names its worker by URL: worker ids are each pool's own (w0, w1,
// ... in the order it met the workers), and two replicas need not have met them in one order.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { Drainer } from '../migration/drain.ts';

export type WorkerWrite =
  | { op: 'add'; url: string }
  | { op: 'remove'; url: string }
  /** Drain toward `deadline` (epoch ms, the same for every replica), removed at it. */
  | { op: 'drain'; url: string; deadline: number }
  /** Draining with no deadline, or (false) any drain called off. */
  | { op: 'draining'; url: string; draining: boolean }
  /** The workers at `urls` answered /flush_cache: their caches are empty; forget what was sent to them. */
  | { op: 'flushed'; urls: string[] };

/** One replica's outcome of a write, as the primary reports it (every slot, in index order). */
export interface ReplicaOutcome {
  id: string;
  index: number;
  /** `pending`: not running now (restarting, crashed, starting): it applies the write when it starts. */
  state: 'applied' | 'failed' | 'pending';
  error?: string;
}

/** The `replicas` field of a write's answer on the shared port (the gateway's fan-out answers name successes and failures the same way). */
export interface ReplicasReport {
  successful: string[];
  failed: { replica: string; error: string }[];
  pending: string[];
  total_replicas: number;
  message: string;
}

/** The replicas' side of the worker API, filled by router/index.ts from the replica link; null for a lone router. */
export interface ReplicaWrites {
  /** Whether the request came in on the port every replica shares: on a replica's own port a write stays with that replica. */
  shared(req: IncomingMessage): boolean;
  /** Hand a write this replica has applied to the others; every replica's outcome. Rejects when the primary does not answer. */
  fanOut(op: WorkerWrite): Promise<ReplicaOutcome[]>;
}

/** Apply one write to this router's pool: null when done, else why not. */
export async function applyWrite(pool: WorkerPool, drainer: Drainer, op: WorkerWrite): Promise<string | null> {
  if (op.op === 'add') {
    try {
      await pool.add(op.url);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  }
  if (op.op === 'flushed') {
    for (const url of op.urls) {
      const w = pool.byUrl(url);
      if (w) pool.cacheFlushed(w);
    }
    return null;
  }
  const w = pool.byUrl(op.url);
  // Not there is what a remove asks for.
  if (op.op === 'remove') {
    if (w) {
      drainer.forget(w.id);
      pool.remove(w.id);
    }
    return null;
  }
  // A drain this replica cannot apply leaves it free to send the worker new requests: a failure.
  if (!w) return `no worker ${op.url} in this replica's pool`;
  if (op.op === 'drain') drainer.drain(w.id, op.deadline, 'drained through the worker API');
  else if (op.draining) pool.setDraining(w.id, true);
  else drainer.undrain(w.id);
  return null;
}

/** The `replicas` field from every replica's outcome. */
export function replicasReport(outcomes: readonly ReplicaOutcome[]): ReplicasReport {
  const ok = outcomes.filter((o) => o.state === 'applied');
  const failed = outcomes.filter((o) => o.state === 'failed');
  const pending = outcomes.filter((o) => o.state === 'pending');
  const n = outcomes.length;
  const notes = [
    ...failed.map((o) => `replica ${o.index} (${o.id}) ${o.error ?? 'failed'}`),
    ...pending.map((o) => `replica ${o.index} (${o.id}) is not running: it applies the write when it starts`),
  ];
  const message = ok.length === n ? `applied on every replica (${n})` : `applied on ${ok.length} of ${n} replicas; ${notes.join('; ')}`;
  return {
    successful: ok.map((o) => o.id),
    failed: failed.map((o) => ({ replica: o.id, error: o.error ?? 'failed' })),
    pending: pending.map((o) => o.id),
    total_replicas: n,
    message,
  };
}

/**
 * Hand a write made on the shared port to the other replicas and say how it went, or (null) not
 * a write to share: a lone router, or a replica's own port. The primary not answering at all is
 * one failure.
 */
export async function shareWrite(writes: ReplicaWrites | null, req: IncomingMessage, op: WorkerWrite): Promise<ReplicasReport | null> {
  if (writes === null || !writes.shared(req)) return null;
  try {
    return replicasReport(await writes.fanOut(op));
  } catch (err) {
    const error = `the primary did not answer (${(err as Error).message}); the other replicas may not have it`;
    return { successful: [], failed: [{ replica: 'primary', error }], pending: [], total_replicas: 0, message: `applied on this replica; ${error}` };
  }
}

/** A write's JSON answer: the lone router's body, with `replicas` on the shared port; 502 when a replica failed it. */
export function sendWritten(res: ServerResponse, body: object, report: ReplicasReport | null): void {
  const text = JSON.stringify(report === null ? body : { ...body, replicas: report });
  res.writeHead(report !== null && report.failed.length > 0 ? 502 : 200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}
