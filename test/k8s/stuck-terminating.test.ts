// A pod stuck in Terminating (its deletionTimestamp passed, still listed: a lost node whose kubelet
// never confirms the kill, a finalizer nobody removes) is drained once and removed at its deadline,
// and stays out however many re-lists still list it, in both modes: pods (deletionTimestamp) and
// EndpointSlices (the endpoint `serving` and `terminating`). The gateway never adds a terminating
// pod either: sgl-model-gateway service_discovery.rs `reconcile_from_list` skips a pod with a
// deletion_timestamp ("deliberately NOT counted as present"), and its watch path deregisters it.
// The real pool, drainer and reconciler, over the fake API server.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { clientFromKubeConfig } from '../../router/discovery/k8s-api.ts';
import { K8sPodsSource } from '../../router/discovery/k8s-pods.ts';
import { K8sEndpointSlicesSource } from '../../router/discovery/k8s-endpointslices.ts';
import { Reconciler } from '../../router/discovery/reconciler.ts';
import { WorkerPool } from '../../router/pool/worker-pool.ts';
import { createPolicy } from '../../router/pool/policies/index.ts';
import { Drainer } from '../../router/migration/drain.ts';
import { until } from './recording-sink.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-k8s-stuck-'));
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe.each(['pods', 'endpointslices'] as const)('a pod stuck in Terminating (%s)', (mode) => {
  it('is drained once, removed at its deadline, and not added again by the re-lists that still list it', async () => {
    const fake = await new FakeApiServer({ bookmarkMs: 60_000 }).start();
    cleanup.push(() => fake.close());
    const kc = new KubeConfig();
    kc.loadFromFile(fake.writeKubeconfig(join(dir, `${mode}.yaml`)));
    // Every worker the pool ever added, by URL (a flap adds a new id each re-list).
    const added = new Map<string, Set<string>>();
    // Health checks off: the pods' IPs are not served; the pool only holds them.
    const pool = new WorkerPool(
      { circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 }, connectTimeoutMs: 200, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0 },
      createPolicy('least_inflight'),
      (w) => {
        if (!added.has(w.url)) added.set(w.url, new Set());
        added.get(w.url)!.add(w.id);
      },
      () => undefined,
    );
    cleanup.push(() => pool.close());
    const drainer = new Drainer(pool, { marginMs: 100 });
    cleanup.push(() => drainer.close());
    const reconciler = new Reconciler(pool, drainer);
    const common = { client: await clientFromKubeConfig(kc), namespace: 'default', selector: ['app=sglang'], port: 8000, relistMs: 1_000, watchdogMs: 1_000, backoffMinMs: 20, backoffMaxMs: 200 };
    const source = mode === 'pods' ? new K8sPodsSource(common) : new K8sEndpointSlicesSource({ ...common, service: 'workers', drainGraceMs: 3_000 });
    if (mode === 'endpointslices') fake.createService('workers', { app: 'sglang' }, 8000);
    const stuck = fake.createPod({ name: 'stuck', labels: { app: 'sglang' }, finalizers: ['example.com/never-removed'] });
    const other = fake.createPod({ name: 'other', labels: { app: 'sglang' } });
    await source.start(reconciler.sink(source.name));
    cleanup.push(() => source.stop());
    const url = `http://${stuck.ip}:8000`;
    await until(() => pool.list().length === 2, 'both workers');

    fake.deletePod('stuck', 3);
    await until(() => pool.list().some((w) => w.url === url && w.draining), 'the stuck pod to drain');
    // A re-list while it drains keeps it draining, and keeps why on it (/workers, the dashboard).
    const reason = mode === 'pods' ? 'pod deleted (grace 3s)' : 'endpoint terminating';
    const during = source.lists;
    await until(() => source.lists > during, 'a re-list during the drain');
    expect(pool.list().find((w) => w.url === url)).toMatchObject({ draining: true, discovery: { reason } });
    await until(() => !pool.list().some((w) => w.url === url), 'its worker to go at the deadline', 10_000);
    // Three more re-lists, each listing the pod Terminating, its deadline passed.
    const lists = source.lists;
    await until(() => source.lists >= lists + 3, 'three re-lists', 15_000);
    expect(fake.pod('stuck')!.deletionTimestamp).toBeLessThan(Date.now());
    expect(pool.list().map((w) => w.url)).toEqual([`http://${other.ip}:8000`]);
    expect(added.get(url)!.size).toBe(1);

    // The finalizer goes: the pod with it, and nothing comes back.
    fake.finalizePod('stuck');
    const after = source.lists;
    await until(() => source.lists > after, 'the next re-list', 15_000);
    expect(added.get(url)!.size).toBe(1);
    expect(reconciler.ownedKeys().map((k) => k.key)).toEqual([other.uid]);
  }, 40_000);
});
