// cache_aware through a real router over simulated workers (in-process, loopback): requests that
// share a prefix meet where it is cached, and the trace row says why; the workers' own load is
// read as SGLang and vLLM serve it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Pool } from 'undici';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startVllmWorker } from '../../sim/vllm/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { readLoad } from '../../router/pool/load.ts';
import type { AttemptRow } from '../../router/trace/row.ts';

const seq = (from: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((from + i) % 30_000));

describe('cache_aware through the router', () => {
  let workers: SimWorker[] = [];
  let router: RouterHandle;
  beforeAll(async () => {
    workers = await Promise.all([0, 1, 2].map(() => startWorker({ tokenIntervalMs: 0, prefillUsPerToken: 1, pageSize: 4 })));
    router = await startRouter({ port: 0, workers: workers.map((w) => w.url), policy: 'cache_aware', healthIntervalMs: 0, loadIntervalMs: 0 });
  });
  afterAll(async () => {
    await router?.close();
    await Promise.all(workers.map((w) => w.close()));
  });

  const generate = async (rid: string, ids: number[]) => {
    const r = await fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid, input_ids: ids, sampling_params: { max_new_tokens: 4, ignore_eos: true } }) });
    expect(r.status, await r.clone().text()).toBe(200);
    return (await r.json()) as { meta_info: { cached_tokens: number } };
  };
  const row = (rid: string) => router.traceRows({ request: rid, kind: 'attempt' }).find((r): r is AttemptRow => r.kind === 'attempt')!;

  it('sends a conversation turn where its prefix is cached, at the page size the worker advertises', async () => {
    const system = seq(0, 301);
    await generate('turn-1', [...system, ...seq(5000, 20)]);
    const first = row('turn-1');
    expect(first.placement_reason).toMatch(/^below_threshold 0\/321$/);
    const second = await generate('turn-2', [...system, ...seq(5000, 20), ...seq(9000, 30)]);
    const r2 = row('turn-2');
    expect(r2.worker).toBe(first.worker);
    // 321 tokens sent before, 80 whole pages of 4 = 320 held; the worker reports the same.
    expect(r2.placement_prefix).toBe(320);
    expect(r2.placement_reason).toBe('cache_hit 320/351');
    expect(second.meta_info.cached_tokens).toBe(320);
    expect(r2.cached_tokens).toBe(320);
    // The worker card's hit rate: cached / prompt tokens over its attempts.
    const info = router.workers().find((w) => w.url === first.worker)!;
    expect(info.hit_rate).toBeCloseTo(320 / (321 + 351), 5);
  });

  it('forgets what it sent once /flush_cache emptied the workers', async () => {
    const prompt = seq(20_000, 64);
    await generate('before-flush', prompt);
    expect((await fetch(`${router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
    await generate('after-flush', prompt);
    expect(row('after-flush').placement_reason).toBe('below_threshold 0/64');
    expect(row('after-flush').cached_tokens).toBe(0);
  });
});

describe("the workers' own load", () => {
  it("reads SGLang's /get_load and vLLM's /metrics of a worker with a request running", async () => {
    const sglang = await startWorker({ tokenIntervalMs: 20 });
    const vllm = await startVllmWorker({ tokenIntervalMs: 20 });
    const pools = [new Pool(sglang.url), new Pool(vllm.url)];
    try {
      expect(await readLoad(pools[0]!, 'sglang', 2000)).toBe(0);
      expect(await readLoad(pools[1]!, 'vllm', 2000)).toBe(0);
      const ac = new AbortController();
      const running = [
        fetch(`${sglang.url}/generate`, { method: 'POST', signal: ac.signal, body: JSON.stringify({ input_ids: [5, 6, 7], stream: true, sampling_params: { max_new_tokens: 200, ignore_eos: true } }) }),
        fetch(`${vllm.url}/inference/v1/generate`, { method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_ids: [5, 6, 7], stream: true, sampling_params: { max_tokens: 200, ignore_eos: true } }) }),
      ];
      const responses = await Promise.all(running);
      expect(responses.map((r) => r.status)).toEqual([200, 200]);
      expect(await readLoad(pools[0]!, 'sglang', 2000)).toBe(1);
      expect(await readLoad(pools[1]!, 'vllm', 2000)).toBe(1);
      ac.abort();
      await Promise.all(responses.map((r) => r.body?.cancel().catch(() => undefined)));
    } finally {
      await Promise.all(pools.map((p) => p.close()));
      await Promise.all([sglang.close(), vllm.close()]);
    }
  });
});
