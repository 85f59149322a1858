// Spare-connection upkeep (router/pool/worker-pool.ts wakeSpares) ticks only while there is
// something to keep: a stream in flight or a spare held. An idle router holds no interval timer
// for it, so that it is not woken 10 times a second in every replica; the next request's pick
// starts the upkeep again. The interval timers are Vitest's fake ones (counted and stepped, not
// timed); the workers are real simulated processes, and the spares real connections to them.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { WorkerPool } from '../../router/pool/worker-pool.ts';
import { createPolicy } from '../../router/pool/policies/index.ts';
import { SPARE_MAX_AGE_MS } from '../../router/pool/spares.ts';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { waitUntil } from './harness/procs.ts';

/** The pool's upkeep period (worker-pool.ts SPARE_INTERVAL_MS). */
const TICK_MS = 100;

let cluster: SimCluster;
let pool: WorkerPool | null = null;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0 });
});
afterAll(async () => {
  await cluster?.stop();
});
afterEach(async () => {
  await pool?.close();
  pool = null;
  vi.useRealTimers();
});

async function startPool(): Promise<WorkerPool> {
  pool = new WorkerPool(
    { circuit: { failureThreshold: 3, openMs: 1000, successThreshold: 1 }, connectTimeoutMs: 2000, healthIntervalMs: 0, healthTimeoutMs: 2000, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 4, loadIntervalMs: 0 },
    createPolicy('least_inflight'),
    () => undefined,
    () => undefined,
  );
  for (const w of cluster.workers()) await pool.add(w.url);
  // Only intervals (and the clock the spares age by) are faked: sockets and their timeouts are real.
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
  pool.start();
  return pool;
}

describe('spare-connection upkeep', () => {
  it('stops on an idle pool, starts again at the next pick, and ticks while a stream is in flight', async () => {
    const p = await startPool();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(TICK_MS);
    // No stream, no spare: the first tick found nothing to do and stopped.
    expect(vi.getTimerCount()).toBe(0);
    expect(p.sparesTicking).toBe(false);
    vi.advanceTimersByTime(60_000);
    expect(vi.getTimerCount()).toBe(0);

    const w = p.pick(new Set())!;
    expect(w).not.toBeNull();
    expect(p.sparesTicking).toBe(true);
    // The attempt starts on the pick's worker (migration/logical-request.ts startAttempt).
    w.inFlight++;
    vi.advanceTimersByTime(10 * TICK_MS);
    expect(p.sparesTicking).toBe(true);
    w.inFlight--;
  });

  it('keeps ticking while a spare is held, until the spare has aged out, then stops', async () => {
    const p = await startPool();
    const [a, b] = p.list();
    // A stream on `a` sizes `b`'s spares for the burst `a`'s death would send it.
    a!.inFlight++;
    vi.advanceTimersByTime(TICK_MS);
    await waitUntil(() => (b!.spares?.size ?? 0) > 0, 10_000, 'a spare connection to the other worker');
    a!.inFlight--;
    // No stream now, but a spare is kept for a lull followed by a burst (spares.ts maintain): the
    // upkeep goes on to age it out.
    vi.advanceTimersByTime(TICK_MS);
    expect(b!.spares!.size).toBeGreaterThan(0);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(SPARE_MAX_AGE_MS + TICK_MS);
    expect(b!.spares!.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(p.sparesTicking).toBe(false);
  });
});
