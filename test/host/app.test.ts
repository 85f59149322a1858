import { afterEach, describe, expect, it } from 'vitest';
import { resolveAppOptions, startApp, type AppHandle } from '../../host/app.ts';
import type { SimClusterLike, SimFaultKind } from '../../host/sim-control.ts';
import type { Snapshot } from '../../host/contract.ts';
import { startFakeRouter, type FakeRouter } from './fake-router.ts';

function fakeCluster(n: number) {
  const calls: string[] = [];
  const workers = Array.from({ length: n }, (_, index) => ({ index, url: `http://127.0.0.1:${40000 + index}`, port: 40000 + index, pid: 1000 + index, alive: true }));
  const cluster: SimClusterLike & { calls: string[] } = {
    calls,
    workers: () => workers.map((w) => ({ ...w })),
    kill: (i: number) => { calls.push(`kill ${i}`); workers[i]!.alive = false; },
    restart: (i: number) => { calls.push(`restart ${i}`); workers[i]!.alive = true; },
    fault: (i: number, f: { kind: SimFaultKind }) => { calls.push(`${f.kind} ${i}`); },
    onChange: () => () => {},
    stop: () => { calls.push('stop'); },
  };
  return cluster;
}

let app: AppHandle | null = null;
let router: FakeRouter;
afterEach(async () => {
  await app?.close();
  app = null;
});

async function start(opts: Parameters<typeof startApp>[0] = {}) {
  router = await startFakeRouter();
  const cluster = fakeCluster(opts?.sim ?? 3);
  const closed: string[] = [];
  cluster.stop = () => { closed.push('cluster'); };
  const close = router.close;
  router.close = async () => { closed.push('router'); await close(); };
  app = await startApp({ staticRoot: null, traffic: false, ...opts, deps: { startRouter: () => router, startCluster: () => cluster } });
  return { cluster, closed };
}

const json = { 'content-type': 'application/json' };

describe('startApp defaults', () => {
  it('simulates 3 workers with traffic when no workers are given, neither with a dev cluster', () => {
    expect(resolveAppOptions({})).toEqual({ sim: 3, traffic: true });
    expect(resolveAppOptions({ workers: ['http://gpu-a:30000'] })).toEqual({ sim: 0, traffic: false });
    expect(resolveAppOptions({ workers: ['http://gpu-a:30000'], traffic: true, sim: 1 })).toEqual({ sim: 1, traffic: true });
    expect(resolveAppOptions({ sim: 2, traffic: false })).toEqual({ sim: 2, traffic: false });
  });
});

describe('startApp with a simulated cluster', () => {
  it('registers each simulated worker with its sim index', async () => {
    await start();
    expect(router.added).toEqual([0, 1, 2].map((i) => ({ url: `http://127.0.0.1:${40000 + i}`, opts: { simulated: true, simIndex: i } })));
  });

  it('drives faults through POST /api/sim/:index/:action', async () => {
    const { cluster } = await start();
    const res = await fetch(`${router.url}/api/sim/1/kill`, { method: 'POST', headers: json, body: '{}' });
    expect(res.status).toBe(200);
    const { workers } = (await res.json()) as { workers: { index: number; alive: boolean; fault: string | null }[] };
    expect(workers[1]).toMatchObject({ alive: false, fault: 'kill' });
    for (const action of ['hang', 'reset', 'reject', 'slow', 'clear', 'restart']) {
      expect((await fetch(`${router.url}/api/sim/0/${action}`, { method: 'POST', headers: json, body: '{}' })).status).toBe(200);
    }
    expect(cluster.calls).toEqual(['kill 1', 'hang 0', 'reset 0', 'reject 0', 'slow 0', 'clear 0', 'restart 0']);
    expect((await fetch(`${router.url}/api/sim/9/kill`, { method: 'POST', headers: json, body: '{}' })).status).toBe(404);
    expect((await fetch(`${router.url}/api/sim/0/explode`, { method: 'POST', headers: json, body: '{}' })).status).toBe(400);
  });

  it('refuses cross-origin and non-JSON mutations', async () => {
    const { cluster } = await start();
    const crossOrigin = await fetch(`${router.url}/api/sim/0/kill`, { method: 'POST', headers: { ...json, origin: 'http://evil.example' }, body: '{}' });
    expect(crossOrigin.status).toBe(403);
    const form = await fetch(`${router.url}/api/sim/0/kill`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
    expect(form.status).toBe(415);
    const sameOrigin = await fetch(`${router.url}/api/sim/0/kill`, { method: 'POST', headers: { ...json, origin: router.url }, body: '{}' });
    expect(sameOrigin.status).toBe(200);
    expect(cluster.calls).toEqual(['kill 0']);
  });

  it('adds, drains and removes workers', async () => {
    await start({ sim: 1 });
    const added = await fetch(`${router.url}/api/workers`, { method: 'POST', headers: json, body: JSON.stringify({ url: 'http://gpu-a:30000/' }) });
    expect(added.status).toBe(201);
    expect(await added.json()).toMatchObject({ id: 'w1', url: 'http://gpu-a:30000' });
    expect((await fetch(`${router.url}/api/workers`, { method: 'POST', headers: json, body: '{"url":"ftp://x"}' })).status).toBe(400);
    expect((await fetch(`${router.url}/api/workers/w1/drain`, { method: 'POST', headers: json, body: '{"draining":true}' })).status).toBe(200);
    expect(router.workers().find((w) => w.id === 'w1')?.draining).toBe(true);
    expect((await fetch(`${router.url}/api/workers/w1`, { method: 'DELETE' })).status).toBe(200);
    expect((await fetch(`${router.url}/api/workers/w1`, { method: 'DELETE' })).status).toBe(404);
  });

  it('gives a late page a snapshot with workers, rows and in-flight events', async () => {
    await start();
    router.rows.push({ kind: 'request', request_id: 'old' } as never);
    router.emit({ type: 'request_admitted', t: 1, request_id: 'live', admitted: true, reason: null, stream: true, prompt_tokens: 3, max_new_tokens: 8, trace_id: null });
    const snap = (await (await fetch(`${router.url}/api/snapshot`)).json()) as Snapshot;
    expect(snap.workers).toHaveLength(3);
    expect(snap.rows.map((r) => r.request_id)).toEqual(['old']);
    expect(snap.inflight.map((e) => e.type)).toEqual(['request_admitted']);
    expect(snap.sim?.map((w) => w.index)).toEqual([0, 1, 2]);
    expect(snap.traffic).toBeNull();
  });

  it('reads and adjusts the traffic generator', async () => {
    await start({ traffic: true, trafficSettings: { rate: 0 } });
    const status = await (await fetch(`${router.url}/api/traffic`)).json();
    expect(status).toMatchObject({ settings: { rate: 0, running: true }, sent: 0 });
    const put = await fetch(`${router.url}/api/traffic`, { method: 'PUT', headers: json, body: '{"running":false,"rate":3}' });
    expect(await put.json()).toMatchObject({ settings: { rate: 3, running: false } });
    expect((await fetch(`${router.url}/api/traffic`, { method: 'PUT', headers: json, body: '{"rate":"fast"}' })).status).toBe(400);
  });

  it('stops the router before the cluster it routes to', async () => {
    const { closed } = await start();
    await app!.close();
    app = null;
    expect(closed).toEqual(['router', 'cluster']);
  });
});
