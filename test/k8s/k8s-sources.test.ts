// The Kubernetes discovery sources against the fake API server (sim/k8s/apiserver.ts), through
// @kubernetes/client-node's kubeconfig handling, into a recording sink.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { clientFromKubeConfig, type K8sClient } from '../../router/discovery/k8s-api.ts';
import { K8sPodsSource, podView } from '../../router/discovery/k8s-pods.ts';
import { K8sEndpointSlicesSource } from '../../router/discovery/k8s-endpointslices.ts';
import { RecordingSink, until } from './recording-sink.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-k8s-'));
let n = 0;
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

export async function clientFor(fake: FakeApiServer): Promise<K8sClient> {
  const kc = new KubeConfig();
  kc.loadFromFile(fake.writeKubeconfig(join(dir, `kc-${n++}.yaml`)));
  return clientFromKubeConfig(kc);
}

async function setup(o: { relistMs?: number; watchdogMs?: number; bookmarkMs?: number; mode?: 'pods' | 'endpointslices' } = {}) {
  const fake = await new FakeApiServer({ bookmarkMs: o.bookmarkMs ?? 60_000 }).start();
  cleanup.push(() => fake.close());
  const sink = new RecordingSink();
  const common = { client: await clientFor(fake), namespace: 'default', selector: ['app=sglang'], port: 8000, relistMs: o.relistMs ?? 60_000, watchdogMs: o.watchdogMs ?? 1_000, backoffMinMs: 20, backoffMaxMs: 200 };
  const source = o.mode === 'endpointslices' ? new K8sEndpointSlicesSource({ ...common, service: 'workers', drainGraceMs: 30_000 }) : new K8sPodsSource(common);
  return { fake, sink, source, start: async () => { await source.start(sink); cleanup.push(() => source.stop()); } };
}

describe('podView', () => {
  const base = { metadata: { uid: 'u1', name: 'w', namespace: 'ns' }, spec: { nodeName: 'n1' }, status: { phase: 'Running', podIP: '10.1.2.3', conditions: [{ type: 'Ready', status: 'True' }] } };
  it('a Running, Ready pod with an IP is a worker at http://<podIP>:<port>, keyed by UID', () => {
    expect(podView(base, 8000)).toEqual({ kind: 'up', worker: { key: 'u1', url: 'http://10.1.2.3:8000', meta: { source: 'k8s-pods', pod: 'w', namespace: 'ns', node: 'n1' } } });
  });
  it('annotations override the port and the format; bad ones are refused with the reason', () => {
    const v = podView({ ...base, metadata: { ...base.metadata, annotations: { 'baton.dev/port': '30001', 'baton.dev/format': 'vllm' } } }, 8000);
    expect(v.kind === 'up' && v.worker).toMatchObject({ url: 'http://10.1.2.3:30001', format: 'vllm' });
    expect(podView({ ...base, metadata: { ...base.metadata, annotations: { 'baton.dev/port': 'http' } } }, 8000)).toMatchObject({ kind: 'invalid', reason: /baton.dev\/port must be a port number, got "http"/ });
    expect(podView({ ...base, metadata: { ...base.metadata, annotations: { 'baton.dev/format': 'tgi' } } }, 8000)).toMatchObject({ kind: 'invalid', reason: /one of sglang, vllm/ });
  });
  it('reads why a pod is down from its status', () => {
    expect(podView({ ...base, status: { ...base.status, conditions: [{ type: 'Ready', status: 'False' }] } }, 1)).toMatchObject({ kind: 'down', reason: 'not ready' });
    expect(podView({ ...base, status: { phase: 'Failed', reason: 'Evicted', message: 'low on memory' } }, 1)).toMatchObject({ kind: 'down', reason: 'Evicted: low on memory' });
    expect(podView({ ...base, status: { ...base.status, conditions: [], containerStatuses: [{ lastState: { terminated: { reason: 'OOMKilled', exitCode: 137 } } }] } }, 1)).toMatchObject({ kind: 'down', reason: 'OOMKilled (exit code 137)' });
    expect(podView({ ...base, metadata: { ...base.metadata, deletionTimestamp: '2026-01-01T00:00:30Z', deletionGracePeriodSeconds: 30 } }, 1)).toMatchObject({ kind: 'draining', deadline: Date.parse('2026-01-01T00:00:30Z'), reason: 'pod deleted (grace 30s)' });
    expect(podView({ ...base, status: { ...base.status, podIP: '' } }, 1)).toMatchObject({ kind: 'down', reason: 'no pod IP' });
    expect(podView({ ...base, status: { ...base.status, podIP: 'fd00::5' } }, 80)).toMatchObject({ worker: { url: 'http://[fd00::5]:80' } });
  });
});

describe('K8sPodsSource', () => {
  it('follows a pod through readiness, a graceful delete (drain to its deletionTimestamp), eviction and OOM', async () => {
    const { fake, sink, start } = await setup();
    const a = fake.createPod({ name: 'a', labels: { app: 'sglang' }, annotations: { 'baton.dev/format': 'vllm' } });
    fake.createPod({ name: 'other', labels: { app: 'nginx' } });
    await start();
    expect(sink.last?.kind).toBe('synced');
    expect([...sink.serving()]).toEqual([[a.uid, `http://${a.ip}:8000`]]);
    expect(sink.workers.get(a.uid)!.w).toMatchObject({ format: 'vllm', meta: { pod: 'a', namespace: 'default', node: 'node-1', source: 'k8s-pods' } });

    const b = fake.createPod({ name: 'b', labels: { app: 'sglang' }, ready: false });
    fake.setReady('b', true);
    await until(() => sink.serving().has(b.uid), 'b to be upserted once ready');
    fake.setReady('b', false);
    await until(() => !sink.workers.has(b.uid), 'b to go when not ready');
    expect(sink.calls.at(-1)).toMatchObject({ op: 'remove', key: b.uid, reason: 'not ready' });

    const deadline = fake.deletePod('a', 30);
    await until(() => sink.draining().has(a.uid), 'a to drain');
    expect(sink.draining().get(a.uid)).toBe(deadline);
    expect(sink.calls.find((c) => c.op === 'drain')).toMatchObject({ key: a.uid, reason: 'pod deleted (grace 30s)' });
    fake.finalizePod('a');
    await until(() => !sink.workers.has(a.uid), 'a to go when its pod does');

    const c = fake.createPod({ name: 'c', labels: { app: 'sglang' } });
    const d = fake.createPod({ name: 'd', labels: { app: 'sglang' } });
    await until(() => sink.serving().has(c.uid) && sink.serving().has(d.uid), 'c and d');
    fake.evictPod('c');
    fake.oomKill('d');
    await until(() => sink.workers.size === 0, 'c and d to go');
    const removals = sink.calls.filter((x) => x.op === 'remove').map((x) => [x.key, x.reason]);
    expect(removals).toContainEqual([c.uid, 'Evicted: The node was low on resource: memory.']);
    expect(removals).toContainEqual([d.uid, 'OOMKilled (exit code 137)']);
  });

  it('RBAC refusal is `forbidden` with the missing verb, and recovers to synced once allowed', async () => {
    const { fake, sink, start } = await setup();
    fake.forbid('pods', 'list');
    await start();
    expect(sink.last).toEqual({ kind: 'forbidden', detail: 'list pods in namespace default' });
    fake.allow();
    fake.forbid('pods', 'watch');
    await until(() => sink.last?.kind === 'forbidden' && sink.last.detail === 'watch pods in namespace default', 'the watch refusal');
    fake.allow();
    await until(() => sink.last?.kind === 'synced', 'synced once allowed');
  });

  it('an unreachable API server is `unreachable`; a delete missed meanwhile is caught by the re-list', async () => {
    const { fake, sink, start } = await setup();
    const a = fake.createPod({ name: 'a', labels: { app: 'sglang' } });
    const b = fake.createPod({ name: 'b', labels: { app: 'sglang' } });
    await start();
    expect(sink.serving().size).toBe(2);
    await fake.down();
    await until(() => sink.last?.kind === 'unreachable', 'unreachable');
    expect(sink.last).toMatchObject({ detail: expect.stringMatching(/ECONNREFUSED/) });
    fake.finalizePod('a'); // missed: nobody watches
    await fake.up();
    await until(() => sink.last?.kind === 'synced' && !sink.workers.has(a.uid), 'the re-list to drop a');
    expect([...sink.serving().keys()]).toEqual([b.uid]);
  });

  it('410 Gone (an expired watch, a compacted resourceVersion) re-lists; changes during it are not lost', async () => {
    const { fake, sink, start, source } = await setup();
    await start();
    await until(() => fake.openWatches > 0, 'the watch');
    const lists = (source as K8sPodsSource).lists;
    fake.compact();
    fake.expireWatches();
    const a = fake.createPod({ name: 'a', labels: { app: 'sglang' } });
    await until(() => sink.serving().has(a.uid) && (source as K8sPodsSource).lists > lists, 'a re-list after 410 that finds a');
    expect(sink.states.some((s) => s.kind !== 'synced')).toBe(false); // 410 is routine, not staleness
  });

  it('a watch held open and silent past its timeoutSeconds trips the watchdog: stale since its last byte, then synced', async () => {
    const { fake, sink, start } = await setup({ relistMs: 1_000, watchdogMs: 300 });
    await start();
    await until(() => fake.openWatches > 0, 'the watch');
    fake.faultWatches('silent');
    const a = fake.createPod({ name: 'a', labels: { app: 'sglang' } }); // not delivered by the silent watch
    await until(() => sink.serving().has(a.uid), 'a, found by the re-list after the watchdog');
    const stale = sink.states.find((s) => s.kind === 'stale');
    expect(stale).toMatchObject({ kind: 'stale', detail: expect.stringMatching(/held open past its timeoutSeconds/) });
    expect(sink.last?.kind).toBe('synced');
  });

  it('BOOKMARK events move the watch on without touching the sink', async () => {
    const { fake, sink, start } = await setup({ bookmarkMs: 20 });
    fake.createPod({ name: 'a', labels: { app: 'sglang' } });
    await start();
    const before = sink.calls.length;
    await new Promise((r) => setTimeout(r, 200));
    expect(sink.calls.length).toBe(before);
    const b = fake.createPod({ name: 'b', labels: { app: 'sglang' } });
    await until(() => sink.serving().has(b.uid), 'b after the bookmarks');
    expect(fake.requests.filter((r) => r.includes('watch=true')).every((r) => r.includes('allowWatchBookmarks=true'))).toBe(true);
  });
});

describe('K8sEndpointSlicesSource', () => {
  it('ready endpoints are workers keyed by the pod UID; serving+terminating drains; gone removes', async () => {
    const { fake, sink, start } = await setup({ mode: 'endpointslices' });
    fake.createService('workers', { app: 'sglang' }, 30000);
    const a = fake.createPod({ name: 'a', labels: { app: 'sglang' } });
    const b = fake.createPod({ name: 'b', labels: { app: 'sglang' } });
    await start();
    expect(new Map(sink.serving())).toEqual(new Map([[a.uid, `http://${a.ip}:30000`], [b.uid, `http://${b.ip}:30000`]]));
    expect(sink.workers.get(a.uid)!.w.meta).toEqual({ source: 'k8s-endpointslices', pod: 'a', namespace: 'default', node: 'node-1' });
    const t0 = Date.now();
    fake.deletePod('a', 30);
    await until(() => sink.draining().has(a.uid), 'a draining');
    expect(sink.draining().get(a.uid)).toBeGreaterThanOrEqual(t0 + 30_000);
    fake.finalizePod('a');
    await until(() => !sink.workers.has(a.uid), 'a gone');
    fake.setReady('b', false);
    await until(() => sink.workers.size === 0, 'b gone when not ready');
  });
});
