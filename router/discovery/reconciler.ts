// The reconciler: the one DiscoverySink every source reports to. It owns the workers that sources
// added, keyed by source + key, and only those: a worker added by hand (--worker, POST /workers)
// is never drained, replaced or removed by discovery, even when a source lists its URL.
//
// Rules (docs/architecture.md, "Discovery"):
// - upsert: a new key adds its worker; a known key with a new URL replaces it (a pod's IP
//   changed); a known key with the same URL only refreshes what the dashboard shows.
// - drain: the key's worker takes nothing new and its streams move before the deadline
//   (migration/drain.ts); the drainer removes it at the deadline. A drain is one-way: an upsert
//   of the same URL does not undo it (a terminating pod does not come back), and a listing
//   without the key leaves it to its deadline (the streams still move).
// - remove: the worker goes now (in-flight attempts keep their connections until they end).
// - resync: owned keys of that source absent from the listing go (a delete missed while a
//   watch was down cannot leave a stale worker); present ones are upserted.
// A key whose URL a hand-added worker (or another key) already serves is owned with no worker
// of its own: the hand-added one stays as it is.
import type { DiscoveryStatus, WorkerDiscovery } from '../events/types.ts';
import type { FormatName } from '../core/types.ts';
import type { Worker } from '../pool/worker.ts';
import type { DiscoveredWorker, DiscoverySink, DiscoveryState } from './types.ts';

/** What the reconciler needs of the pool (router/pool/worker-pool.ts WorkerPool has it). */
export interface ReconcilerPool {
  get(id: string): Worker | undefined;
  adopt(url: string, prepare?: (w: Worker) => void): { worker: Worker; added: boolean };
  remove(id: string): boolean;
}

/** Drains a worker toward a deadline and removes it then (router/migration/drain.ts Drainer). */
export interface ReconcilerDrainer {
  drain(workerId: string, deadline: number, reason: string): void;
  /** A worker about to be removed before its deadline: stop its drain's timers. */
  forget(workerId: string): void;
}

/** One key a source reported, and the worker it has (null: its URL is another worker's). */
interface Owned {
  source: string;
  key: string;
  url: string;
  workerId: string | null;
  draining: boolean;
}

export interface OwnedView {
  source: string;
  key: string;
  url: string;
  /** The pool's worker for the key, or null when a worker added by hand (or by another key) serves its URL. */
  workerId: string | null;
  draining: boolean;
}

export class Reconciler {
  private readonly owned = new Map<string, Owned>();
  private readonly states = new Map<string, DiscoveryState>();
  /** Sources that have listed their workers at least once. */
  private readonly synced = new Set<string>();

  constructor(
    private readonly pool: ReconcilerPool,
    private readonly drainer: ReconcilerDrainer,
    /** Told every state change of a source (telemetry: events; metrics read status()). */
    private readonly onState: (status: DiscoveryStatus) => void = () => undefined,
    private readonly log: (line: string) => void = () => undefined,
  ) {}

  /** The sink one source reports to. */
  sink(source: string): DiscoverySink {
    return {
      upsert: (w) => this.upsert(source, w),
      drain: (key, deadline, reason) => this.drain(source, key, deadline, reason ?? 'drain'),
      remove: (key, reason) => this.remove(source, key, reason),
      resync: (all) => this.resync(source, all),
      state: (s) => this.setState(source, s),
    };
  }

  /** Every key sources reported and did not take back (tests, /workers). */
  ownedKeys(): OwnedView[] {
    const out: OwnedView[] = [];
    for (const e of this.owned.values()) {
      // A worker removed meanwhile (its drain's deadline, DELETE /workers/:id) is not ours any more.
      out.push({ source: e.source, key: e.key, url: e.url, workerId: this.live(e), draining: e.draining });
    }
    return out;
  }

  /** Each source's state and how many workers it has in the pool now. */
  status(): DiscoveryStatus[] {
    const counts = new Map<string, number>();
    for (const e of this.owned.values()) if (this.live(e) !== null) counts.set(e.source, (counts.get(e.source) ?? 0) + 1);
    const out: DiscoveryStatus[] = [];
    for (const [source, s] of this.states) out.push(describe(source, s, counts.get(source) ?? 0));
    for (const [source, n] of counts) if (!this.states.has(source)) out.push({ source, state: 'unknown', at: null, detail: null, workers: n });
    return out;
  }

  /**
   * Which of `sources` have never listed their workers, with their state (forbidden, unreachable,
   * ...), or null when each has: a router's readiness waits for the first listing, not after it.
   */
  firstSyncPending(sources: readonly string[]): string | null {
    const waiting = sources.filter((s) => !this.synced.has(s));
    if (waiting.length === 0) return null;
    const status = this.status();
    return waiting.map((source) => {
      const st = status.find((x) => x.source === source);
      return st && st.state !== 'unknown' ? `${source} ${st.state}${st.detail ? ` (${st.detail})` : ''}` : `${source} has not listed yet`;
    }).join('; ');
  }

  private upsert(source: string, w: DiscoveredWorker): void {
    const id = ownedId(source, w.key);
    const e = this.owned.get(id);
    const tag: WorkerDiscovery = { ...w.meta, source: w.meta?.source ?? source, key: w.key };
    if (e && e.url === w.url && this.live(e) !== null) {
      const worker = this.pool.get(e.workerId!)!;
      // A draining worker keeps why it drains (a re-list lists it again until its deadline).
      worker.discovery = e.draining && worker.discovery?.reason !== undefined ? { ...tag, reason: worker.discovery.reason } : tag;
      return;
    }
    if (e) this.release(e, `replaced: ${w.key} now at ${w.url}`);
    this.owned.set(id, this.claim(source, w, tag));
  }

  private drain(source: string, key: string, deadline: number, reason: string): void {
    const e = this.owned.get(ownedId(source, key));
    if (!e) return; // never added (not yet ready): nothing to drain
    const workerId = this.live(e);
    if (e.draining && workerId !== null) return;
    e.draining = true;
    if (workerId !== null) {
      // Why it is going, on the worker itself: /workers, the dashboard's card and the removal's event carry it.
      const worker = this.pool.get(workerId)!;
      if (worker.discovery) worker.discovery = { ...worker.discovery, reason };
      this.drainer.drain(workerId, deadline, reason);
    }
  }

  private remove(source: string, key: string, reason?: string): void {
    const id = ownedId(source, key);
    const e = this.owned.get(id);
    if (!e) return;
    this.owned.delete(id);
    this.release(e, reason ?? 'removed by its source');
  }

  private resync(source: string, all: DiscoveredWorker[]): void {
    const listed = new Set<string>();
    for (const w of all) {
      listed.add(w.key);
      this.upsert(source, w);
    }
    for (const [id, e] of this.owned) {
      // A draining key stays until its deadline: its streams are on their way off it.
      if (e.source === source && !listed.has(e.key) && !(e.draining && this.live(e) !== null)) {
        this.owned.delete(id);
        this.release(e, 'absent from the listing');
      }
    }
  }

  /** Told on a change of kind or detail only: a source re-reads (and is synced again) every few seconds. */
  private setState(source: string, s: DiscoveryState): void {
    if (s.kind === 'synced') this.synced.add(source);
    const before = this.states.get(source);
    this.states.set(source, s);
    if (before && before.kind === s.kind && ('detail' in before ? before.detail : null) === ('detail' in s ? s.detail : null)) return;
    this.onState(this.status().find((x) => x.source === source)!);
  }

  /** Add the key's worker, unless its URL is already served (then the key has no worker of its own). */
  private claim(source: string, w: DiscoveredWorker, tag: WorkerDiscovery): Owned {
    let adopted: { worker: Worker; added: boolean };
    try {
      adopted = this.pool.adopt(w.url, (worker) => {
        worker.discovery = tag;
        if (w.format) worker.format = w.format satisfies FormatName;
        if (w.pdRole) {
          worker.declaredRole = worker.pdRole = w.pdRole;
          worker.declaredBootstrapPort = worker.bootstrapPort = w.bootstrapPort ?? null;
        }
      });
    } catch (err) {
      // A bad URL from a source (an annotation typo): the key is owned with no worker, and said so.
      this.log(`discovery ${source}: ${w.key}: ${(err as Error).message}`);
      return { source, key: w.key, url: w.url, workerId: null, draining: false };
    }
    if (adopted.added) this.log(`discovery ${source}: added ${adopted.worker.id} ${adopted.worker.url} (${w.key})`);
    return { source, key: w.key, url: w.url, workerId: adopted.added ? adopted.worker.id : null, draining: false };
  }

  /** Remove the key's worker if it is still the one this key added. */
  private release(e: Owned, why: string): void {
    const workerId = this.live(e);
    if (workerId === null) return;
    this.drainer.forget(workerId);
    const worker = this.pool.get(workerId)!;
    // The removal's event carries the worker as it was last: with why it went (OOMKilled, Evicted, ...).
    if (worker.discovery) worker.discovery = { ...worker.discovery, reason: why };
    this.pool.remove(workerId);
    this.log(`discovery ${e.source}: removed ${workerId} ${e.url} (${e.key}): ${why}`);
  }

  /** The key's worker id while the pool still has that worker, else null. */
  private live(e: Owned): string | null {
    if (e.workerId === null) return null;
    const w = this.pool.get(e.workerId);
    return w !== undefined && w.discovery !== null ? e.workerId : null;
  }
}

function ownedId(source: string, key: string): string {
  return `${source}\u0000${key}`;
}

function describe(source: string, s: DiscoveryState, workers: number): DiscoveryStatus {
  switch (s.kind) {
    case 'synced': return { source, state: 'synced', at: s.at, detail: null, workers };
    case 'stale': return { source, state: 'stale', at: s.since, detail: s.detail, workers };
    case 'forbidden': return { source, state: 'forbidden', at: null, detail: s.detail, workers };
    case 'unreachable': return { source, state: 'unreachable', at: null, detail: s.detail, workers };
  }
}
