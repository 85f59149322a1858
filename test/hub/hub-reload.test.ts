// The dashboard hub over `baton router --replicas 2` reloaded by SIGHUP (docs/replicas.md,
// "Reload"): real processes. Requests run through the shared port while each replica is replaced;
// the old process of a slot drains the requests it holds. The hub must end with every request's
// row, those the old processes finished while draining included, and none marked "router lost".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startHub, type HubHandle } from '../../host/hub/server.ts';
import { spawnRouter, waitUntil, type RouterProc } from '../router/harness/procs.ts';

interface List { replicas: { epoch: number; state: string }[]; reload?: { state: string; draining: unknown[] } }

let cluster: SimCluster;
let router: RouterProc;
let hub: HubHandle | null = null;

beforeAll(async () => {
  // 10 ms a token: a request of 60 tokens lasts ~0.6 s, so some are in flight on each old process.
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 10 });
  router = await spawnRouter(['--replicas', '2', '--shutdown-grace-ms', '20000', ...cluster.workers().flatMap((w) => ['--worker', w.url])], 100_000);
}, 120_000);

afterAll(async () => {
  await hub?.close();
  await router?.stop();
  await cluster?.stop();
});

describe('the hub across a reload', () => {
  it('holds every request, those the replaced processes finished while draining included, and marks none "router lost"', async () => {
    hub = await startHub({ routers: [router.url], port: 0, host: '127.0.0.1', staticRoot: null });
    const h = hub;
    await waitUntil(() => h.status().routers.length === 2 && h.status().routers.every((r) => r.state === 'connected'), 20_000, 'the hub following both replicas');
    let sent = 0;
    let ok = 0;
    const ids: string[] = [];
    let stop = false;
    const client = async (k: number) => {
      while (!stop) {
        const rid = `reload-hub-${k}-${sent++}`;
        ids.push(rid);
        const res = await fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid, input_ids: [5, 6, 7, 8], sampling_params: { max_new_tokens: 60, ignore_eos: true } }) });
        await res.text();
        if (res.status === 200) ok++;
      }
    };
    const clients = Array.from({ length: 6 }, (_, k) => client(k));
    await new Promise((r) => setTimeout(r, 800));
    router.proc.kill('SIGHUP');
    await waitUntil(async () => {
      const list = (await (await fetch(`${router.url}/replicas`)).json()) as List;
      return list.reload?.state === 'done' && list.reload.draining.length === 0 && list.replicas.every((r) => r.epoch === 1 && r.state === 'up');
    }, 60_000, 'the reload done and the old processes gone');
    stop = true;
    await Promise.all(clients);
    expect(ok).toBe(sent);
    await waitUntil(() => h.status().routers.every((r) => r.state === 'connected' && r.replica?.epoch === 1), 10_000, 'the hub on the new processes');
    const held = () => h.hub.rows().filter((r) => r.kind === 'request' && r.request_id.includes('/reload-hub-')).length;
    await waitUntil(() => held() === sent, 10_000, `the hub holding all ${sent} requests`).catch(() => undefined);
    const have = new Set(h.hub.rows().filter((r) => r.kind === 'request').map((r) => r.request_id.slice(r.request_id.indexOf('/') + 1)));
    expect(ids.filter((id) => !have.has(id)), 'requests the hub never heard of').toEqual([]);
    expect(held()).toBe(sent);
    expect(h.hub.state().owner_lost).toEqual([]);
  }, 150_000);
});
