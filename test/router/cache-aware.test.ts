// cache_aware: the router's prefix tree against the worker's real cache (the simulator's radix
// cache), and the policy's choices (the SGLang model gateway's cache_aware.rs semantics).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PageKeys, PrefixTree } from '../../router/pool/prefix-tree.ts';
import { CacheAware } from '../../router/pool/policies/cache-aware.ts';
import type { Placement } from '../../router/pool/policies/policy.ts';
import type { Worker } from '../../router/pool/worker.ts';
import { PrefixCache } from '../../sim/prefix-cache.ts';
import { sglangLoad } from '../../router/formats/sglang/load.ts';
import { vllmLoad } from '../../router/formats/vllm/load.ts';
import { WorkerPool } from '../../router/pool/worker-pool.ts';

const keysOf = (tokens: readonly number[], page: number, replayed: readonly number[] | null = null) => {
  const k = new PageKeys();
  k.compute(tokens, replayed, page);
  return k;
};

/** Sequences over a small alphabet with a few shared heads, so prefixes overlap and diverge. */
const HEADS = [[7, 7, 7, 7], [7, 7, 8], [9], []];
const sequence = fc.tuple(fc.integer({ min: 0, max: HEADS.length - 1 }), fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 10 })).map(([h, tail]) => [...HEADS[h]!, ...tail]);
type Op = { kind: 'request'; seq: number[] } | { kind: 'flush' };
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 12, arbitrary: sequence.map((seq) => ({ kind: 'request' as const, seq })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'flush' as const }) },
);

describe('PrefixTree against the worker cache', () => {
  it('never reports more cached tokens than the worker cache holds, after any inserts, evictions and flushes', () => {
    let evicted = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 80 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 2, max: 40 }), fc.integer({ min: 0, max: 20 }), fc.array(sequence, { minLength: 1, maxLength: 6 }), (ops, page, workerCap, less, probes) => {
        // The tree is bounded by the worker's max_total_num_tokens (CacheAware.tree), here or below.
        const worker = new PrefixCache(workerCap * page, page);
        const tree = new PrefixTree(Math.max(0, workerCap - less) * page, page);
        for (const o of ops) {
          if (o.kind === 'flush') {
            // /flush_cache through the router: the worker empties its cache, the router its tree.
            worker.clear();
            tree.clear();
          } else {
            // The router places the request and remembers it; the worker prefills it (match,
            // then insert, SGLang's match_prefix and insert), and caches it with its output.
            tree.insert(keysOf(o.seq, page));
            worker.match(o.seq, o.seq.length - 1);
            worker.insertSequence(o.seq);
          }
          expect(tree.tokens).toBeLessThanOrEqual(worker.capacityTokens);
          for (const p of [...probes, ...(o.kind === 'request' ? [o.seq] : [])]) {
            expect(tree.match(keysOf(p, page))).toBeLessThanOrEqual(worker.peek(p));
          }
        }
        evicted += tree.evictions + worker.evictions;
      }),
      { numRuns: 300 },
    );
    // The runs did exercise eviction, not only inserts.
    expect(evicted).toBeGreaterThan(0);
  });

  it('matches whole pages of the longest prefix sent, keeps roots over leaves, and is empty after clear', () => {
    const t = new PrefixTree(8, 2);
    t.insert(keysOf([1, 2, 3, 4, 5, 6, 7], 2));
    expect(t.match(keysOf([1, 2, 3, 4, 5, 6, 7, 8], 2))).toBe(6);
    expect(t.match(keysOf([1, 2, 3, 9], 2))).toBe(2);
    expect(t.match(keysOf([2, 1], 2))).toBe(0);
    // A continuation's replayed tokens extend the prompt.
    expect(t.match(keysOf([1, 2, 3], 2, [4, 5, 6]))).toBe(6);
    // Over capacity (4 pages): the least recent leaves go first, the shared root stays.
    t.insert(keysOf([1, 2, 9, 9, 9, 9], 2));
    expect(t.size).toBe(4);
    expect(t.match(keysOf([1, 2, 9, 9, 9, 9], 2))).toBe(6);
    expect(t.match(keysOf([1, 2, 3, 4, 5, 6], 2))).toBe(4);
    t.clear();
    expect(t.match(keysOf([1, 2], 2))).toBe(0);
  });
});

const worker = (id: string, load = 0) => ({ id, url: `http://${id}`, pageSize: 1, maxTotalTokens: null, inFlight: load, load: () => load }) as unknown as Worker;
const OPTS = { cacheThreshold: 0.3, balanceAbsThreshold: 4, balanceRelThreshold: 1.5, maxTreeSize: 10_000 };
const place = (prompt: number[], replayed: number[] | null = null): Placement => ({ prompt, replayed, prefix: null, reason: null });
const seq = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('cache_aware', () => {
  it('sends a request to the worker holding the longest prefix above the threshold, and says so', () => {
    const p = new CacheAware(OPTS);
    const [a, b, c] = [worker('a'), worker('b'), worker('c')];
    const system = seq(1000, 100);
    const first = place([...system, 1, 2, 3]);
    const w1 = p.select([a, b, c], first);
    expect(first.reason).toMatch(/^below_threshold 0\//);
    const next = place([...system, 1, 2, 3, 4, 5, 6]);
    expect(p.select([a, b, c], next).id).toBe(w1.id);
    expect(next.prefix).toBe(103);
    expect(next.reason).toBe('cache_hit 103/106');
  });

  it('below the threshold, the least loaded worker; ties go to the longer cached prefix', () => {
    const p = new CacheAware(OPTS);
    const idle = [worker('a'), worker('b')];
    const first = p.select(idle, place(seq(0, 100)));
    // 100 of 10,000 tokens cached (1 %): load decides, and with equal load the cached prefix.
    const again = place(seq(0, 10_000));
    expect(p.select(idle, again).id).toBe(first.id);
    expect(again.reason).toBe('below_threshold 100/10000');
    // A less loaded worker wins below the threshold.
    const other = idle.find((w) => w.id !== first.id)!;
    const busy = [worker(first.id, 3), worker(other.id, 1)];
    expect(p.select(busy, place([...seq(0, 100), ...seq(50_000, 1000)])).id).toBe(other.id);
  });

  it('when load is imbalanced (max - min > abs and max > min * rel), the least loaded worker wins over a full hit', () => {
    const p = new CacheAware(OPTS);
    const prompt = seq(5, 64);
    const chosen = p.select([worker('a'), worker('b')], place(prompt));
    const other = chosen.id === 'a' ? 'b' : 'a';
    // Spread 4, not above 4: balanced, the hit wins.
    expect(p.select([worker(chosen.id, 5), worker(other, 1)], place(prompt)).id).toBe(chosen.id);
    const pl = place(prompt);
    // Spread 5 > 4 and 6 > 1 * 1.5: imbalanced.
    expect(p.select([worker(chosen.id, 6), worker(other, 1)], pl).id).toBe(other);
    expect(pl.reason).toBe('imbalanced: load 1..6');
  });

  it('places a continuation on the survivor holding the longest prefix of prompt + replayed tokens', () => {
    const p = new CacheAware(OPTS);
    const [a, b, c] = [worker('a'), worker('b'), worker('c')];
    const prompt = seq(100, 50);
    const output = seq(900, 40);
    // b computed the prompt and the first 30 output tokens (an earlier turn sent them as a prompt).
    p.select([b], place([...prompt, ...output.slice(0, 30)]));
    // c holds only the prompt.
    p.select([c], place(prompt));
    // a, which served the request, died; the continuation replays 40 tokens.
    const pl = place(prompt, output);
    expect(p.select([b, c], pl).id).toBe('b');
    expect(pl.prefix).toBe(80);
    expect(pl.reason).toBe('continuation cache_hit 80/90');
    void a;
  });

  it('forgets a worker whose cache is gone (flushed, restarted)', () => {
    const p = new CacheAware(OPTS);
    const a = worker('a');
    p.select([a], place(seq(0, 10)));
    expect(p.treeTokens(a)).toBe(10);
    p.forget(a);
    expect(p.treeTokens(a)).toBe(0);
  });
});

describe('cache_aware over a changing pool', () => {
  const POOL_OPTS = {
    circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 500, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0,
  };
  type PoolOp = { kind: 'add' } | { kind: 'request'; seq: number[] } | { kind: 'flush'; which: number } | { kind: 'remove'; which: number };
  const poolOp: fc.Arbitrary<PoolOp> = fc.oneof(
    { weight: 3, arbitrary: fc.constant({ kind: 'add' as const }) },
    { weight: 6, arbitrary: sequence.map((s) => ({ kind: 'request' as const, seq: s })) },
    { weight: 1, arbitrary: fc.nat().map((which) => ({ kind: 'flush' as const, which })) },
    { weight: 2, arbitrary: fc.nat().map((which) => ({ kind: 'remove' as const, which })) },
  );

  it('holds a tree only for workers in the pool: a removed worker\'s tree, arrays and all, is gone', async () => {
    let removedWithTree = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(poolOp, { minLength: 1, maxLength: 30 }), async (ops) => {
        let policy: CacheAware | null = null;
        const pool = new WorkerPool(POOL_OPTS, () => (policy = new CacheAware(OPTS)), () => undefined, () => undefined);
        const p = () => policy!;
        let port = 0;
        try {
          for (const o of ops) {
            const live = pool.list();
            if (o.kind === 'add') {
              // A new address each time, as a replaced pod has: port 9 on loopback refuses, so the
              // worker is never probed; it is marked healthy by hand.
              const w = await pool.add(`http://127.0.${++port}.1:9`);
              Object.assign(w, { healthy: true, dead: false });
            } else if (o.kind === 'request') {
              if (live.length > 0) pool.pick(new Set(), null, 'sglang', { prompt: o.seq, replayed: null, prefix: null, reason: null });
            } else if (live.length > 0) {
              const w = live[o.which % live.length]!;
              if (o.kind === 'flush') pool.cacheFlushed(w);
              else {
                if (p().footprint().workers.includes(w.id)) removedWithTree++;
                pool.remove(w.id);
              }
            }
            const ids = new Set(pool.list().map((w) => w.id));
            const held = p().footprint().workers;
            expect(held.filter((id) => !ids.has(id)), `trees of removed workers (pool: ${[...ids].join(',')})`).toEqual([]);
          }
          // Every worker removed: nothing is held, not even a cleared tree's arrays.
          for (const w of pool.list()) pool.remove(w.id);
          expect(p().footprint()).toEqual({ workers: [], slots: 0 });
        } finally {
          await pool.close();
        }
      }),
      { numRuns: 150 },
    );
    // The runs did remove workers that had taken requests, not only empty ones.
    expect(removedWithTree).toBeGreaterThan(0);
  });
});

describe("the workers' own load", () => {
  it("reads SGLang's /get_load (num_reqs summed over DP ranks) and vLLM's running + waiting gauges", () => {
    expect(sglangLoad(JSON.stringify([{ dp_rank: 0, num_reqs: 3, num_waiting_reqs: 1 }, { dp_rank: 1, num_reqs: 2, num_waiting_reqs: 0 }]))).toBe(5);
    expect(sglangLoad('{"num_reqs": 4}')).toBe(4);
    expect(sglangLoad('not json')).toBeNull();
    const metrics = [
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0',
      'vllm:num_requests_waiting_by_reason{reason="capacity"} 9.0',
    ].join('\n');
    expect(vllmLoad(metrics)).toBe(5);
    expect(vllmLoad('# nothing')).toBeNull();
  });
});
