// Herding under replicas (docs/replicas.md "Herding"): when a worker dies, every replica
// continues its share of that worker's streams at the same moment. Each replica's policy sees
// only its own in-flight counts; the workers' own load (what they last reported) is what the
// replicas share. With spreadContinuations, a continuation is placed by two random choices over
// that load: no survivor takes every replica's burst.
import { describe, expect, it } from 'vitest';
import { WorkerPool } from '../../router/pool/worker-pool.ts';
import { createPolicy } from '../../router/pool/policies/index.ts';
import type { Placement } from '../../router/pool/policies/policy.ts';

const OPTS = {
  circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
  connectTimeoutMs: 500, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0,
};

/** N replicas' pools over the same survivors (reported loads as given); each continues `share` streams. Continuations per survivor. */
async function burst(spread: boolean, replicas: number, share: number, reported: number[]): Promise<number[]> {
  const got = reported.map(() => 0);
  for (let r = 0; r < replicas; r++) {
    const pool = new WorkerPool({ ...OPTS, spreadContinuations: spread }, createPolicy('least_inflight'), () => undefined, () => undefined);
    try {
      // Port 9 on loopback refuses: nothing connects.
      const ws = [];
      for (let i = 0; i < reported.length; i++) ws.push(await pool.add(`http://127.0.${i}.1:9`));
      ws.forEach((w, i) => Object.assign(w, { healthy: true, dead: false, reportedLoad: reported[i]! }));
      for (let k = 0; k < share; k++) {
        const placement: Placement = { prompt: [], replayed: [1, 2, 3], prefix: null, reason: null };
        const w = pool.pick(new Set(), null, 'sglang', placement)!;
        // The continuation is in flight on this replica's count; other replicas do not see it.
        w.inFlight++;
        got[ws.indexOf(w)]!++;
        if (spread) expect(placement.reason).toBe('spread');
      }
    } finally {
      await pool.close();
    }
  }
  return got;
}

describe('continuations under replicas', () => {
  it('go mostly to the survivor the workers report idle, yet never all of them (no herd)', async () => {
    // Survivor 0 is reported idle, 1 and 2 busy (40 each). 8 replicas each continue 8 streams.
    const plain = await burst(false, 8, 8, [0, 40, 40]);
    const spread = await burst(true, 8, 8, [0, 40, 40]);
    expect(plain.reduce((a, b) => a + b, 0)).toBe(64);
    expect(spread.reduce((a, b) => a + b, 0)).toBe(64);
    // least_inflight on each replica's own counts ignores what the workers report: the busy
    // survivors take as many as the idle one.
    expect(Math.max(...plain) - Math.min(...plain)).toBeLessThanOrEqual(8);
    // Two random choices over the reported load: the idle survivor wins whenever it is drawn
    // (about 2/3 of the picks); the busy ones share the rest. Each busy one gets none with
    // probability (5/6)^64 < 1e-5, and the idle one all with (2/3)^64 < 1e-11.
    expect(spread[0]).toBeGreaterThan(Math.max(spread[1]!, spread[2]!));
    expect(spread[0]).toBeLessThan(64);
    expect(spread.every((n) => n > 0)).toBe(true);
  });

  it('leave first attempts to the policy', async () => {
    const pool = new WorkerPool({ ...OPTS, spreadContinuations: true }, createPolicy('round_robin'), () => undefined, () => undefined);
    try {
      const ws = [await pool.add('http://127.0.0.1:9'), await pool.add('http://127.0.1.1:9')];
      ws.forEach((w) => Object.assign(w, { healthy: true, dead: false }));
      const picks = [0, 1, 2, 3].map(() => {
        const placement: Placement = { prompt: [], replayed: null, prefix: null, reason: null };
        const w = pool.pick(new Set(), null, 'sglang', placement)!;
        expect(placement.reason).toBeNull();
        return ws.indexOf(w);
      });
      expect(picks).toEqual([0, 1, 0, 1]);
    } finally {
      await pool.close();
    }
  });
});

describe('the continuation burst chaos --replicas reports', () => {
  it('counts continuations (attempt > 0) started on each survivor within 2 s of the kill', async () => {
    const { burstOf } = await import('../../chaos/replicas.ts');
    const row = (worker: string, attempt: number, started_at: number) => ({ worker, attempt, started_at }) as never;
    const rows = [row('b', 1, 1000), row('b', 2, 1500), row('c', 1, 2999), row('c', 0, 1100), row('c', 1, 3000), row('b', 1, 999), row('a', 1, 1200)];
    expect(burstOf({ url: 'a', at: 1000 }, rows, ['a', 'b', 'c'])).toEqual({ killed: 'a', at: 1000, bySurvivor: { b: 2, c: 1 }, peakOverEven: 1.33 });
    expect(burstOf({ url: 'a', at: 9000 }, rows, ['a', 'b', 'c']).peakOverEven).toBe(0);
  });
});
