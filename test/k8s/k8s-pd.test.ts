// P/D with Kubernetes discovery (docs/pd.md): --prefill-selector / --decode-selector and the
// `sglang.ai/bootstrap-port` annotation, as the gateway's service_discovery.rs reads them, against
// the fake API server (sim/k8s/apiserver.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { clientFromKubeConfig } from '../../router/discovery/k8s-api.ts';
import { podView } from '../../router/discovery/k8s-pods.ts';
import { k8sRoleSource, k8sSource } from '../../router/discovery/k8s.ts';
import { DEFAULTS, loadConfig } from '../../router/config.ts';
import { Reconciler, startDiscovery } from '../../router/discovery/index.ts';
import { WorkerPool } from '../../router/pool/worker-pool.ts';
import { createPolicy } from '../../router/pool/policies/index.ts';
import { Drainer } from '../../router/migration/drain.ts';
import { RecordingSink, until } from './recording-sink.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-k8s-pd-'));
async function clientFor(fake: FakeApiServer) {
  const kc = new KubeConfig();
  kc.loadFromFile(fake.writeKubeconfig(join(dir, 'kc.yaml')));
  return clientFromKubeConfig(kc);
}

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('P/D pods', () => {
  const base = { metadata: { uid: 'u1', name: 'p', namespace: 'ns' }, status: { phase: 'Running', podIP: '10.0.0.9', conditions: [{ type: 'Ready', status: 'True' }] } };

  it("a prefill pod's bootstrap port is its sglang.ai/bootstrap-port annotation; a value that is not a port is none", () => {
    const withAnn = (v: string) => ({ ...base, metadata: { ...base.metadata, annotations: { 'sglang.ai/bootstrap-port': v } } });
    expect(podView(withAnn('9001'), 8000, 'prefill')).toMatchObject({ kind: 'up', worker: { url: 'http://10.0.0.9:8000', pdRole: 'prefill', bootstrapPort: 9001 } });
    expect(podView(withAnn('bootstrap'), 8000, 'prefill')).toMatchObject({ kind: 'up', worker: { pdRole: 'prefill', bootstrapPort: null } });
    expect(podView(withAnn('9001'), 8000, 'decode')).toMatchObject({ kind: 'up', worker: { pdRole: 'decode', bootstrapPort: null } });
    expect(podView(base, 8000)).toMatchObject({ kind: 'up', worker: { url: 'http://10.0.0.9:8000' } });
    expect((podView(base, 8000) as { worker: object }).worker).not.toHaveProperty('pdRole');
  });

  it('one source per role; a pod matching both selectors is a prefill server, as in the gateway', async () => {
    const fake = await new FakeApiServer({ bookmarkMs: 60_000 }).start();
    cleanup.push(() => fake.close());
    const p = fake.createPod({ name: 'p', labels: { app: 'sglang', component: 'prefill' }, annotations: { 'sglang.ai/bootstrap-port': '9001' } });
    const d = fake.createPod({ name: 'd', labels: { app: 'sglang', component: 'decode' } });
    fake.createPod({ name: 'x', labels: { app: 'nginx' } });
    const cfg = { ...DEFAULTS, serviceDiscovery: true, pdDisaggregation: true, serviceDiscoveryNamespace: 'default', prefillSelector: ['component=prefill'], decodeSelector: ['app=sglang'] };
    const client = await clientFor(fake);
    expect(k8sSource(cfg, { client })).toBeNull(); // no general --selector: no aggregated workers
    const sinks = { prefill: new RecordingSink(), decode: new RecordingSink() };
    for (const role of ['prefill', 'decode'] as const) {
      const source = k8sRoleSource(cfg, role, { client, log: () => undefined })!;
      expect(source.name).toBe(`k8s-pods-${role}`);
      await source.start(sinks[role]);
      cleanup.push(() => source.stop());
    }
    await until(() => sinks.prefill.serving().size === 1 && sinks.decode.serving().size === 1, 'both roles listed');
    expect(sinks.prefill.workers.get(p.uid)!.w).toMatchObject({ pdRole: 'prefill', bootstrapPort: 9001, url: `http://${p.ip}:8000` });
    expect(sinks.decode.workers.get(d.uid)!.w).toMatchObject({ pdRole: 'decode', url: `http://${d.ip}:8000` });
    expect(sinks.decode.workers.has(p.uid)).toBe(false);
  });

  it('overlapping selectors: a pod is one kind, prefill first, then decode, then regular (the gateway\'s PodInfo::from_pod)', async () => {
    const fake = await new FakeApiServer({ bookmarkMs: 60_000 }).start();
    cleanup.push(() => fake.close());
    // Every pod matches the general --selector too.
    const p = fake.createPod({ name: 'p', labels: { app: 'sglang', role: 'prefill' }, annotations: { 'sglang.ai/bootstrap-port': '9001' } });
    const d = fake.createPod({ name: 'd', labels: { app: 'sglang', role: 'decode' } });
    const both = fake.createPod({ name: 'both', labels: { app: 'sglang', role: 'prefill', also: 'decode' }, annotations: { 'sglang.ai/bootstrap-port': '9002' } });
    const r = fake.createPod({ name: 'r', labels: { app: 'sglang' } });
    const cfg = loadConfig({ flags: { serviceDiscovery: true, selector: ['app=sglang'], pdDisaggregation: true, prefillSelector: ['role=prefill'], decodeSelector: ['role=decode'], serviceDiscoveryNamespace: 'default' }, env: {} });
    // The router's own sources (discovery/index.ts SOURCES), with the kubeconfig from KUBECONFIG.
    const before = process.env.KUBECONFIG;
    process.env.KUBECONFIG = fake.writeKubeconfig(join(dir, 'kc-overlap.yaml'));
    cleanup.push(async () => {
      if (before === undefined) delete process.env.KUBECONFIG; else process.env.KUBECONFIG = before;
    });
    // Health checks off: the pods' IPs are not served; the pool only holds them.
    const pool = new WorkerPool(
      { circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 }, connectTimeoutMs: 200, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0 },
      createPolicy('least_inflight'),
      () => undefined,
      () => undefined,
    );
    cleanup.push(() => pool.close());
    const reconciler = new Reconciler(pool, new Drainer(pool, { marginMs: 100 }));
    const discovery = await startDiscovery(cfg, reconciler);
    cleanup.push(() => discovery.stop());
    expect(discovery.sources.map((s) => s.name)).toEqual(['k8s-pods', 'k8s-pods-prefill', 'k8s-pods-decode']);
    await until(() => pool.infos().length === 4 && reconciler.ownedKeys().every((k) => k.workerId !== null), 'four workers, each of one source');
    const by = (pod: string) => pool.infos().find((w) => w.discovery?.pod === pod)!;
    expect(by('p')).toMatchObject({ url: `http://${p.ip}:8000`, pd_role: 'prefill', bootstrap_port: 9001, discovery: { source: 'k8s-pods' } });
    expect(by('both')).toMatchObject({ url: `http://${both.ip}:8000`, pd_role: 'prefill', bootstrap_port: 9002 });
    expect(by('d')).toMatchObject({ url: `http://${d.ip}:8000`, pd_role: 'decode' });
    expect(by('r').pd_role).toBeUndefined();
    // Each pod is owned by exactly one source: its kind's.
    const owners = new Map(reconciler.ownedKeys().map((k) => [k.key, k.source]));
    expect(owners).toEqual(new Map([[p.uid, 'k8s-pods-prefill'], [both.uid, 'k8s-pods-prefill'], [d.uid, 'k8s-pods-decode'], [r.uid, 'k8s-pods']]));
    // A relabel moves a pod between kinds: the regular pod becomes a decode server.
    fake.updatePod('r', 'default', (x) => { x.labels.role = 'decode'; });
    await until(() => pool.infos().find((w) => w.discovery?.pod === 'r')?.pd_role === 'decode', 'r to become a decode server', 15_000);
  });

  it('--prefill-selector and --decode-selector need --pd-disaggregation to stand in for --selector', () => {
    expect(loadConfig({ flags: { serviceDiscovery: true, pdDisaggregation: true, prefillSelector: 'component=prefill', decodeSelector: ['component=decode'] } })).toMatchObject({ prefillSelector: ['component=prefill'], decodeSelector: ['component=decode'] });
    expect(() => loadConfig({ flags: { serviceDiscovery: true, prefillSelector: ['component=prefill'] } })).toThrow(/needs --selector/);
    expect(() => loadConfig({ flags: { prefillSelector: ['bad term'] } })).toThrow(/label terms/);
  });
});
