// P/D: a decode killed before its KV came. SGLang's prefill then fails the room with "Decode
// instance could be dead, remote session ... is not alive" (mooncake/conn.py), and which the
// router hears first, that or the decode's own connection reset, is a race: on a loaded machine
// the prefill's came first and the router blamed (and benched) the healthy prefill. Real
// processes; a relay in front of each decode holds the router's connection open for a while
// after its decode died, so the prefill's report always comes first here.
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, traceRows, waitUntil, type RouterProc } from './harness/procs.ts';

/** A TCP relay to `target` that, once `hold` is set, keeps the router's side open that long after the target's side closed, then resets it. */
interface Relay {
  url: string;
  holdMs: number;
  /** Set when a request reaches the decode through this relay. */
  used: boolean;
  server: Server;
}

async function relay(target: string): Promise<Relay> {
  const { hostname, port } = new URL(target);
  const r = { holdMs: 0, used: false } as Relay;
  r.server = createServer((client: Socket) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    client.on('data', (d) => {
      if (d.toString('latin1').startsWith('POST /generate')) r.used = true;
      upstream.write(d);
    });
    upstream.on('data', (d) => client.write(d));
    const closeClient = () => (r.holdMs > 0 ? setTimeout(() => client.resetAndDestroy(), r.holdMs) : client.destroy());
    upstream.on('close', closeClient);
    upstream.on('error', () => undefined);
    client.on('error', () => undefined);
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((res) => r.server.listen(0, '127.0.0.1', () => res()));
  r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
  return r;
}

let cluster: SimCluster;
let router: RouterProc;
const relays: Relay[] = [];

beforeAll(async () => {
  // The prefill takes ~1 s (2000 tokens at 500 µs): the decode is killed while it runs.
  cluster = await startCluster({ workers: 3, roles: ['prefill', 'decode', 'decode'], port: 0, tokenIntervalMs: 5, prefillUsPerToken: 500 });
  const [prefill, ...decodes] = cluster.workers();
  for (const d of decodes) relays.push(await relay(d.url));
  router = await spawnRouter(['--pd-disaggregation', '--prefill', prefill!.url, String(prefill!.bootstrapPort), ...relays.flatMap((r) => ['--decode', r.url]), '--policy', 'round_robin', '--migration-limit', '3']);
}, 120_000);

afterAll(async () => {
  await router?.stop();
  for (const r of relays) await new Promise<void>((res) => r.server.close(() => res()));
  await cluster?.stop();
});

describe('a decode killed before its KV came', () => {
  it('is the decode leg\'s failure even when the prefill reports its dead peer first: the request goes on exact, the prefill is not benched', async () => {
    const ids = Array.from({ length: 2000 }, (_, j) => 100 + ((j * 104729) % 30000));
    const params = { max_new_tokens: 16, ignore_eos: true };
    const answer = fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid: 'pd-peer-1', input_ids: ids, sampling_params: params }) });
    const t0 = Date.now();
    while (!relays.some((r) => r.used) && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 5));
    const victim = relays.findIndex((r) => r.used);
    expect(victim).toBeGreaterThanOrEqual(0);
    // Killed once its pull of the room's KV is open at the prefill (sim/pd.ts pullKv), so that the
    // prefill's transfer fails on the dead peer; the router hears of the death 1 s after it, long
    // after the prefill's report.
    await waitUntil(async () => ((await cluster.stats(1 + victim)).pd?.roomsSeen ?? 0) > 0, 10_000);
    await new Promise((r) => setTimeout(r, 100)); // its pull connects as it admits the room
    relays[victim]!.holdMs = 1000;
    await cluster.kill(1 + victim);
    const res = await answer;
    expect(res.status).toBe(200);
    const json = (await res.json()) as { output_ids: number[] };
    expect(json.output_ids).toEqual(runModel(ids, params).output_ids);

    const rows = (await traceRows(router.url, 'request=pd-peer-1&kind=attempt')).sort((a, b) => (a.attempt as number) - (b.attempt as number));
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows[0]).toMatchObject({ outcome: 'failed', decode_worker: relays[victim]!.url, failed_leg: 'decode' });
    expect(rows[1]).toMatchObject({ decode_worker: relays[1 - victim]!.url });
    const workers = (await (await fetch(`${router.url}/workers`)).json()) as { workers: { url: string; health: string }[] };
    expect(workers.workers.find((w) => w.url === cluster.workers()[0]!.url)?.health).toBe('healthy');
  }, 60_000);
});
