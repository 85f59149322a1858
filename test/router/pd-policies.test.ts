// P/D placement: a policy per side. SGLang decode servers keep no radix cache (server_args.py
// `_handle_pd_disaggregation`: "KV cache is forced as chunk cache for decode server"), so a
// shared prefix says where to prefill, never where to decode. Real processes: the router with
// no --policy over two prefill and three decode simulated SGLang workers; 24 requests share a
// system prompt. The prefill side (cache_aware) keeps them on the prefill server that holds the
// prefix; the decode side (least_inflight) spreads them over the three decode servers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel, type DecodeParams } from '../../sim/model.ts';
import { spawnRouter, traceRows, type RouterProc } from './harness/procs.ts';

let cluster: SimCluster;
let router: RouterProc;

const SYSTEM = Array.from({ length: 240 }, (_, j) => 200 + ((j * 7919) % 20000));
const prompt = (i: number) => [...SYSTEM, ...Array.from({ length: 12 }, (_, j) => 300 + i * 13 + j)];

beforeAll(async () => {
  cluster = await startCluster({ workers: 5, roles: ['prefill', 'prefill', 'decode', 'decode', 'decode'], port: 0, tokenIntervalMs: 5 });
  const ws = cluster.workers();
  router = await spawnRouter([
    '--pd-disaggregation',
    ...ws.filter((w) => w.role === 'prefill').flatMap((w) => ['--prefill', w.url, String(w.bootstrapPort)]),
    ...ws.filter((w) => w.role === 'decode').flatMap((w) => ['--decode', w.url]),
  ]);
}, 60_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

async function generate(rid: string, ids: number[], params: DecodeParams): Promise<void> {
  const res = await fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid, input_ids: ids, sampling_params: params }) });
  const json = (await res.json()) as Record<string, unknown>;
  expect(res.status, `${rid}: ${JSON.stringify(json).slice(0, 300)}`).toBe(200);
  expect(json.output_ids, rid).toEqual(runModel(ids, params).output_ids);
}

describe('P/D with no --policy', () => {
  it('names each side\'s policy at start: cache_aware for prefill, least_inflight for decode', () => {
    expect(router.output.join('')).toMatch(/prefill policy cache_aware, decode policy least_inflight/);
  });

  it('24 requests sharing a system prompt: the prefill side keeps them where the prefix is cached, the decode side spreads them over all three decode servers', async () => {
    const params = { max_new_tokens: 24, ignore_eos: true };
    await generate('pdp-0', prompt(0), params); // the prefix is cached on one prefill server now
    await Promise.all(Array.from({ length: 23 }, (_, k) => generate(`pdp-${k + 1}`, prompt(k + 1), params)));
    const byPrefill = new Map<string, number>();
    const byDecode = new Map<string, number>();
    const reasons: string[] = [];
    for (let i = 0; i < 24; i++) {
      const [row] = await traceRows(router.url, `request=pdp-${i}&kind=attempt`);
      byPrefill.set(row!.prefill_worker as string, (byPrefill.get(row!.prefill_worker as string) ?? 0) + 1);
      byDecode.set(row!.decode_worker as string, (byDecode.get(row!.decode_worker as string) ?? 0) + 1);
      reasons.push(String(row!.placement_reason));
    }
    console.log(`P/D sides, 24 requests with one system prompt: prefill ${[...byPrefill.values()].join('/')}, decode ${[...byDecode.values()].join('/')}`);
    // Decode: every server takes its share (least_inflight: 8/8/8 when they overlap, ties rotate).
    expect(byDecode.size).toBe(3);
    for (const n of byDecode.values()) expect(n).toBeGreaterThanOrEqual(5);
    // Prefill: where the prefix is (cache_aware; the load spread stays under its 64-request bound).
    expect(Math.max(...byPrefill.values())).toBe(24);
    expect(reasons.slice(1).every((r) => r.startsWith('cache_hit')), reasons.join(', ')).toBe(true);
  }, 60_000);
});
