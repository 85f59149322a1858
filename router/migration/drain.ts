// Drain by migration: a worker that is going away at a deadline (a terminating pod, POST
// /workers/:id/drain, a worker that left --worker-file with a grace) takes nothing new, and each
// stream on it that would not finish by (deadline - margin) is continued token-exactly on another
// worker before then; at the deadline the worker is removed (docs/reliability.md, "Drain").
//
// - Would a stream finish in time? remaining tokens (max_new_tokens less those delivered) times
//   the inter-token time this attempt has shown (time since its first token / tokens since). A
//   stream with no budget, or no first token yet, is taken not to finish.
// - Staggered: the n streams to move get moves spread evenly over [now, deadline - margin), so
//   the survivors prefill them one after another rather than all at once. Each is estimated again
//   when its turn comes (one that will now finish in time stays), and a last sweep at
//   (deadline - margin) moves whatever is still there.
// - Break-then-make: the move aborts the attempt (error_kind `drain`, outcome `drained`) and the
//   loop starts the continuation in the same turn, from the tokens the client already has
//   (LogicalRequest.drainMove). Make-before-break would need two live attempts of one request:
//   the loop commits an attempt's tokens only when it ends and builds the continuation's body from
//   them, and the format writes the live attempt's frames straight to the client, so the old
//   attempt would have to be frozen at a token the new one starts from. The continuation goes out
//   on a spare connection (written at once), so the gap is the survivor's prefill of prompt +
//   delivered tokens, as for any migration.
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { LogicalRequest } from './logical-request.ts';

/** When each of `n` moves goes, in ms from now: evenly over `window` ms, the first at once. */
export function staggered(n: number, window: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(Math.floor((Math.max(0, window) * i) / n));
  return out;
}

/**
 * Whether an attempt will have finished by `cutoff`: its `remaining` tokens at the inter-token
 * time it has shown (`tokens` since its first token at `firstAt`). Not known (no first token,
 * fewer than two tokens, no budget): no.
 */
export function finishesBy(cutoff: number, now: number, firstAt: number | null, tokens: number, remaining: number | null): boolean {
  if (remaining === null || firstAt === null) return false;
  if (remaining <= 0) return true;
  if (tokens < 2) return false;
  return now + (remaining * (now - firstAt)) / (tokens - 1) <= cutoff;
}

export interface DrainSettings {
  /** Streams are off the worker by (deadline - marginMs). */
  marginMs: number;
}

interface Drain {
  deadline: number;
  reason: string;
  timers: NodeJS.Timeout[];
  done: Promise<void>;
  resolve: () => void;
}

export class Drainer {
  /** Logical requests in flight (the loop adds and deletes itself). */
  readonly live = new Set<LogicalRequest>();
  private readonly drains = new Map<string, Drain>();

  constructor(private readonly pool: WorkerPool, private readonly settings: DrainSettings) {}

  /** Whether the worker is draining toward a deadline. */
  deadline(workerId: string): number | null {
    return this.drains.get(workerId)?.deadline ?? null;
  }

  /**
   * Drain `workerId` until `deadline` (epoch ms), then remove it. A second drain of the same
   * worker moves the deadline (earlier or later) and plans the moves again. The promise resolves
   * when the worker is removed or the drain is called off. False: no such worker.
   */
  drain(workerId: string, deadline: number, reason = 'drain'): Promise<void> | false {
    const w = this.pool.get(workerId);
    if (!w) return false;
    const prev = this.drains.get(workerId);
    if (prev) for (const t of prev.timers) clearTimeout(t);
    let resolve!: () => void;
    const done = prev?.done ?? new Promise<void>((r) => (resolve = r));
    const d: Drain = { deadline, reason, timers: [], done, resolve: prev?.resolve ?? resolve };
    this.drains.set(workerId, d);
    w.drainDeadline = deadline;
    this.pool.setDraining(workerId, true); // emits the worker's state with its deadline
    const now = Date.now();
    const cutoff = deadline - this.settings.marginMs;
    const moving = this.onWorker(workerId).filter((r) => !r.finishesBy(cutoff, now));
    const window = Math.max(0, cutoff - now);
    staggered(moving.length, window).forEach((at, i) => d.timers.push(this.at(at, () => this.move(workerId, moving[i]!, cutoff))));
    d.timers.push(this.at(window, () => this.sweep(workerId)));
    d.timers.push(this.at(Math.max(0, deadline - now), () => this.expire(workerId)));
    return done;
  }

  /** Call a drain off: the worker takes requests again (PUT /workers/:id {"draining": false}). */
  undrain(workerId: string): boolean {
    const d = this.drains.get(workerId);
    if (d) this.end(workerId, d);
    const w = this.pool.get(workerId);
    if (w) w.drainDeadline = null;
    return this.pool.setDraining(workerId, false);
  }

  /** The worker is being removed before its deadline: stop its timers. */
  forget(workerId: string): void {
    const d = this.drains.get(workerId);
    if (d) this.end(workerId, d);
  }

  close(): void {
    for (const [id, d] of this.drains) this.end(id, d);
  }

  private onWorker(workerId: string): LogicalRequest[] {
    const out: LogicalRequest[] = [];
    for (const r of this.live) if (r.currentWorkerId() === workerId) out.push(r);
    return out;
  }

  /** One stream's turn: still on the worker and still not finishing in time → move it. */
  private move(workerId: string, r: LogicalRequest, cutoff: number): void {
    if (r.currentWorkerId() !== workerId || r.finishesBy(cutoff, Date.now())) return;
    r.drainMove(this.drains.get(workerId)?.reason ?? 'drain');
  }

  /** (deadline - margin): whatever is still on the worker moves now. */
  private sweep(workerId: string): void {
    const reason = this.drains.get(workerId)?.reason ?? 'drain';
    for (const r of this.onWorker(workerId)) r.drainMove(reason);
  }

  private expire(workerId: string): void {
    const d = this.drains.get(workerId);
    if (!d) return;
    this.end(workerId, d);
    this.pool.remove(workerId);
  }

  private end(workerId: string, d: Drain): void {
    for (const t of d.timers) clearTimeout(t);
    this.drains.delete(workerId);
    d.resolve();
  }

  private at(ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  }
}
