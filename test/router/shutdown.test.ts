// Baton's own liveness, readiness and SIGTERM (router/http/lifecycle.ts, cli/router.ts): readiness
// is the router's own (200 with no healthy worker), turns 503 at once on SIGTERM while the
// request in flight finishes, then the process exits 0; with a grace shorter than the request,
// the process exits at the grace. Real processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { spawnRouter, stream, waitUntil, type RouterProc } from './harness/procs.ts';

let cluster: SimCluster;
const routers: RouterProc[] = [];

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 20 });
});

afterAll(async () => {
  await Promise.all(routers.map((r) => r.stop()));
  await cluster?.stop();
});

async function ready(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function exited(r: RouterProc): Promise<{ code: number | null; at: number }> {
  return new Promise((resolve) => r.proc.once('exit', (code) => resolve({ code, at: Date.now() })));
}

describe('SIGTERM', () => {
  it('turns unready at once, lets the stream in flight finish, then exits 0', async () => {
    const r = await spawnRouter(['--worker', cluster.workers()[0]!.url, '--shutdown-grace-ms', '60000', '--health-interval-ms', '200']);
    routers.push(r);
    await waitUntil(async () => (await ready(r.url)).status === 200, 10_000, 'ready');
    expect((await fetch(`${r.url}/livez`)).status).toBe(200);
    const gone = exited(r);
    let termAt = 0;
    let readyDuring: { status: number; body: Record<string, unknown> } | null = null;
    let liveDuring = 0;
    // 100 tokens at 20 ms: ~2 s.
    const answer = await stream(r.url, { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 100, ignore_eos: true } }, async (n) => {
      if (n !== 5) return;
      termAt = Date.now();
      r.proc.kill('SIGTERM');
      await new Promise((res) => setTimeout(res, 100));
      readyDuring = await ready(r.url);
      liveDuring = (await fetch(`${r.url}/livez`)).status;
    });
    const streamEnd = Date.now();
    expect(answer.error).toBeNull();
    expect(answer.done).toBe(true);
    expect((answer.frames.at(-1)!.meta_info as { completion_tokens: number }).completion_tokens).toBe(100);
    expect(readyDuring).toMatchObject({ status: 503, body: { status: 'not_ready', reason: expect.stringMatching(/shutting down/) } });
    expect(liveDuring).toBe(200);
    const { code, at } = await gone;
    expect(code).toBe(0);
    // It waited for the stream, not for the (60 s) grace.
    expect(at).toBeGreaterThanOrEqual(streamEnd - 50);
    expect(at - termAt).toBeLessThan(40_000);
  }, 90_000);

  it('exits at the grace when a request is still in flight', async () => {
    const r = await spawnRouter(['--worker', cluster.workers()[0]!.url, '--shutdown-grace-ms', '300', '--health-interval-ms', '200']);
    routers.push(r);
    await waitUntil(async () => (await ready(r.url)).status === 200, 10_000, 'ready');
    const gone = exited(r);
    let termAt = 0;
    // 400 tokens at 20 ms: ~8 s, far past the grace.
    const answer = await stream(r.url, { input_ids: [4, 5, 6], sampling_params: { max_new_tokens: 400, ignore_eos: true } }, (n) => {
      if (n === 2) {
        termAt = Date.now();
        r.proc.kill('SIGTERM');
      }
    }).catch((err: Error) => ({ status: 0, frames: [], done: false, error: err.message }));
    const { code, at } = await gone;
    expect(code).toBe(0);
    expect(answer.done).toBe(false);
    // Well before the stream's own end (~8 s), which it did not reach.
    expect(at - termAt).toBeLessThan(7_000);
  }, 90_000);
});

describe('readiness', () => {
  let router: RouterHandle;
  afterAll(async () => router?.close());

  it('is about the router, not its workers: 200 with no worker that may take requests (GET /health says that), liveness 200; none needs the api key', async () => {
    router = await startRouter({ port: 0, apiKey: 'k-secret', healthIntervalMs: 0 });
    const r = await fetch(`${router.url}/readyz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: 'ready', healthy_workers: 0, total_workers: 0, in_flight: 0 });
    expect((await fetch(`${router.url}/readiness`)).status).toBe(200);
    // Worker availability has its own answer.
    expect((await fetch(`${router.url}/health`)).status).toBe(503);
    for (const p of ['/livez', '/liveness']) {
      const l = await fetch(`${router.url}${p}`);
      expect(l.status).toBe(200);
      expect(await l.json()).toEqual({ status: 'alive' });
    }
    // The rest of the API still needs the key.
    expect((await fetch(`${router.url}/workers`)).status).toBe(401);
  });
});
