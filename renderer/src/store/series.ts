// Time series for the strip and the charts, aggregated into one-second buckets in a ring of 15
// minutes. Charts read windows of 1, 5 or 15 minutes re-bucketed to about 60 points, so drawing
// cost does not grow with traffic.
import type { EventEffect } from './request-book.ts';

export interface Bucket {
  sec: number;
  tokensByWorker: Map<string, number>;
  started: number;
  finished: number;
  failed: number;
  migrations: number;
  failuresByKind: Map<string, number>;
  ttft: number[];
}

export interface SeriesPoint {
  t: number; // epoch ms at the start of the point
  tokensPerSec: Record<string, number>;
  requestsPerSec: number;
  /** Migrations within this point (an incident shows as a spike, not a minute-long plateau). */
  migrations: number;
  migrationsPerMin: number;
  ttftP50: number | null;
  ttftP99: number | null;
  failures: Record<string, number>;
}

const RING_SECONDS = 15 * 60;
/** TTFT samples kept per second: enough for percentiles, bounded under any load. */
const TTFT_SAMPLES = 200;

export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

export class Series {
  private readonly ring = new Map<number, Bucket>();
  totals = { migrations: 0, failures: 0, finished: 0 };

  private bucket(tMs: number): Bucket {
    const sec = Math.floor(tMs / 1000);
    let b = this.ring.get(sec);
    if (!b) {
      b = { sec, tokensByWorker: new Map(), started: 0, finished: 0, failed: 0, migrations: 0, failuresByKind: new Map(), ttft: [] };
      this.ring.set(sec, b);
    }
    return b;
  }

  add(tMs: number, effect: EventEffect): void {
    if (effect.tokens) this.addTokens(effect.tokens.worker, effect.tokens.delta, effect.tokens.since ?? tMs, tMs);
    if (effect.started) this.bucket(effect.startedAt ?? tMs).started++;
    if (effect.migrated) {
      this.bucket(tMs).migrations++;
      this.totals.migrations++;
    }
    if (effect.ttftMs !== undefined) {
      const b = this.bucket(effect.ttftAt ?? tMs);
      if (b.ttft.length < TTFT_SAMPLES) b.ttft.push(effect.ttftMs);
    }
    if (effect.finished) {
      const row = effect.finished;
      const b = this.bucket(row.ended_at);
      b.finished++;
      this.totals.finished++;
      if (row.outcome === 'failed') {
        b.failed++;
        this.totals.failures++;
        const kind = effect.failureKind ?? 'failed';
        b.failuresByKind.set(kind, (b.failuresByKind.get(kind) ?? 0) + 1);
      }
    }
  }

  /** Adds tokens produced over [from, to], shared among the seconds in proportion to overlap. */
  private addTokens(worker: string, delta: number, from: number, to: number): void {
    const add = (t: number, n: number) => {
      const b = this.bucket(t);
      b.tokensByWorker.set(worker, (b.tokensByWorker.get(worker) ?? 0) + n);
    };
    const start = Math.max(from, to - RING_SECONDS * 1000);
    if (to - start < 1) return add(to, delta);
    for (let s = Math.floor(start / 1000); s * 1000 < to; s++) {
      const overlap = Math.min(to, (s + 1) * 1000) - Math.max(start, s * 1000);
      if (overlap > 0) add(s * 1000, (delta * overlap) / (to - start));
    }
  }

  /** Drops buckets older than the ring. Call once per batch. */
  prune(nowMs: number): void {
    const oldest = Math.floor(nowMs / 1000) - RING_SECONDS;
    for (const sec of this.ring.keys()) if (sec < oldest) this.ring.delete(sec);
  }

  /** Sum of a per-bucket quantity over the last `seconds` complete seconds, per second. */
  rate(nowMs: number, seconds: number, pick: (b: Bucket) => number): number {
    const end = Math.floor(nowMs / 1000);
    let sum = 0;
    for (let s = end - seconds; s < end; s++) {
      const b = this.ring.get(s);
      if (b) sum += pick(b);
    }
    return sum / seconds;
  }

  /** `windowSec` seconds ending now, in points of `stepSec` seconds. */
  points(nowMs: number, windowSec: number, stepSec: number): SeriesPoint[] {
    const end = Math.floor(nowMs / 1000);
    const out: SeriesPoint[] = [];
    for (let start = end - windowSec; start < end; start += stepSec) {
      const tokens: Record<string, number> = {};
      const failures: Record<string, number> = {};
      let started = 0;
      let migrations = 0;
      const ttft: number[] = [];
      for (let s = start; s < start + stepSec; s++) {
        const b = this.ring.get(s);
        if (!b) continue;
        for (const [w, n] of b.tokensByWorker) tokens[w] = (tokens[w] ?? 0) + n;
        for (const [k, n] of b.failuresByKind) failures[k] = (failures[k] ?? 0) + n;
        started += b.started;
        migrations += b.migrations;
        ttft.push(...b.ttft);
      }
      for (const w of Object.keys(tokens)) tokens[w] = tokens[w]! / stepSec;
      ttft.sort((a, b) => a - b);
      out.push({
        t: start * 1000,
        tokensPerSec: tokens,
        requestsPerSec: started / stepSec,
        migrations,
        // A trailing minute at every point: an honest "per minute" even with one-second points.
        migrationsPerMin: this.rate((start + stepSec) * 1000, 60, (b) => b.migrations) * 60,
        ttftP50: quantile(ttft, 0.5),
        ttftP99: quantile(ttft, 0.99),
        failures,
      });
    }
    return out;
  }

  /** Tokens per second of one worker, one value per second, for a card's sparkline. */
  workerSparkline(nowMs: number, worker: string, seconds = 60): number[] {
    const end = Math.floor(nowMs / 1000);
    const out: number[] = [];
    for (let s = end - seconds; s < end; s++) out.push(this.ring.get(s)?.tokensByWorker.get(worker) ?? 0);
    return out;
  }
}
