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

  it('--prefill-selector and --decode-selector need --pd-disaggregation to stand in for --selector', () => {
    expect(loadConfig({ flags: { serviceDiscovery: true, pdDisaggregation: true, prefillSelector: 'component=prefill', decodeSelector: ['component=decode'] } })).toMatchObject({ prefillSelector: ['component=prefill'], decodeSelector: ['component=decode'] });
    expect(() => loadConfig({ flags: { serviceDiscovery: true, prefillSelector: ['component=prefill'] } })).toThrow(/needs --selector/);
    expect(() => loadConfig({ flags: { prefillSelector: ['bad term'] } })).toThrow(/label terms/);
  });
});
