// SGLang's test_cache_tokens (test/registered/core/test_srt_endpoint.py,
// TestSRTEndpoint.test_cache_tokens), ported to `baton router` over two simulated SGLang workers
// with no --policy flag: the default policy is cache_aware, as in the SGLang model gateway
// (sgl-model-gateway/src/main.rs, CliArgs.policy), so requests that share a prefix meet where it
// is cached and the cached_tokens a client reads are one worker's, as against one SGLang server.
// The upstream test aligns its figures down to the server's page_size (from /server_info); it runs
// here at SGLang's default page size (1) and at 16. Real router and worker processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from './harness/procs.ts';

describe.each([1, 16])('test_cache_tokens through baton router, two workers, page size %i', (pageSize) => {
  let cluster: SimCluster;
  let router: RouterProc;
  beforeAll(async () => {
    cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 0, pageSize });
    // No --policy: the default.
    router = await spawnRouter(cluster.workers().flatMap((w) => ['--worker', w.url]));
  }, 60_000);
  afterAll(async () => {
    await router?.stop();
    await cluster?.stop();
  });

  it('after /flush_cache: cached_tokens 0, 100, 9999, 999, 10000 (aligned down to the page size)', async () => {
    expect(router.output.join('\n')).toMatch(/policy cache_aware/);
    for (let i = 0; i < 2; i++) expect((await fetch(`${router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
    const info = (await (await fetch(`${router.url}/server_info`)).json()) as { page_size?: number | null };
    const page = info.page_size || 1;
    expect(page).toBe(pageSize);
    const alignDown = (n: number) => Math.floor(n / page) * page;
    const cached = async (n: number) => {
      const r = await fetch(`${router.url}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input_ids: Array.from({ length: n }, (_, i) => i), sampling_params: { max_new_tokens: 1 } }),
      });
      expect(r.status).toBe(200);
      return ((await r.json()) as { meta_info: { cached_tokens: number } }).meta_info.cached_tokens;
    };
    const got = [await cached(100), await cached(10_000), await cached(10_000), await cached(1000), await cached(11_000)];
    expect(got, `cached_tokens ${JSON.stringify(got)}`).toEqual([0, alignDown(100), alignDown(9999), alignDown(999), alignDown(10_000)]);
  }, 60_000);
});
