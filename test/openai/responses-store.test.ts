// The Responses store (router/fronts/openai/responses/store.ts): bounded by count and bytes, and
// forgetting a response once its retention time has passed. The law compares it, after every
// operation of any sequence, with the plainest model of the same rules: the newest records that fit
// both bounds, none older than the retention time. The clock is the test's, so nothing waits.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RECORD_OVERHEAD, ResponseKeys, ResponseStore, keyOfItemId, keyOfResponseId, replicaOfKey } from '../../router/fronts/openai/responses/store.ts';

type Op =
  | { op: 'put'; id: number; size: number }
  | { op: 'get'; id: number }
  | { op: 'delete'; id: number }
  | { op: 'wait'; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('put' as const), id: fc.nat(12), size: fc.nat(600) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('get' as const), id: fc.nat(12) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), id: fc.nat(12) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('wait' as const), ms: fc.nat(400) }) },
);

describe('the Responses store', () => {
  it('law: after any sequence of puts, gets, deletes and waits it holds exactly the newest records within both bounds and the retention time', () => {
    fc.assert(
      fc.property(
        fc.record({ maxResponses: fc.integer({ min: 1, max: 6 }), maxBytes: fc.integer({ min: RECORD_OVERHEAD, max: 3000 }), ttlMs: fc.integer({ min: 1, max: 1000 }) }),
        fc.array(opArb, { maxLength: 60 }),
        (limits, ops) => {
          let now = 0;
          const store = new ResponseStore(limits, () => now);
          // The model: records oldest first, each with its size and time.
          let model: { id: string; bytes: number; at: number }[] = [];
          const live = () => model.filter((r) => r.at > now - limits.ttlMs);
          for (const o of ops) {
            if (o.op === 'wait') now += o.ms;
            else if (o.op === 'put') {
              const id = `resp_${o.id}`;
              const bytes = o.size + 2 + RECORD_OVERHEAD; // the input text is '[]'
              const kept = store.put(id, 'x'.repeat(o.size), '[]');
              expect(kept).toBe(bytes <= limits.maxBytes);
              if (kept) {
                model = [...live().filter((r) => r.id !== id), { id, bytes, at: now }];
                while (model.length > limits.maxResponses || model.reduce((s, r) => s + r.bytes, 0) > limits.maxBytes) model.shift();
              }
            } else if (o.op === 'delete') {
              const id = `resp_${o.id}`;
              const had = model.some((r) => r.id === id);
              // An expired record may still be in the store until its next sweep; deleting it is no lie.
              const deleted = store.delete(id);
              if (deleted !== had) expect(live().some((r) => r.id === id)).toBe(false);
              model = model.filter((r) => r.id !== id);
            } else {
              const id = `resp_${o.id}`;
              const got = store.get(id);
              const want = live().find((r) => r.id === id);
              expect(got === null ? null : got.id).toBe(want ? id : null);
              if (want) expect(got!.bytes).toBe(want.bytes);
            }
            // Bounds hold after every operation, whatever has expired.
            expect(store.size).toBeLessThanOrEqual(limits.maxResponses);
            expect(store.bytes).toBeLessThanOrEqual(limits.maxBytes);
          }
          // After a read every expired record is gone: what is left is the live model, bytes included.
          store.get('resp_none');
          expect(store.size).toBe(live().length);
          expect(store.bytes).toBe(live().reduce((s, r) => s + r.bytes, 0));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('evicts the oldest first when a bound is passed, and counts bytes as UTF-8', () => {
    let now = 0;
    const store = new ResponseStore({ maxResponses: 2, maxBytes: 10_000, ttlMs: 1000 }, () => now);
    store.put('resp_a', 'a', '[]');
    now = 1;
    store.put('resp_b', 'é', '[]');
    expect(store.get('resp_b')!.bytes).toBe(2 + 2 + RECORD_OVERHEAD);
    now = 2;
    store.put('resp_c', 'c', '[]');
    expect([store.get('resp_a'), store.get('resp_b')?.id, store.get('resp_c')?.id]).toEqual([null, 'resp_b', 'resp_c']);
    // Retention: resp_b was stored at 1, so at 1001 it is gone and resp_c (2) is not.
    now = 1001;
    expect(store.get('resp_b')).toBeNull();
    expect(store.get('resp_c')?.id).toBe('resp_c');
    // A record over the byte bound on its own is not kept, and evicts nothing.
    const small = new ResponseStore({ maxResponses: 10, maxBytes: RECORD_OVERHEAD + 10, ttlMs: 1000 }, () => now);
    expect(small.put('resp_x', 'x', '[]')).toBe(true);
    expect(small.put('resp_y', 'y'.repeat(100), '[]')).toBe(false);
    expect(small.get('resp_x')?.id).toBe('resp_x');
    // Off: nothing kept.
    expect(new ResponseStore({ maxResponses: 0, maxBytes: 1000, ttlMs: 1000 }).put('resp_z', 'z', '[]')).toBe(false);
  });

  it('ids: a response key carries its replica id, and every item id names its response', () => {
    const keys = new ResponseKeys('7c1e');
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const k = keys.next();
      expect(k).toMatch(/^7c1e[0-9a-f]{20}$/);
      expect(seen.has(k)).toBe(false);
      seen.add(k);
    }
    const key = keys.next();
    expect(replicaOfKey(key)).toBe('7c1e');
    expect(keyOfResponseId(`resp_${key}`)).toBe(key);
    for (const item of [`rs_${key}_0`, `msg_${key}_1`, `fc_${key}_12`, `fco_${key}_i3`]) expect(keyOfItemId(item)).toBe(key);
    for (const other of ['resp_123', `resp_${key}x`, 'msg_abc_1', `msg_${key}`, `msg_${key}_x`]) {
      expect(keyOfResponseId(other) === null || other === `resp_${key}`).toBe(true);
      expect(keyOfItemId(other)).toBeNull();
    }
    expect(() => new ResponseKeys('XYZ')).toThrow(/4 lowercase hex/);
  });
});
