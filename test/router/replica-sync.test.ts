// What replicas share, as laws over plain data (the processes: replicas-shared.test.ts):
// - the primary's journal of worker writes replays, on a process that starts later, to the state
//   the running replicas reached by applying every write in turn;
// - a replica fed another's prefix batches holds the sender's picture of each worker's cache;
// - a write's `replicas` field names every replica's outcome.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WriteJournal } from '../../router/replicas/write-journal.ts';
import { replicasReport, type WorkerWrite } from '../../router/http/worker-writes.ts';
import { CacheAware } from '../../router/pool/policies/cache-aware.ts';
import { PageKeys } from '../../router/pool/prefix-tree.ts';
import { PrefixShare, type PrefixBatch } from '../../router/pool/prefix-share.ts';
import type { Worker } from '../../router/pool/worker.ts';

/** A replica's pool as the writes see it: which workers are in, and how each drains (a key per drain kind). */
type PoolModel = Map<string, string | null>;

/** One write on a pool, as router/http/worker-writes.ts applyWrite does it. */
function apply(pool: PoolModel, op: WorkerWrite): void {
  if (op.op === 'flushed') return;
  if (op.op === 'add') {
    if (!pool.has(op.url)) pool.set(op.url, null);
  } else if (op.op === 'remove') {
    pool.delete(op.url);
  } else if (pool.has(op.url)) {
    pool.set(op.url, op.op === 'drain' ? `deadline ${op.deadline}` : op.draining ? 'no deadline' : null);
  }
}

const URLS = ['http://a', 'http://b', 'http://c', 'http://d'];
const url = fc.constantFrom(...URLS);
const write: fc.Arbitrary<WorkerWrite> = fc.oneof(
  url.map((u) => ({ op: 'add' as const, url: u })),
  url.map((u) => ({ op: 'remove' as const, url: u })),
  fc.tuple(url, fc.integer({ min: 1, max: 3 })).map(([u, d]) => ({ op: 'drain' as const, url: u, deadline: d })),
  fc.tuple(url, fc.boolean()).map(([u, d]) => ({ op: 'draining' as const, url: u, draining: d })),
  fc.subarray(URLS).map((urls) => ({ op: 'flushed' as const, urls })),
);

describe('the journal of worker writes', () => {
  it('replays, on a process that starts from the configured workers, to the state every write in turn reached', () => {
    fc.assert(
      fc.property(fc.subarray(URLS), fc.array(write, { maxLength: 30 }), (configured, writes) => {
        const running: PoolModel = new Map(configured.map((u) => [u, null]));
        const journal = new WriteJournal();
        for (const op of writes) {
          // The replica that took the write answers 404 for a worker it does not have, and shares
          // nothing: only writes it applied reach the journal.
          if ((op.op === 'drain' || op.op === 'draining' || op.op === 'remove') && !running.has(op.url)) continue;
          apply(running, op);
          journal.add(op);
        }
        const later: PoolModel = new Map(configured.map((u) => [u, null]));
        for (const op of journal.ops()) apply(later, op);
        expect(later).toEqual(running);
        // Compacted: at most an add or remove and one drain per worker.
        expect(journal.ops().length).toBeLessThanOrEqual(2 * URLS.length);
      }),
      { numRuns: 500 },
    );
  });

  it('replays adds in the order the workers were added, a worker added again after its removal last', () => {
    const j = new WriteJournal();
    for (const op of [{ op: 'add', url: 'http://a' }, { op: 'add', url: 'http://b' }, { op: 'remove', url: 'http://a' }, { op: 'add', url: 'http://a' }, { op: 'drain', url: 'http://b', deadline: 5 }] as WorkerWrite[]) j.add(op);
    expect(j.ops()).toEqual([{ op: 'add', url: 'http://b' }, { op: 'drain', url: 'http://b', deadline: 5 }, { op: 'add', url: 'http://a' }]);
  });
});

describe("a write's replicas field", () => {
  it('lists successes, failures and replicas not running, and says what happened', () => {
    expect(replicasReport([{ id: '00a1', index: 0, state: 'applied' }, { id: '00a2', index: 1, state: 'applied' }]))
      .toEqual({ successful: ['00a1', '00a2'], failed: [], pending: [], total_replicas: 2, message: 'applied on every replica (2)' });
    expect(replicasReport([
      { id: '00a1', index: 0, state: 'applied' },
      { id: '00a2', index: 1, state: 'failed', error: 'no worker http://x in this replica\'s pool' },
      { id: '00a3', index: 2, state: 'pending' },
    ])).toEqual({
      successful: ['00a1'],
      failed: [{ replica: '00a2', error: 'no worker http://x in this replica\'s pool' }],
      pending: ['00a3'],
      total_replicas: 3,
      message: 'applied on 1 of 3 replicas; replica 1 (00a2) no worker http://x in this replica\'s pool; replica 2 (00a3) is not running: it applies the write when it starts',
    });
  });
});

/** One replica's view of the workers: its own Worker objects (own ids) over the same URLs. */
function replica(prefix: string, pages: number[], treeSize: number) {
  const workers = pages.map((pageSize, i) => ({ id: `${prefix}${i}`, url: `http://w${i}`, pageSize, maxTotalTokens: null, inFlight: 0, load: () => 0 }) as unknown as Worker);
  const policy = new CacheAware({ cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5, maxTreeSize: treeSize });
  const batches: PrefixBatch[] = [];
  // Batches cross the IPC channel by structured clone, as the advanced serialization copies them.
  const share = new PrefixShare({ byUrl: (u) => workers.find((w) => w.url === u), learnPrefix: (w, k) => policy.learn(w, k) }, (b, written) => {
    batches.push(structuredClone(b));
    written();
  });
  policy.share(share.note);
  return { workers, policy, share, batches };
}

const keysOf = (tokens: readonly number[], page: number) => {
  const k = new PageKeys();
  k.compute(tokens, null, page);
  return k;
};

const prompt = fc.tuple(fc.constantFrom([1, 1, 1, 1], [1, 1, 2], [3], []), fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 12 })).map(([h, t]) => [...h, ...t]);
const step = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(fc.integer({ min: 0, max: 2 }), prompt).map(([w, p]) => ({ kind: 'send' as const, w, p })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'flush' as const }) },
);

describe('prefixes shared between replicas', () => {
  it("a replica fed another's batches holds the sender's picture of each worker, evictions included", () => {
    let evicted = 0;
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 3, maxLength: 3 }), fc.integer({ min: 4, max: 40 }), fc.array(step, { maxLength: 60 }), fc.array(prompt, { minLength: 1, maxLength: 5 }), (pages, treeSize, steps, probes) => {
        const a = replica('a', pages, treeSize);
        const b = replica('b', pages, treeSize);
        for (const s of steps) {
          if (s.kind === 'flush') {
            a.share.flush();
            for (const batch of a.batches.splice(0)) b.share.receive(batch);
            continue;
          }
          // A pick among this one worker (the policy inserts into the chosen worker's tree).
          a.policy.select([a.workers[s.w]!], { prompt: s.p, replayed: null, prefix: null, reason: null });
        }
        a.share.flush();
        for (const batch of a.batches.splice(0)) b.share.receive(batch);
        for (let i = 0; i < 3; i++) {
          for (const p of [...probes, ...steps.flatMap((s) => (s.kind === 'send' ? [s.p] : []))]) {
            expect(b.policy.tree(b.workers[i]!).match(keysOf(p, pages[i]!))).toBe(a.policy.tree(a.workers[i]!).match(keysOf(p, pages[i]!)));
          }
        }
        expect(b.share.counts.received).toBe(a.share.counts.sent);
        evicted += a.workers.reduce((n, w) => n + a.policy.tree(w).evictions, 0);
        a.share.close();
        b.share.close();
      }),
      { numRuns: 300 },
    );
    // The runs did exercise eviction, not only inserts.
    expect(evicted).toBeGreaterThan(0);
  });

  it('two replicas that exchange batches both way hold the same pages (no eviction)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 3, maxLength: 3 }), fc.array(fc.tuple(fc.boolean(), step), { maxLength: 60 }), fc.array(prompt, { minLength: 1, maxLength: 5 }), (pages, steps, probes) => {
        const rs = [replica('a', pages, 1_000_000), replica('b', pages, 1_000_000)];
        const exchange = () => {
          for (const [from, to] of [[rs[0]!, rs[1]!], [rs[1]!, rs[0]!]] as const) {
            from.share.flush();
            for (const batch of from.batches.splice(0)) to.share.receive(batch);
          }
        };
        for (const [which, s] of steps) {
          if (s.kind === 'flush') exchange();
          else rs[which ? 1 : 0]!.policy.select([rs[which ? 1 : 0]!.workers[s.w]!], { prompt: s.p, replayed: null, prefix: null, reason: null });
        }
        exchange();
        for (let i = 0; i < 3; i++) {
          for (const p of [...probes, ...steps.flatMap(([, s]) => (s.kind === 'send' ? [s.p] : []))]) {
            expect(rs[1]!.policy.tree(rs[1]!.workers[i]!).match(keysOf(p, pages[i]!))).toBe(rs[0]!.policy.tree(rs[0]!.workers[i]!).match(keysOf(p, pages[i]!)));
          }
        }
        for (const r of rs) r.share.close();
      }),
      { numRuns: 200 },
    );
  });

  it("learns a large batch a slice at a time, and drops what it cannot keep up with", async () => {
    const a = replica('a', [1, 1, 1], 1_000_000);
    const b = replica('b', [1, 1, 1], 1_000_000);
    // Three 5000-token prompts: each is shared as its first 4096 pages.
    const long = (c: number) => Array.from({ length: 5000 }, (_, i) => 3 + ((c * 7919 + i * 104_729) % 29_000));
    for (let c = 0; c < 3; c++) a.policy.select([a.workers[c]!], { prompt: long(c), replayed: null, prefix: null, reason: null });
    a.share.flush();
    expect(a.share.counts.sent).toBe(3 * 4096);
    b.share.receive(a.batches[0]);
    // One sequence per turn here (a slice is 2048 pages, a sequence is learned whole).
    expect(b.share.counts.received).toBe(4096);
    await new Promise((r) => setImmediate(r));
    expect(b.share.counts.received).toBe(8192);
    await new Promise((r) => setImmediate(r));
    expect(b.share.counts.received).toBe(3 * 4096);
    for (let c = 0; c < 3; c++) expect(b.policy.tree(b.workers[c]!).match(keysOf(long(c), 1))).toBe(4096);
    // Ten such batches at once: eight wait their turn, two are dropped and counted.
    for (let i = 0; i < 10; i++) b.share.receive(a.batches[0]);
    expect(b.share.counts.dropped).toBe(2 * 3 * 4096);
    while (b.share.counts.received < 3 * 4096 + 8 * 3 * 4096) await new Promise((r) => setImmediate(r));
    a.share.close();
    b.share.close();
  });

  it('drops what a backed-up channel has not taken, and counts it', () => {
    const workers = [{ id: 'a0', url: 'http://w0', pageSize: 1, maxTotalTokens: null, load: () => 0 }] as unknown as Worker[];
    const held: (() => void)[] = [];
    const share = new PrefixShare({ byUrl: () => undefined, learnPrefix: () => undefined }, (_b, written) => held.push(written));
    for (let i = 0; i < 6; i++) {
      share.note(workers[0]!, keysOf([i, 1, 2], 1));
      share.flush();
    }
    // Four batches wait unwritten; the fifth and sixth were dropped.
    expect(held).toHaveLength(4);
    expect(share.counts).toEqual({ sent: 12, dropped: 6, received: 0 });
    for (const w of held.splice(0)) w();
    share.note(workers[0]!, keysOf([9, 9], 1));
    share.flush();
    expect(share.counts.sent).toBe(14);
    share.close();
  });
});
