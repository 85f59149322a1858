// The hub's GET /traces over real routers: the hub names requests `<router>/<id>` (r0/…, r1/…),
// but a client looks its requests up by the ids it sent. `request_prefix` and `request` match the
// client's ids (the hub's own names still match, as the dashboard's search uses them), and
// `router` keeps one router's rows. Two routers in process on one simulated worker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { startHub, type HubHandle } from '../../host/hub/server.ts';
import { waitUntil } from '../router/harness/procs.ts';

let worker: SimWorker;
const routers: RouterHandle[] = [];
let hub: HubHandle;

// Client ids by router: `rho-1` starts with `r`, as every hub name does.
const SENT: Record<number, string[]> = { 0: ['alpha-1', 'alpha-2', 'beta-1'], 1: ['alpha-3', 'rho-1', 'beta-1'] };

beforeAll(async () => {
  worker = await startWorker({ tokenIntervalMs: 0 });
  for (let i = 0; i < 2; i++) routers.push(await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 0 }));
  hub = await startHub({ routers: routers.map((r) => r.url) });
  for (const [i, ids] of Object.entries(SENT)) {
    for (const rid of ids) {
      const res = await fetch(`${routers[Number(i)]!.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid, input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 4, ignore_eos: true } }) });
      expect(res.status).toBe(200);
      await res.text();
    }
  }
  await waitUntil(() => hub.hub.rows().filter((r) => r.kind === 'request').length === 6, 15_000, 'the hub to hold every request row');
}, 60_000);

afterAll(async () => {
  await hub?.close();
  for (const r of routers) await r.close();
  await worker?.close();
});

async function ids(query: string): Promise<string[]> {
  const res = await fetch(`${hub.url}/traces?kind=request&${query}`);
  expect(res.status).toBe(200);
  return (await res.text()).split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { request_id: string }).request_id).sort();
}

describe("the hub's /traces", () => {
  it('request_prefix matches the ids the clients sent, on every router', async () => {
    expect(await ids('request_prefix=alpha')).toEqual(['r0/alpha-1', 'r0/alpha-2', 'r1/alpha-3']);
    // Not every row: `r` is a prefix of the hub's names, not of these clients' ids but one.
    expect(await ids('request_prefix=r')).toEqual(['r1/rho-1']);
  });

  it("the hub's own names still match (the dashboard searches them), and only past a whole router label", async () => {
    expect(await ids('request_prefix=r0/al')).toEqual(['r0/alpha-1', 'r0/alpha-2']);
    expect(await ids('request_prefix=r1/')).toEqual(['r1/alpha-3', 'r1/beta-1', 'r1/rho-1']);
    expect(await ids('request_prefix=r0')).toEqual([]);
  });

  it('request matches a client id on every router that has it, or one hub name', async () => {
    expect(await ids('request=beta-1')).toEqual(['r0/beta-1', 'r1/beta-1']);
    expect(await ids('request=r1/beta-1')).toEqual(['r1/beta-1']);
  });

  it('router keeps one router\'s rows, with the other filters; an unknown router is refused with the known ones', async () => {
    expect(await ids('router=r1&request_prefix=alpha')).toEqual(['r1/alpha-3']);
    expect(await ids('router=r0&request=beta-1')).toEqual(['r0/beta-1']);
    const bad = await fetch(`${hub.url}/traces?router=r9`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toBe("unknown router 'r9' (the hub's routers: r0, r1)");
    // A router's own /traces has no such filter: it refuses it.
    expect((await fetch(`${routers[0]!.url}/traces?router=r0`)).status).toBe(400);
  });
});
