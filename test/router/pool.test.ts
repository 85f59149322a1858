// Circuit breaker and policies: small state machines, checked step by step.
import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from '../../router/pool/circuit-breaker.ts';
import { createPolicy } from '../../router/pool/policies/index.ts';
import { PowerOfTwo } from '../../router/pool/policies/power-of-two.ts';
import type { Worker } from '../../router/pool/worker.ts';

describe('CircuitBreaker', () => {
  it('opens after N failures, half-opens after the cool-down, closes after M successes', () => {
    const cb = new CircuitBreaker({ failureThreshold: 3, openMs: 1000, successThreshold: 2 });
    cb.recordFailure(0);
    cb.recordFailure(0);
    expect(cb.state(0)).toBe('closed');
    cb.recordFailure(0);
    expect(cb.state(0)).toBe('open');
    expect(cb.allows(999)).toBe(false);
    expect(cb.state(1000)).toBe('half_open');
    cb.recordSuccess();
    expect(cb.state(1000)).toBe('half_open');
    cb.recordSuccess();
    expect(cb.state(1000)).toBe('closed');
  });
  it('a failure while half-open opens it again', () => {
    const cb = new CircuitBreaker({ failureThreshold: 1, openMs: 10, successThreshold: 1 });
    cb.recordFailure(0);
    expect(cb.state(10)).toBe('half_open');
    cb.recordFailure(10);
    expect(cb.state(11)).toBe('open');
  });
});

const fake = (id: string, inFlight: number) => ({ id, inFlight, load: () => inFlight }) as unknown as Worker;

describe('policies', () => {
  it('round_robin cycles', () => {
    const p = createPolicy('round_robin');
    const ws = [fake('a', 0), fake('b', 0), fake('c', 0)];
    expect([1, 2, 3, 4].map(() => p.select(ws).id)).toEqual(['a', 'b', 'c', 'a']);
  });
  it('least_inflight picks the least loaded and rotates ties', () => {
    const p = createPolicy('least_inflight');
    expect(p.select([fake('a', 3), fake('b', 1), fake('c', 2)]).id).toBe('b');
    const ties = [fake('a', 0), fake('b', 0)];
    expect(new Set([p.select(ties).id, p.select(ties).id])).toEqual(new Set(['a', 'b']));
  });
  it('power_of_two takes the less loaded of two distinct random picks', () => {
    const seq = [0.1, 0.9];
    const p = new PowerOfTwo(() => seq.shift() ?? 0);
    expect(p.select([fake('a', 5), fake('b', 9), fake('c', 1)]).id).toBe('c');
  });
  it('an unknown policy is refused with the known names', () => {
    expect(() => createPolicy('best')).toThrow(/least_inflight, round_robin, power_of_two/);
  });
});

describe('spare connection sizing (WorkerPool.maintainSpares)', () => {
  it("gives each worker the busiest other worker's streams plus one, capped, and none without traffic or when out", async () => {
    const { WorkerPool } = await import('../../router/pool/worker-pool.ts');
    const opts = {
      circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 500, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000,
    };
    // Port 9 on loopback refuses: spares are sized but never connect, so nothing is left open.
    const sized = async (cap: number, inFlight: number[], out: number[] = []) => {
      const pool = new WorkerPool({ ...opts, spareConnections: cap }, createPolicy('least_inflight'), () => undefined, () => undefined);
      try {
        const ws = [];
        for (let i = 0; i < inFlight.length; i++) ws.push(await pool.add(`http://127.0.${i}.1:9`));
        ws.forEach((w, i) => {
          w.healthy = true;
          w.dead = false;
          w.inFlight = inFlight[i]!;
          if (out.includes(i)) w.draining = true;
        });
        pool.maintainSpares();
        return ws.map((w) => w.spares!.target);
      } finally {
        await pool.close();
      }
    };
    expect(await sized(64, [10, 3, 0])).toEqual([4, 11, 11]);
    expect(await sized(64, [7, 7, 1])).toEqual([8, 8, 8]); // a tie: each sees the other
    expect(await sized(5, [10, 3, 0])).toEqual([4, 5, 5]);
    expect(await sized(64, [0, 0, 0])).toEqual([0, 0, 0]);
    expect(await sized(64, [10, 3, 0], [2])).toEqual([4, 11, 0]); // draining: takes no continuation
  });
});
