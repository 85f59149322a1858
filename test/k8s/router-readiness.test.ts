// A router's readiness is its own (router/http/lifecycle.ts): it waits for discovery's first
// listing (a router that cannot read the pods, RBAC refused, says so and takes no traffic), then
// stays ready with no worker up at all: a worker outage must not take every router pod out of the
// Service, where clients would get connection refused instead of the router's 503. A real router
// over the fake API server.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { until } from './recording-sink.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-k8s-ready-'));
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function readyz(r: RouterHandle): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${r.url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('readiness with Kubernetes discovery', () => {
  it('is 503 until discovery has listed the workers once, then 200 even with every worker down', async () => {
    const fake = await new FakeApiServer({ bookmarkMs: 60_000 }).start();
    cleanup.push(() => fake.close());
    fake.forbid('pods', 'list');
    const before = process.env.KUBECONFIG;
    process.env.KUBECONFIG = fake.writeKubeconfig(join(dir, 'kc.yaml'));
    cleanup.push(() => {
      if (before === undefined) delete process.env.KUBECONFIG; else process.env.KUBECONFIG = before;
    });
    // A pod at an address nothing serves: a worker that is never healthy.
    fake.createPod({ name: 'w', labels: { app: 'sglang' } });
    const router = await startRouter({ port: 0, serviceDiscovery: true, selector: ['app=sglang'], serviceDiscoveryNamespace: 'default', healthIntervalMs: 100, healthTimeoutMs: 200, connectTimeoutMs: 200 });
    cleanup.push(() => router.close());
    const refused = await readyz(router);
    expect(refused).toMatchObject({ status: 503, body: { status: 'not_ready', reason: 'discovery has not listed the workers yet: k8s-pods forbidden (list pods in namespace default)' } });
    fake.allow();
    await until(() => router.workers().length === 1, 'the pod, once listing is allowed', 15_000);
    const up = await readyz(router);
    expect(up).toEqual({ status: 200, body: { status: 'ready', healthy_workers: 0, total_workers: 1, in_flight: 0 } });
    expect((await fetch(`${router.url}/health`)).status).toBe(503);
    // Discovery failing later does not unready it: the workers it last listed still stand.
    await fake.down();
    let state: string | undefined;
    const poll = setInterval(() => void router.stats!().then((s) => { state = s.discovery?.[0]?.state; }), 50);
    cleanup.push(() => clearInterval(poll));
    await until(() => state === 'unreachable', 'discovery to find the API server gone', 15_000);
    expect((await readyz(router)).status).toBe(200);
  }, 30_000);
});
