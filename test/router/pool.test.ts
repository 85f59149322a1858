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

const fake = (id: string, inFlight: number) => ({ id, inFlight }) as unknown as Worker;

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
