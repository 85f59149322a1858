// The reconciler's law (router/discovery/reconciler.ts): after any schedule of upserts, drains,
// removals, full listings and drain deadlines from several sources, the pool's discovered workers
// are exactly the truth those calls describe (the last listing of each source plus the events
// after it; a draining key kept to its deadline), and workers added by hand are untouched, even
// when a source lists their URL. Plus the worker file's and the drain API's clear refusals.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Reconciler, type ReconcilerDrainer, type ReconcilerPool } from '../../router/discovery/reconciler.ts';
import { parseWorkerFile } from '../../router/discovery/file-source.ts';
import { drainDeadline } from '../../router/http/admin-api.ts';
import type { Worker } from '../../router/pool/worker.ts';

/** The pool as the reconciler sees it: workers by id, no network. */
class FakePool implements ReconcilerPool {
  readonly workers = new Map<string, Worker>();
  private next = 0;

  hand(url: string): void {
    const w = this.make(url);
    this.workers.set(w.id, w);
  }

  get(id: string): Worker | undefined {
    return this.workers.get(id);
  }

  adopt(url: string, prepare?: (w: Worker) => void): { worker: Worker; added: boolean } {
    for (const w of this.workers.values()) if (w.url === url) return { worker: w, added: false };
    const w = this.make(url);
    prepare?.(w);
    this.workers.set(w.id, w);
    return { worker: w, added: true };
  }

  remove(id: string): boolean {
    return this.workers.delete(id);
  }

  private make(url: string): Worker {
    return { id: `w${this.next++}`, url, discovery: null, draining: false, format: null } as unknown as Worker;
  }
}

/** Marks the worker draining; its deadline passes when the schedule says so (`expire`). */
class FakeDrainer implements ReconcilerDrainer {
  constructor(private readonly pool: FakePool) {}
  drain(id: string): void {
    this.pool.get(id)!.draining = true;
  }
  forget(): void {}
  expire(id: string): void {
    this.pool.remove(id);
  }
}

const SOURCES = ['file', 'k8s-pods'];
const url = (s: number, k: number, v: number) => `http://10.${s}${k}.${v}.1:8000`;

type Op =
  | { op: 'upsert'; s: number; k: number; v: number }
  | { op: 'drain'; s: number; k: number }
  | { op: 'remove'; s: number; k: number }
  | { op: 'resync'; s: number; list: { k: number; v: number }[] }
  | { op: 'expire'; s: number; k: number };

const S = fc.integer({ min: 0, max: 1 });
const K = fc.integer({ min: 0, max: 4 });
const V = fc.integer({ min: 0, max: 2 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('upsert' as const), s: S, k: K, v: V }),
  fc.record({ op: fc.constant('drain' as const), s: S, k: K }),
  fc.record({ op: fc.constant('remove' as const), s: S, k: K }),
  fc.record({ op: fc.constant('resync' as const), s: S, list: fc.uniqueArray(fc.record({ k: K, v: V }), { selector: (e) => e.k, maxLength: 5 }) }),
  fc.record({ op: fc.constant('expire' as const), s: S, k: K }),
);

describe('reconciler law', () => {
  it('the discovered workers are the truth of the calls; hand-added workers are untouched', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.record({ s: S, k: K, v: V }), { maxLength: 3, selector: (h) => url(h.s, h.k, h.v) }), fc.array(opArb, { maxLength: 40 }), (handSpec, ops) => {
        const pool = new FakePool();
        const hand = new Set(handSpec.map((h) => url(h.s, h.k, h.v)));
        for (const u of hand) pool.hand(u);
        const handIds = new Map([...pool.workers.values()].map((w) => [w.id, w.url]));
        const drainer = new FakeDrainer(pool);
        const rec = new Reconciler(pool, drainer);
        const sinks = SOURCES.map((s) => rec.sink(s));
        // The model: per source and key, the URL and whether it drains.
        const truth = new Map<string, { url: string; draining: boolean }>();
        const id = (s: number, k: number) => `${SOURCES[s]}/${k}`;
        const upsert = (s: number, k: number, v: number) => {
          const e = truth.get(id(s, k));
          if (!e || e.url !== url(s, k, v)) truth.set(id(s, k), { url: url(s, k, v), draining: false });
        };

        for (const o of ops) {
          switch (o.op) {
            case 'upsert':
              sinks[o.s]!.upsert({ key: String(o.k), url: url(o.s, o.k, o.v) });
              upsert(o.s, o.k, o.v);
              break;
            case 'drain': {
              sinks[o.s]!.drain(String(o.k), Date.now() + 60_000, 'test');
              const e = truth.get(id(o.s, o.k));
              if (e) e.draining = true;
              break;
            }
            case 'remove':
              sinks[o.s]!.remove(String(o.k));
              truth.delete(id(o.s, o.k));
              break;
            case 'resync': {
              sinks[o.s]!.resync(o.list.map((e) => ({ key: String(e.k), url: url(o.s, e.k, e.v) })));
              const listed = new Set(o.list.map((e) => id(o.s, e.k)));
              for (const e of o.list) upsert(o.s, e.k, e.v);
              // Absent keys go, but a draining worker stays to its deadline.
              for (const [k, e] of truth) if (k.startsWith(`${SOURCES[o.s]}/`) && !listed.has(k) && !(e.draining && !hand.has(e.url))) truth.delete(k);
              break;
            }
            case 'expire': {
              // The deadline of a draining worker passes: the drainer removes it.
              const e = truth.get(id(o.s, o.k));
              if (!e || !e.draining || hand.has(e.url)) break;
              const w = [...pool.workers.values()].find((x) => x.url === e.url)!;
              drainer.expire(w.id);
              truth.delete(id(o.s, o.k));
              break;
            }
          }
          // Hand-added workers: all there, as they were.
          for (const [wid, u] of handIds) {
            const w = pool.get(wid);
            expect(w?.url).toBe(u);
            expect(w?.discovery).toBeNull();
            expect(w?.draining).toBe(false);
          }
          // Discovered workers: exactly the truth whose URL no hand-added worker serves.
          const seen = [...pool.workers.values()].filter((w) => w.discovery !== null).map((w) => ({ id: `${w.discovery!.source}/${w.discovery!.key}`, url: w.url, draining: w.draining })).sort((a, b) => a.id.localeCompare(b.id));
          const want = [...truth].filter(([, e]) => !hand.has(e.url)).map(([k, e]) => ({ id: k, url: e.url, draining: e.draining })).sort((a, b) => a.id.localeCompare(b.id));
          expect(seen).toEqual(want);
          // What /workers reports per source matches.
          for (const st of rec.status()) expect(st.workers).toBe(want.filter((w) => w.id.startsWith(`${st.source}/`)).length);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('a source\'s state is reported with its worker count', () => {
    const pool = new FakePool();
    const seen: unknown[] = [];
    const rec = new Reconciler(pool, new FakeDrainer(pool), (s) => seen.push(s));
    const sink = rec.sink('file');
    sink.resync([{ key: 'a', url: 'http://10.0.0.1:1' }]);
    sink.state({ kind: 'stale', since: 5, detail: 'bad yaml' });
    expect(seen).toEqual([{ source: 'file', state: 'stale', at: 5, detail: 'bad yaml', workers: 1 }]);
    expect(rec.status()).toEqual(seen);
  });
});

describe('worker file', () => {
  it('reads a list, or a mapping with a top-level grace; each entry may override it', () => {
    const list = parseWorkerFile('- http://10.0.0.1:8000/\n- {url: "http://10.0.0.2:8000", format: vllm, name: b, drain_grace_ms: 5}\n', 'f');
    expect(list.map((e) => [e.worker.key, e.worker.format, e.worker.meta?.name, e.graceMs])).toEqual([
      ['http://10.0.0.1:8000', undefined, undefined, 0],
      ['http://10.0.0.2:8000', 'vllm', 'b', 5],
    ]);
    const m = parseWorkerFile('drain_grace_ms: 7000\nworkers:\n  - http://10.0.0.1:8000\n', 'f');
    expect(m[0]!.graceMs).toBe(7000);
    expect(parseWorkerFile('', 'f')).toEqual([]);
  });

  it.each([
    ['workers: 3', /must be a list of workers/],
    ['- ftp://x', /workers\[0\]: worker URL must be http/],
    ['- {url: "http://a:1", port: 2}', /unknown key 'port'/],
    ['- http://a:1\n- http://a:1/', /listed twice/],
    ['- {url: "http://a:1", format: grpc}', /format must be one of sglang, vllm/],
    ['drain_grace_ms: -1\nworkers: []', /drain_grace_ms must be a non-negative integer/],
    ['grace: 1', /unknown key 'grace'/],
    ['[', /f: /],
  ])('refuses %j clearly', (text, msg) => {
    expect(() => parseWorkerFile(text, 'f')).toThrow(msg);
  });
});

describe('POST /workers/:id/drain body', () => {
  it('takes nothing (the default grace), grace_ms or deadline_ms', () => {
    expect(drainDeadline('', 1000, 30_000)).toBe(31_000);
    expect(drainDeadline('{}', 1000, 30_000)).toBe(31_000);
    expect(drainDeadline('{"grace_ms": 6000}', 1000, 30_000)).toBe(7000);
    expect(drainDeadline('{"deadline_ms": 5000}', 1000, 30_000)).toBe(5000);
  });
  it.each([
    ['{"grace_ms": -1}', /grace_ms must be a non-negative integer/],
    ['{"grace_ms": 1, "deadline_ms": 2}', /not both/],
    ['{"grace": 1}', /unknown field 'grace'/],
    ['[1]', /body must be empty or JSON/],
    ['nope', /body must be empty or JSON/],
  ])('refuses %s clearly', (text, msg) => {
    expect(drainDeadline(text, 0, 1)).toMatch(msg);
  });
});
