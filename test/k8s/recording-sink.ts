// A DiscoverySink that records what a source told it and keeps the set it implies: the stand-in for
// the reconciler when a source is tested alone.
import type { DiscoveredWorker, DiscoverySink, DiscoveryState } from '../../router/discovery/types.ts';

export type SinkCall =
  | { op: 'upsert'; w: DiscoveredWorker }
  | { op: 'drain'; key: string; deadline: number; reason?: string }
  | { op: 'remove'; key: string; reason?: string }
  | { op: 'resync'; keys: string[] }
  | { op: 'state'; s: DiscoveryState };

export class RecordingSink implements DiscoverySink {
  readonly calls: SinkCall[] = [];
  readonly workers = new Map<string, { w: DiscoveredWorker; drainDeadline: number | null }>();
  states: DiscoveryState[] = [];

  upsert(w: DiscoveredWorker): void {
    this.calls.push({ op: 'upsert', w });
    const prev = this.workers.get(w.key);
    this.workers.set(w.key, { w, drainDeadline: prev?.drainDeadline ?? null });
  }

  drain(key: string, deadline: number, reason?: string): void {
    this.calls.push({ op: 'drain', key, deadline, reason });
    const prev = this.workers.get(key);
    if (prev) prev.drainDeadline = deadline;
  }

  remove(key: string, reason?: string): void {
    this.calls.push({ op: 'remove', key, reason });
    this.workers.delete(key);
  }

  resync(all: DiscoveredWorker[]): void {
    this.calls.push({ op: 'resync', keys: all.map((w) => w.key) });
    const keep = new Set(all.map((w) => w.key));
    for (const k of [...this.workers.keys()]) if (!keep.has(k)) this.workers.delete(k);
    for (const w of all) {
      const prev = this.workers.get(w.key);
      this.workers.set(w.key, { w, drainDeadline: prev?.drainDeadline ?? null });
    }
  }

  state(s: DiscoveryState): void {
    this.calls.push({ op: 'state', s });
    this.states.push(s);
  }

  get last(): DiscoveryState | undefined {
    return this.states[this.states.length - 1];
  }

  /** Serving workers (not draining): key → url. */
  serving(): Map<string, string> {
    return new Map([...this.workers].filter(([, v]) => v.drainDeadline === null).map(([k, v]) => [k, v.w.url]));
  }

  draining(): Map<string, number> {
    return new Map([...this.workers].filter(([, v]) => v.drainDeadline !== null).map(([k, v]) => [k, v.drainDeadline!]));
  }
}

/** Polls `cond` until it holds; fails with `what` after `ms` (a bound on a wait, not a measured time). */
export async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
