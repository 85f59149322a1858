// The discovery law: after any schedule of pod changes and watch faults against the
// fake API server, the workers the Kubernetes source gave the reconciler equal the truth by the
// next full re-list (at most one re-list period, plus the watchdog for a silent watch and a
// backoff), and workers added by hand are untouched, even when a pod has their URL. A drain is
// one-way: a pod whose drain began never gets a worker again, even stuck in Terminating past its
// deadline and listed by every re-list (a lost node, a finalizer).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { clientFromKubeConfig } from '../../router/discovery/k8s-api.ts';
import { K8sPodsSource } from '../../router/discovery/k8s-pods.ts';
import { Reconciler, type ReconcilerDrainer, type ReconcilerPool } from '../../router/discovery/reconciler.ts';
import type { Worker } from '../../router/pool/worker.ts';
import { until } from './recording-sink.ts';

class FakePool implements ReconcilerPool {
  readonly workers = new Map<string, Worker>();
  /** Adds and drains by discovery key, in order (shared with the drainer). */
  readonly history: [op: 'add' | 'drain', key: string][] = [];
  private next = 0;
  hand(url: string): Worker {
    const w = this.make(url);
    this.workers.set(w.id, w);
    return w;
  }
  get(id: string): Worker | undefined {
    return this.workers.get(id);
  }
  adopt(url: string, prepare?: (w: Worker) => void): { worker: Worker; added: boolean } {
    for (const w of this.workers.values()) if (w.url === url) return { worker: w, added: false };
    const w = this.make(url);
    prepare?.(w);
    this.workers.set(w.id, w);
    this.history.push(['add', (w.discovery as { key: string } | null)?.key ?? url]);
    return { worker: w, added: true };
  }
  remove(id: string): boolean {
    return this.workers.delete(id);
  }
  private make(url: string): Worker {
    return { id: `w${this.next++}`, url, discovery: null, draining: false, format: null } as unknown as Worker;
  }
}

/** Marks a worker draining, remembers its deadline and removes it then, as the real drainer does. */
class FakeDrainer implements ReconcilerDrainer {
  readonly deadlines = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  constructor(private readonly pool: FakePool) {}
  drain(id: string, deadline: number): void {
    const w = this.pool.get(id)!;
    w.draining = true;
    this.pool.history.push(['drain', (w.discovery as { key: string } | null)?.key ?? w.url]);
    this.deadlines.set(id, deadline);
    clearTimeout(this.timers.get(id));
    this.timers.set(id, setTimeout(() => {
      this.timers.delete(id);
      this.pool.remove(id);
    }, Math.max(0, deadline - Date.now())));
  }
  forget(id: string): void {
    this.deadlines.delete(id);
    clearTimeout(this.timers.get(id));
    this.timers.delete(id);
  }
  close(): void {
    for (const t of this.timers.values()) clearTimeout(t);
  }
}

type Op =
  | { op: 'create'; ready: boolean }
  | { op: 'ready' | 'unready' | 'delete' | 'finalize' | 'evict' | 'oom' | 'relabel' | 'stick'; i: number }
  | { op: 'fault'; kind: 'close' | 'reset' | 'silent' | 'expire' }
  | { op: 'compact' | 'down' | 'forbid' }
  | { op: 'pause'; ms: number };

const I = fc.nat({ max: 7 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('create' as const), ready: fc.boolean() }) },
  { weight: 6, arbitrary: fc.record({ op: fc.constantFrom('ready' as const, 'unready' as const, 'delete' as const, 'finalize' as const, 'evict' as const, 'oom' as const, 'relabel' as const), i: I }) },
  // A finalizer nobody removes, then a delete with a 1 s grace: Terminating past its deadline.
  { weight: 1, arbitrary: fc.record({ op: fc.constant('stick' as const), i: I }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('fault' as const), kind: fc.constantFrom('close' as const, 'reset' as const, 'silent' as const, 'expire' as const) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom('compact' as const, 'down' as const, 'forbid' as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('pause' as const), ms: fc.integer({ min: 1, max: 60 }) }) },
);

const RELIST = 1_000;
const WATCHDOG = 300;
const BACKOFF_MAX = 200;
const dir = mkdtempSync(join(tmpdir(), 'baton-k8s-law-'));

describe('discovery law (Kubernetes pods → reconciler)', () => {
  let fake: FakeApiServer;
  beforeAll(async () => {
    fake = await new FakeApiServer({ bookmarkMs: 100 }).start();
  });
  afterAll(async () => {
    await fake.close();
  });

  it('the discovered set equals the truth by the next re-list after any schedule; hand-added workers are untouched', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 14 }), fc.nat({ max: 3 }), async (ops, handAt) => {
        // One namespace per run: the fake's pods of earlier runs are not this run's.
        const ns = `law-${run++}`;
        const kc = new KubeConfig();
        kc.loadFromFile(fake.writeKubeconfig(join(dir, `${ns}.yaml`), ns));
        const pool = new FakePool();
        const drainer = new FakeDrainer(pool);
        const reconciler = new Reconciler(pool, drainer);
        // A hand-added worker, possibly at the URL a pod of this run will get.
        const names: string[] = [];
        const ipBase = fake.nextIp();
        const hand = pool.hand(`http://${handAt === 0 ? ipBase : '127.9.9.9'}:8000`);
        let first = true;
        const source = new K8sPodsSource({ client: await clientFromKubeConfig(kc), namespace: ns, selector: ['app=sglang'], port: 8000, relistMs: RELIST, watchdogMs: WATCHDOG, backoffMinMs: 20, backoffMaxMs: BACKOFF_MAX });
        await source.start(reconciler.sink(source.name));
        try {
          for (const o of ops) {
            const name = 'i' in o ? names[o.i % Math.max(1, names.length)] : undefined;
            const exists = name !== undefined && fake.pod(name, ns) !== undefined;
            switch (o.op) {
              case 'create': {
                const n = `p${names.length}`;
                names.push(n);
                fake.createPod({ name: n, namespace: ns, labels: { app: 'sglang' }, ready: o.ready, ip: first ? ipBase : undefined });
                first = false;
                break;
              }
              case 'ready': if (exists) fake.setReady(name, true, ns); break;
              case 'unready': if (exists) fake.setReady(name, false, ns); break;
              case 'delete': if (exists) fake.deletePod(name, 30, ns); break;
              case 'finalize': if (exists) fake.finalizePod(name, ns); break;
              case 'evict': if (exists) fake.evictPod(name, ns); break;
              case 'oom': if (exists) fake.oomKill(name, ns); break;
              case 'relabel': if (exists) fake.updatePod(name, ns, (p) => { p.labels.app = 'other'; }); break;
              case 'stick': if (exists && fake.pod(name, ns)!.deletionTimestamp === null) { fake.updatePod(name, ns, (p) => { p.finalizers = ['example.com/held']; }); fake.deletePod(name, 1, ns); } break;
              case 'fault': if (o.kind === 'expire') fake.expireWatches(); else fake.faultWatches(o.kind); break;
              case 'compact': fake.compact(); break;
              case 'down': await fake.down(); await new Promise((r) => setTimeout(r, 30)); await fake.up(); break;
              case 'forbid': fake.forbid('pods'); await new Promise((r) => setTimeout(r, 30)); fake.allow(); break;
              case 'pause': await new Promise((r) => setTimeout(r, o.ms)); break;
            }
          }
          // A stuck pod's deadline passes first, so that the re-list below lists it past it.
          const stuckUntil = Math.max(0, ...fake.podList().filter((p) => p.namespace === ns && p.finalizers.length > 0).map((p) => p.deletionTimestamp ?? 0));
          if (stuckUntil > Date.now()) await new Promise((r) => setTimeout(r, stuckUntil - Date.now() + 50));
          const lists = source.lists;
          // Bound: the next cycle starts within a re-list period (the watch's timeoutSeconds), or its
          // watchdog for a silent watch, plus a backoff; slack for a loaded machine.
          await until(() => source.lists > lists, 'the next full re-list', RELIST + WATCHDOG + BACKOFF_MAX + 5_000);
          // The truth, from the fake's own model.
          const pods = fake.podList().filter((p) => p.namespace === ns && p.labels.app === 'sglang');
          const serving = pods.filter((p) => p.ip && p.phase === 'Running' && p.ready && p.deletionTimestamp === null).map((p) => `http://${p.ip}:8000`);
          const terminating = new Set(pods.filter((p) => p.ip && p.deletionTimestamp !== null).map((p) => `http://${p.ip}:8000`));
          const discovered = [...pool.workers.values()].filter((w) => w.discovery !== null);
          const expectServing = serving.filter((u) => u !== hand.url).sort();
          expect(discovered.filter((w) => !w.draining).map((w) => w.url).sort()).toEqual(expectServing);
          for (const w of discovered.filter((x) => x.draining)) {
            // A draining worker is a terminating pod, or one gone before its deadline (kept to it on purpose).
            expect(terminating.has(w.url) || drainer.deadlines.get(w.id)! > Date.now()).toBe(true);
          }
          expect(pool.get(hand.id)).toMatchObject({ url: hand.url, discovery: null, draining: false });
          // A drain is one-way (its pod is terminating, which Kubernetes never undoes): no key got
          // a worker again once its drain began.
          const drained = new Set<string>();
          const again: string[] = [];
          for (const [op, key] of pool.history) {
            if (op === 'drain') drained.add(key);
            else if (drained.has(key)) again.push(key);
          }
          expect(again).toEqual([]);
          expect(reconciler.status().find((s) => s.source === 'k8s-pods')?.state).toBe('synced');
        } finally {
          await source.stop();
          drainer.close();
          fake.allow();
        }
      }),
      { numRuns: 20, interruptAfterTimeLimit: 120_000 },
    );
  }, 200_000);
});
