// Why a discovered worker went away reaches the dashboard: the fake API server writes the pod
// statuses the kubelet writes (Evicted, OOMKilled, a crash's exit code, a delete with grace), the
// pods source reads the reason from them, the reconciler puts it on the worker, the pool's removal
// event carries the worker as it was last, and the host's fault log marks it with pod and node.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { clientFromKubeConfig } from '../../router/discovery/k8s-api.ts';
import { K8sPodsSource } from '../../router/discovery/k8s-pods.ts';
import { Reconciler } from '../../router/discovery/reconciler.ts';
import { WorkerPool } from '../../router/pool/worker-pool.ts';
import { createPolicy } from '../../router/pool/policies/index.ts';
import { Drainer } from '../../router/migration/drain.ts';
import { FaultLog } from '../../host/fault-log.ts';
import type { BatonEvent, WorkerInfo } from '../../router/events/types.ts';
import { until } from './recording-sink.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-k8s-reasons-'));
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('a discovered worker says why it went', () => {
  it('evicted, OOMKilled, crashed with an exit code, deleted with grace: on the removal event and as a fault mark with pod and node', async () => {
    const fake = await new FakeApiServer({ bookmarkMs: 60_000 }).start();
    cleanup.push(() => fake.close());
    const kc = new KubeConfig();
    kc.loadFromFile(fake.writeKubeconfig(join(dir, 'kc.yaml')));
    const events: BatonEvent[] = [];
    const log = new FaultLog();
    const emit = (e: BatonEvent) => {
      events.push(e);
      log.observe(e);
    };
    // Health checks off: the pods' IPs are not served; the pool only holds them.
    const pool = new WorkerPool(
      { circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 }, connectTimeoutMs: 200, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0 },
      createPolicy('least_inflight'),
      (w) => emit({ type: 'worker_state', t: Date.now(), worker: w.info() }),
      (id, last) => emit({ type: 'worker_removed', t: Date.now(), worker_id: id, worker: last }),
    );
    cleanup.push(() => pool.close());
    const reconciler = new Reconciler(pool, new Drainer(pool, { marginMs: 100 }));
    const source = new K8sPodsSource({ client: await clientFromKubeConfig(kc), namespace: 'default', selector: ['app=sglang'], port: 8000, relistMs: 60_000, watchdogMs: 5_000, backoffMinMs: 20, backoffMaxMs: 200 });
    for (const name of ['a', 'b', 'c', 'd']) fake.createPod({ name, labels: { app: 'sglang' } });
    await source.start(reconciler.sink(source.name));
    cleanup.push(() => source.stop());
    await until(() => pool.infos().length === 4, 'four workers');
    const byPod = (pod: string) => pool.infos().find((w) => w.discovery?.pod === pod)!;
    const ids = Object.fromEntries(['a', 'b', 'c', 'd'].map((p) => [p, byPod(p).id]));
    expect(byPod('a').discovery).toMatchObject({ source: 'k8s-pods', pod: 'a', node: 'node-1' });

    fake.evictPod('a');
    fake.oomKill('b');
    fake.crashContainer('c', 3);
    fake.deletePod('d', 30);
    await until(() => pool.infos().length === 1 && pool.infos()[0]!.health === 'draining', 'a, b, c gone and d draining');
    // The draining worker says why on itself (/workers, the card).
    expect(pool.infos()[0]!.discovery?.reason).toBe('pod deleted (grace 30s)');
    const removed = new Map(events.flatMap((e) => (e.type === 'worker_removed' ? [[e.worker_id, e.worker] as [string, WorkerInfo | undefined]] : [])));
    expect(removed.get(ids.a!)?.discovery?.reason).toBe('Evicted: The node was low on resource: memory.');
    expect(removed.get(ids.b!)?.discovery?.reason).toBe('OOMKilled (exit code 137)');
    expect(removed.get(ids.c!)?.discovery?.reason).toBe('Error (exit code 3)');
    const marks = log.list().map((m) => [m.kind, m.worker, m.source, m.detail, m.pod, m.node]);
    expect(marks).toEqual(expect.arrayContaining([
      ['remove', ids.a, 'router', 'Evicted: The node was low on resource: memory.', 'a', 'node-1'],
      ['remove', ids.b, 'router', 'OOMKilled (exit code 137)', 'b', 'node-1'],
      ['remove', ids.c, 'router', 'Error (exit code 3)', 'c', 'node-1'],
      ['drain', ids.d, 'router', 'pod deleted (grace 30s)', 'd', 'node-1'],
    ]));
    // The kubelet's statuses, as the pods source reads them.
    const c = fake.podList().find((p) => p.name === 'c');
    expect(c?.terminated).toEqual({ reason: 'Error', exitCode: 3 });
  });
});
