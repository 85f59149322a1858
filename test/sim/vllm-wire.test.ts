// The simulated vLLM worker's wire (in-process): POST /inference/v1/generate unary and streamed,
// token-id deltas, usage per stream_options, logprobs in both shapes, vLLM's three kinds of
// refusal, abort_requests, and the info endpoints. docs/simulator.md cites vLLM's source for each.

import { afterEach, describe, expect, it } from 'vitest';
import { weightsSalt } from '../../sim/model.ts';
import { vllmReference } from '../../sim/vllm/reference.ts';
import { startVllmWorker, type VllmWorkerOptions } from '../../sim/vllm/worker.ts';
import type { SimWorker } from '../../sim/worker.ts';
import { eventually, getJson, openSse, postJson, type SseStream } from './helpers.ts';

const GEN = '/inference/v1/generate';
const PROMPT = [5, 10, 15, 20];

const started: SimWorker[] = [];
async function worker(opts: VllmWorkerOptions = {}): Promise<SimWorker> {
  const w = await startVllmWorker({ prefillUsPerToken: 0, ...opts });
  started.push(w);
  return w;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.close()));
});

type Choice = { index: number; finish_reason: string | null; token_ids: number[]; weight_versions: unknown; logprobs: { content: unknown[] } | null };
type Chunk = { request_id: string; usage: Record<string, unknown> | null; output_mode?: string; choices: Choice[]; prompt_token_ids?: number[] };

const chunksOf = (s: SseStream) => s.chunks() as unknown as Chunk[];

async function streamed(url: string, body: Record<string, unknown>): Promise<{ s: SseStream; chunks: Chunk[] }> {
  const s = await openSse(url + GEN, { ...body, stream: true });
  const end = await s.ended;
  expect(end.sawDone).toBe(true);
  expect(s.frames.at(-1)!.data).toBe('[DONE]');
  return { s, chunks: chunksOf(s) };
}

describe('unary generate', () => {
  it('answers the whole GenerateTokensResponse once finished, in pydantic field order, equal to the reference', async () => {
    const w = await worker();
    const sp = { max_tokens: 12, temperature: 0, logprobs: 3 };
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: sp, request_id: 'u1' });
    expect(r.status).toBe(200);
    const body = r.body as Record<string, unknown>;
    expect(Object.keys(body)).toEqual([
      'request_id', 'model', 'created', 'usage', 'prompt_logprobs', 'prompt_token_id_logprobs', 'prompt_token_ids', 'mm_placeholders', 'metrics',
      'kv_transfer_params', 'ec_transfer_params', 'output_mode', 'choices',
    ]);
    expect(body.request_id).toBe('generate-tokens-u1');
    expect(body.model).toBe('baton-sim');
    expect(body.output_mode).toBe('tokens');
    const ref = vllmReference(PROMPT, sp);
    const choice = (body.choices as Record<string, unknown>[])[0]!;
    expect(Object.keys(choice)).toEqual(['index', 'finish_reason', 'token_ids', 'routed_experts', 'sampling_mask', 'weight_versions', 'logprobs']);
    expect(choice.token_ids).toEqual(ref.token_ids);
    expect(choice.finish_reason).toBe(ref.finish_reason);
    expect((choice.logprobs as { content: unknown[] }).content).toEqual(ref.logprobs);
    expect(choice.weight_versions).toEqual([{ version: 'default', start: 0, end: ref.token_ids.length }]);
    expect(body.usage).toEqual({ ...ref.usage, prompt_tokens_details: null, completion_tokens_details: null });
    expect(Object.keys(body.usage as object)).toEqual(['prompt_tokens', 'total_tokens', 'completion_tokens', 'prompt_tokens_details', 'completion_tokens_details']);
  });

  it('X-Request-Id overrides the body request_id; return_token_ids echoes the prompt', async () => {
    const w = await worker();
    const res = await fetch(w.url + GEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'hdr' },
      body: JSON.stringify({ token_ids: PROMPT, request_id: 'body', return_token_ids: true, sampling_params: { max_tokens: 2 } }),
    });
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.request_id).toBe('generate-tokens-hdr');
    expect(body.prompt_token_ids).toEqual(PROMPT);
    expect(w.stats().rids).toEqual(['generate-tokens-hdr']);
  });

  it('max_tokens: absent means up to max_model_len; explicit null likewise; a budget past the context is capped (length)', async () => {
    const w = await worker({ maxModelLen: 40, eosEvery: 0 });
    for (const sp of [{}, { max_tokens: null }, { max_tokens: 1000 }]) {
      const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { temperature: 0, ...sp } });
      const c = (r.body as Chunk).choices[0]!;
      expect(c.token_ids).toHaveLength(36);
      expect(c.finish_reason).toBe('length');
    }
    // The dataclass default 16 still bounds min_tokens when the key is absent (SamplingParams.__post_init__).
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { min_tokens: 20 } });
    expect(r.status).toBe(400);
    expect(r.text).toContain('min_tokens must be less than or equal to max_tokens=16, got 20.');
  });

  it('prompt_logprobs: null first, then the prompt token and the top k per position, keyed by id', async () => {
    const w = await worker();
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 2, prompt_logprobs: 2 } });
    const pl = (r.body as { prompt_logprobs: (Record<string, { logprob: number; rank: number; decoded_token: null }> | null)[] }).prompt_logprobs;
    expect(pl).toHaveLength(PROMPT.length);
    expect(pl[0]).toBeNull();
    for (let j = 1; j < PROMPT.length; j++) {
      const keys = Object.keys(pl[j]!);
      expect(keys[0]).toBe(String(PROMPT[j]));
      expect(keys.length).toBeGreaterThanOrEqual(2);
      expect(keys.length).toBeLessThanOrEqual(3);
      for (const v of Object.values(pl[j]!)) expect(v.decoded_token).toBeNull();
    }
  });
});

describe('stream', () => {
  it('sends token-id deltas, finish_reason null until the terminal chunk, weight_versions only there, then [DONE]', async () => {
    const w = await worker();
    const sp = { max_tokens: 10, temperature: 0.8, seed: 7, logprobs: 2 };
    const { chunks } = await streamed(w.url, { token_ids: PROMPT, sampling_params: sp, request_id: 's1' });
    const ref = vllmReference(PROMPT, sp);
    expect(chunks).toHaveLength(ref.token_ids.length);
    expect(chunks.flatMap((c) => c.choices[0]!.token_ids)).toEqual(ref.token_ids);
    expect(chunks.flatMap((c) => c.choices[0]!.logprobs!.content)).toEqual(ref.logprobs);
    for (const c of chunks.slice(0, -1)) {
      expect(c.choices[0]!.finish_reason).toBeNull();
      expect(c.choices[0]!.weight_versions).toBeNull();
      expect(c.usage).toBeNull();
    }
    const last = chunks.at(-1)!;
    expect(last.choices[0]!.finish_reason).toBe(ref.finish_reason);
    expect(last.choices[0]!.weight_versions).toEqual([{ version: 'default', start: 0, end: ref.token_ids.length }]);
    expect(Object.keys(last)).toEqual(['request_id', 'usage', 'output_mode', 'choices']);
    expect(last.request_id).toBe('generate-tokens-s1');
  });

  it('usage follows stream_options: none, include_usage (a final choices:[] chunk), continuous_usage_stats (every chunk)', async () => {
    const w = await worker();
    const base = { token_ids: PROMPT, sampling_params: { max_tokens: 5, temperature: 0, ignore_eos: true } };
    const none = (await streamed(w.url, base)).chunks;
    expect(none.every((c) => c.usage === null && c.choices.length === 1)).toBe(true);
    const final = (await streamed(w.url, { ...base, stream_options: { include_usage: true } })).chunks;
    expect(final).toHaveLength(6);
    expect(final.at(-1)).toEqual({ request_id: final[0]!.request_id, usage: { prompt_tokens: 4, total_tokens: 9, completion_tokens: 5 }, output_mode: 'tokens', choices: [] });
    const continuous = (await streamed(w.url, { ...base, stream_options: { include_usage: true, continuous_usage_stats: true } })).chunks;
    continuous.slice(0, 5).forEach((c, i) => expect(c.usage).toEqual({ prompt_tokens: 4, total_tokens: 5 + i, completion_tokens: i + 1, prompt_tokens_details: null, completion_tokens_details: null }));
    // continuous_usage_stats alone does nothing (should_include_usage).
    const alone = (await streamed(w.url, { ...base, stream_options: { continuous_usage_stats: true } })).chunks;
    expect(alone.every((c) => c.usage === null)).toBe(true);
  });

  it('return_token_ids puts prompt_token_ids (and mm_placeholders) on the first chunk only', async () => {
    const w = await worker();
    const { chunks } = await streamed(w.url, { token_ids: PROMPT, return_token_ids: true, sampling_params: { max_tokens: 3, ignore_eos: true } });
    expect(chunks[0]!.prompt_token_ids).toEqual(PROMPT);
    expect(chunks.slice(1).every((c) => !('prompt_token_ids' in c))).toBe(true);
  });

  it('--enable-prompt-tokens-details adds cached_tokens to the final usage; a repeated prompt hits whole 16-token blocks', async () => {
    const w = await worker({ enablePromptTokensDetails: true });
    const prompt = Array.from({ length: 40 }, (_, i) => 100 + i);
    const body = { token_ids: prompt, stream_options: { include_usage: true }, sampling_params: { max_tokens: 2 } };
    const first = (await streamed(w.url, body)).chunks.at(-1)!;
    expect(first.usage).toEqual({ prompt_tokens: 40, total_tokens: 42, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } });
    const second = (await streamed(w.url, body)).chunks.at(-1)!;
    expect((second.usage!.prompt_tokens_details as { cached_tokens: number }).cached_tokens).toBe(32);
    // A different cache_salt never hits.
    const salted = (await streamed(w.url, { ...body, cache_salt: 'tenant-b' })).chunks.at(-1)!;
    expect((salted.usage!.prompt_tokens_details as { cached_tokens: number }).cached_tokens).toBe(0);
  });
});

describe('logprobs', () => {
  it('the newest shape: sampled token first in top_logprobs, then the rest by rank, max(k, 1) entries', async () => {
    const w = await worker();
    for (const k of [0, 1, 4]) {
      const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 6, temperature: 1.0, seed: 3, logprobs: k } });
      const content = (r.body as Chunk).choices[0]!.logprobs!.content as { token_id: number; logprob: number; rank: number; top_logprobs: { token_id: number; rank: number }[] }[];
      for (const e of content) {
        expect(e.top_logprobs).toHaveLength(Math.max(k, 1));
        expect(e.top_logprobs[0]!.token_id).toBe(e.token_id);
        expect(e.top_logprobs[0]!.rank).toBe(e.rank);
        const ranks = e.top_logprobs.slice(1).map((t) => t.rank);
        expect([...ranks].sort((a, b) => a - b)).toEqual(ranks);
      }
    }
  });

  it('--legacy-logprobs: the older ChatCompletionLogProbs shape with token_id:N placeholders', async () => {
    const w = await worker({ legacyLogprobs: true });
    const sp = { max_tokens: 4, temperature: 0, logprobs: 2 };
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: sp });
    const content = (r.body as Chunk).choices[0]!.logprobs!.content;
    expect(content).toEqual(vllmReference(PROMPT, sp, { legacyLogprobs: true }).logprobs);
    expect(content[0]).toMatchObject({ token: expect.stringMatching(/^token_id:\d+$/), bytes: null });
    expect(Object.keys(content[0] as object)).toEqual(['token', 'logprob', 'bytes', 'top_logprobs']);
  });

  it('reports raw logprobs: logit_bias and allowed_token_ids shape the draw, not the reported values', async () => {
    const w = await worker();
    const allowed = [300, 301, 302];
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 8, temperature: 0, logprobs: 1, allowed_token_ids: allowed } });
    const c = (r.body as Chunk).choices[0]!;
    expect(c.token_ids.every((t) => allowed.includes(t))).toBe(true);
    const content = c.logprobs!.content as { rank: number; logprob: number }[];
    expect(content.every((e) => e.rank > 1 && e.logprob < -5)).toBe(true);
    const biased = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 3, temperature: 0, logit_bias: { '777': 100 } } });
    expect((biased.body as Chunk).choices[0]!.token_ids).toEqual([777, 777, 777]);
  });
});

describe('decoding rules', () => {
  it('temperature 0 and top_k 1 are greedy; a seed makes sampling a pure function of context and seed', async () => {
    const w = await worker();
    const ids = async (sp: Record<string, unknown>) => ((await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 20, ignore_eos: true, ...sp } })).body as Chunk).choices[0]!.token_ids;
    const greedy = await ids({ temperature: 0 });
    expect(await ids({ top_k: 1 })).toEqual(greedy);
    expect(await ids({ temperature: 1e-6 })).not.toEqual(undefined); // raised to 1e-2: sampling, but near-greedy
    expect(await ids({ seed: 11 })).toEqual(await ids({ seed: 11 }));
    expect(await ids({ seed: 11 })).toEqual(vllmReference(PROMPT, { max_tokens: 20, ignore_eos: true, seed: 11 }).token_ids);
  });

  it('min_tokens blocks EOS and stop ids; a stop token drawn as the last of the budget finishes with "stop"', async () => {
    const w = await worker({ eosEvery: 2 });
    const free = vllmReference(PROMPT, { max_tokens: 30, temperature: 0 }, { model: { vocabSize: 32000, eosTokenId: 2, eosEvery: 2 } });
    expect(free.finish_reason).toBe('stop');
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 30, min_tokens: 10, temperature: 0 } });
    const c = (r.body as Chunk).choices[0]!;
    expect(c.token_ids.length).toBeGreaterThanOrEqual(10);
    expect(c.token_ids.slice(0, 9)).not.toContain(2);
    // check_stop looks at stop ids before the budget.
    const w2 = await worker({ eosEvery: 0 });
    const run = vllmReference(PROMPT, { max_tokens: 6, temperature: 0 }, { model: { vocabSize: 32000, eosTokenId: 2, eosEvery: 0 } });
    const lastToken = run.token_ids[5]!;
    expect(run.token_ids.slice(0, 5)).not.toContain(lastToken);
    const stopped = await postJson(w2.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 6, temperature: 0, stop_token_ids: [lastToken] } });
    expect((stopped.body as Chunk).choices[0]).toMatchObject({ finish_reason: 'stop', token_ids: run.token_ids });
  });

  it('n > 1: one choice per index, streamed as separate chunks; usage counts them all', async () => {
    const w = await worker();
    const { chunks } = await streamed(w.url, { token_ids: PROMPT, stream_options: { include_usage: true }, sampling_params: { n: 2, max_tokens: 4, seed: 5, ignore_eos: true } });
    const byIndex = [0, 1].map((i) => chunks.filter((c) => c.choices[0]?.index === i).flatMap((c) => c.choices[0]!.token_ids));
    expect(byIndex[0]).toEqual(vllmReference(PROMPT, { max_tokens: 4, seed: 5, ignore_eos: true }).token_ids);
    expect(byIndex[1]).toEqual(vllmReference(PROMPT, { max_tokens: 4, seed: 5, ignore_eos: true }, { choice: 1 }).token_ids);
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 4, total_tokens: 12, completion_tokens: 8 });
  });
});

describe('refusals', () => {
  it('body schema errors: 400 {"error":{message,type:"Bad Request",param,code}} before any stream', async () => {
    const w = await worker();
    const cases: [Record<string, unknown>, string | null, string][] = [
      [{ sampling_params: {} }, 'body.token_ids', "'type': 'missing'"],
      [{ token_ids: [1, -2], sampling_params: {} }, 'body.token_ids', 'token_ids must not contain negative values'],
      [{ token_ids: [1] }, 'body.sampling_params', "'type': 'missing'"],
      [{ token_ids: [1], sampling_params: { temperature: 3 } }, 'temperature', 'temperature must be in [0, 2], got 3.0.'],
      [{ token_ids: [1], sampling_params: { top_k: -2 } }, 'body.sampling_params', 'top_k must be 0 (disable), or at least 1, got -2.'],
      [{ token_ids: [1], sampling_params: { presence_penalty: 3 } }, 'body.sampling_params', 'presence_penalty must be in [-2, 2], got 3.0.'],
      [{ token_ids: [1], sampling_params: { n: 2, temperature: 0 } }, 'body.sampling_params', 'n must be 1 when using greedy sampling, got 2.'],
      [{ token_ids: [1], sampling_params: {}, output_mode: 'words' }, 'body.output_mode', "Input should be 'tokens' or 'text'"],
      [{ token_ids: [1], sampling_params: {}, cache_salt: '' }, 'body.cache_salt', 'String should have at least 1 character'],
      [{ token_ids: [1], sampling_params: { structured_outputs: { regex: 'a', json: {} } } }, 'body.sampling_params', 'You can only use one kind of structured outputs constraint'],
    ];
    for (const [body, param, text] of cases) {
      for (const stream of [false, true]) {
        const r = await postJson(w.url + GEN, { ...body, stream });
        expect(r.status, JSON.stringify(body)).toBe(400);
        const err = (r.body as { error: { message: string; type: string; param: string | null; code: number } }).error;
        expect(err.type).toBe('Bad Request');
        expect(err.code).toBe(400);
        expect(err.param).toBe(param);
        expect(err.message).toMatch(/^1 validation error:\n {2}/);
        expect(err.message).toContain(text);
      }
    }
    const media = await fetch(w.url + GEN, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
    expect(media.status).toBe(400);
    expect(await media.json()).toEqual({ error: { message: "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed", type: 'Bad Request', param: null, code: 400 } });
  });

  it('serve_tokens refusals: 400/404 BadRequestError / NotFoundError before any stream', async () => {
    const w = await worker();
    const stop = await postJson(w.url + GEN, { token_ids: [1], stream: true, sampling_params: { stop: ['x'] } });
    expect(stop.status).toBe(400);
    expect((stop.body as { error: { type: string; message: string } }).error).toMatchObject({ type: 'BadRequestError', message: expect.stringContaining('--tokens-only') });
    const text = await postJson(w.url + GEN, { token_ids: [1], output_mode: 'text', sampling_params: {} });
    expect(text.status).toBe(400);
    expect(text.text).toContain("output_mode='text' requires a tokenizer");
    const model = await postJson(w.url + GEN, { token_ids: [1], model: 'other', sampling_params: {} });
    expect(model.status).toBe(404);
    expect(model.body).toEqual({ error: { message: 'The model `other` does not exist.', type: 'NotFoundError', param: 'model', code: 404 } });
  });

  it('engine refusals: a stream gets 200, one in-band error frame (json.dumps spacing) and [DONE]; unary gets 400', async () => {
    const w = await worker();
    const cases: [Record<string, unknown>, string, string | null][] = [
      [{ token_ids: [1, 40000], sampling_params: {} }, 'Token id 40000 is out of vocabulary', null],
      [{ token_ids: [1], sampling_params: { logprobs: 21 } }, 'Requested sample logprobs of 21, which is greater than max allowed: 20', 'logprobs'],
      [{ token_ids: [1], sampling_params: { logit_bias: { '32000': 1 } } }, 'token_id(s) [32000] in logit_bias contain out-of-vocab token ids. Vocabulary size: 32000', 'logit_bias'],
      [{ token_ids: [1], sampling_params: { allowed_token_ids: [] } }, 'allowed_token_ids is not None and empty!', 'allowed_token_ids'],
      [{ token_ids: [1], sampling_params: { structured_outputs: { regex: 'a+' } } }, "Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'", null],
      [{ token_ids: [1], priority: 3, sampling_params: {} }, 'Got priority 3 but Priority scheduling is not enabled.', null],
    ];
    for (const [body, message, param] of cases) {
      const s = await openSse(w.url + GEN, { ...body, stream: true });
      await s.ended;
      expect(s.status).toBe(200);
      expect(s.frames.map((f) => f.data)).toEqual([`{"error": {"message": ${JSON.stringify(message)}, "type": "BadRequestError", "param": ${param === null ? 'null' : JSON.stringify(param)}, "code": 400}}`, '[DONE]']);
      const u = await postJson(w.url + GEN, body);
      expect(u.status).toBe(400);
      expect(u.body).toEqual({ error: { message, type: 'BadRequestError', param, code: 400 } });
    }
    const long = await postJson(w.url + GEN, { token_ids: Array.from({ length: 32768 }, () => 7), sampling_params: {} });
    expect(long.text).toContain('plus the number of requested output tokens (at least 1) is longer than the maximum model length of 32768');
  });
});

describe('abort_requests', () => {
  it('takes the engine id (generate-tokens-<id>): empty 200, then a terminal chunk with finish_reason "abort" and weight_versions', async () => {
    const w = await worker({ tokenIntervalMs: 5 });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, request_id: 'ab', sampling_params: { max_tokens: 5000, ignore_eos: true } });
    await s.waitFrames(3);
    // The bare id is not the engine's id: nothing happens.
    const bare = await postJson(w.url + '/inference/v1/abort_requests', { request_ids: ['ab'] });
    expect(bare.status).toBe(200);
    expect(bare.text).toBe('');
    await s.waitFrames(s.frames.length + 2);
    expect(s.isEnded()).toBe(false);
    expect((await postJson(w.url + '/abort_requests', { request_ids: ['generate-tokens-ab'] })).status).toBe(200);
    expect((await s.ended).sawDone).toBe(true);
    const chunks = chunksOf(s);
    const last = chunks.at(-1)!.choices[0]!;
    expect(last.finish_reason).toBe('abort');
    expect(last.token_ids).toEqual([]);
    const n = chunks.flatMap((c) => c.choices[0]!.token_ids).length;
    expect(last.weight_versions).toEqual([{ version: 'default', start: 0, end: n }]);
    expect(w.stats().requestsAborted).toBe(1);
  });

  it('a unary request aborted answers 200 with what it had and finish_reason "abort"; missing request_ids is a 400', async () => {
    const w = await worker({ tokenIntervalMs: 5 });
    const pending = postJson(w.url + GEN, { token_ids: PROMPT, request_id: 'u', sampling_params: { max_tokens: 5000, ignore_eos: true } });
    await eventually(() => (w.stats().tokensGenerated >= 3 ? true : undefined));
    await postJson(w.url + '/inference/v1/abort_requests', { request_ids: 'generate-tokens-u' });
    const r = await pending;
    expect(r.status).toBe(200);
    const c = (r.body as Chunk).choices[0]!;
    expect(c.finish_reason).toBe('abort');
    expect(c.token_ids.length).toBeGreaterThanOrEqual(3);
    const missing = await postJson(w.url + '/inference/v1/abort_requests', {});
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: { message: "Missing 'request_ids' in request body", type: 'Bad Request', param: null, code: 400 } });
  });

  it('--legacy-generate: an abort with no new tokens sends no terminal chunk (older servers skip it), and no output_mode', async () => {
    const w = await worker({ tokenIntervalMs: 5, legacyGenerate: true });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, request_id: 'lg', sampling_params: { max_tokens: 5000, ignore_eos: true } });
    await s.waitFrames(2);
    await postJson(w.url + '/abort_requests', { request_ids: ['generate-tokens-lg'] });
    expect((await s.ended).sawDone).toBe(true);
    const chunks = chunksOf(s);
    expect(chunks.every((c) => c.choices[0]!.finish_reason === null && c.choices[0]!.token_ids.length === 1)).toBe(true);
    expect(Object.keys(chunks[0]!)).toEqual(['request_id', 'choices', 'usage']);
  });
});

describe('abort routes by version and flags (api_router.py attach_router)', () => {
  const status = async (url: string, path: string, method: string) => (await fetch(url + path, { method, ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{"request_ids":["generate-tokens-none"]}' } : {}) })).status;

  it('current: both paths; a GET is 405 (POST-only routes), which is how the router probes them', async () => {
    const w = await worker();
    for (const path of ['/inference/v1/abort_requests', '/abort_requests']) {
      expect(await status(w.url, path, 'GET'), path).toBe(405);
      expect(await status(w.url, path, 'POST'), path).toBe(200);
    }
  });

  it('--legacy-abort (and --legacy-generate): /abort_requests only; --enable-scale-out: no /abort_requests; both: none', async () => {
    for (const [opts, served] of [
      [{ legacyAbort: true }, ['/abort_requests']],
      [{ legacyGenerate: true }, ['/abort_requests']],
      [{ enableScaleOut: true }, ['/inference/v1/abort_requests']],
      [{ legacyAbort: true, enableScaleOut: true }, []],
    ] as const) {
      const w = await worker(opts);
      for (const path of ['/inference/v1/abort_requests', '/abort_requests']) {
        const want = (served as readonly string[]).includes(path);
        expect(await status(w.url, path, 'GET'), `${JSON.stringify(opts)} GET ${path}`).toBe(want ? 405 : 404);
        expect(await status(w.url, path, 'POST'), `${JSON.stringify(opts)} POST ${path}`).toBe(want ? 200 : 404);
      }
    }
  });

  it('--legacy-abort: /abort_requests stops a running request with the abort finish', async () => {
    const w = await worker({ tokenIntervalMs: 5, legacyAbort: true });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, request_id: 'la', sampling_params: { max_tokens: 5000, ignore_eos: true } });
    await s.waitFrames(2);
    expect((await postJson(w.url + '/inference/v1/abort_requests', { request_ids: ['generate-tokens-la'] })).status).toBe(404);
    expect((await postJson(w.url + '/abort_requests', { request_ids: ['generate-tokens-la'] })).status).toBe(200);
    expect((await s.ended).sawDone).toBe(true);
    expect(chunksOf(s).at(-1)!.choices[0]!.finish_reason).toBe('abort');
    expect(w.stats()).toMatchObject({ requestsAborted: 1, inFlight: 0 });
  });

  it('--legacy-generate with --enable-prompt-tokens-details: no prompt_tokens_details for 0 cached tokens (`and num_cached_tokens:`)', async () => {
    const w = await worker({ legacyGenerate: true, enablePromptTokensDetails: true });
    const prompt = Array.from({ length: 40 }, (_, i) => 300 + i);
    const body = { token_ids: prompt, stream_options: { include_usage: true }, sampling_params: { max_tokens: 2 } };
    expect((await streamed(w.url, body)).chunks.at(-1)!.usage).toEqual({ prompt_tokens: 40, total_tokens: 42, completion_tokens: 2 });
    expect((await streamed(w.url, body)).chunks.at(-1)!.usage).toEqual({ prompt_tokens: 40, total_tokens: 42, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 32 } });
    const unary = await postJson(w.url + GEN, { token_ids: prompt, sampling_params: { max_tokens: 2 } });
    expect((unary.body as { usage: unknown }).usage).toEqual({ prompt_tokens: 40, total_tokens: 42, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 32 } });
  });
});

describe('faults', () => {
  it('abort: running requests end with finish_reason "abort" (as /pause?mode=abort)', async () => {
    const w = await worker();
    w.fault({ kind: 'abort', afterTokens: 4 });
    const { chunks } = await streamed(w.url, { token_ids: PROMPT, sampling_params: { max_tokens: 50, ignore_eos: true } });
    expect(chunks.at(-1)!.choices[0]).toMatchObject({ finish_reason: 'abort', token_ids: [] });
    expect(chunks.flatMap((c) => c.choices[0]!.token_ids)).toHaveLength(4);
  });

  it('error: a stream gets the in-band InternalServerError frame and [DONE] (no usage chunk); unary gets 500', async () => {
    const w = await worker();
    w.fault({ kind: 'error', afterTokens: 3 });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, stream_options: { include_usage: true }, sampling_params: { max_tokens: 50, ignore_eos: true } });
    await s.ended;
    expect(s.frames.map((f) => f.data).slice(-2)).toEqual(['{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}}', '[DONE]']);
    expect(s.frames).toHaveLength(5);
    w.fault({ kind: 'error', afterTokens: 2 });
    const u = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 50, ignore_eos: true } });
    expect(u.status).toBe(500);
    expect(u.body).toEqual({ error: { message: 'Internal server error', type: 'InternalServerError', param: null, code: 500 } });
  });

  it('reject: the engine is dead: /health 503, generate 500 EngineDeadError; clear revives it', async () => {
    const w = await worker();
    w.fault({ kind: 'reject' });
    expect((await fetch(w.url + '/health')).status).toBe(503);
    const r = await postJson(w.url + GEN, { token_ids: PROMPT, stream: true, sampling_params: {} });
    expect(r.status).toBe(500);
    expect((r.body as { error: { type: string } }).error.type).toBe('InternalServerError');
    w.fault({ kind: 'clear' });
    expect((await fetch(w.url + '/health')).status).toBe(200);
  });

  it('crash after N tokens: the client received exactly N, no terminal chunk, no [DONE]', async () => {
    const w = await worker();
    w.fault({ kind: 'crash', afterTokens: 6 });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, sampling_params: { max_tokens: 50, ignore_eos: true } });
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    expect(chunksOf(s).flatMap((c) => c.choices[0]!.token_ids)).toHaveLength(6);
    expect(w.stats().crashed).toBe(true);
  });
});

describe('info endpoints', () => {
  it('/health, /v1/models (owned_by vllm, max_model_len), /load, /version, /weight_info, unknown paths', async () => {
    const w = await worker({ maxModelLen: 4096, tokenIntervalMs: 5 });
    expect((await fetch(w.url + '/health')).status).toBe(200);
    const models = (await getJson(w.url + '/v1/models')).body as { object: string; data: Record<string, unknown>[] };
    expect(models.object).toBe('list');
    expect(models.data[0]).toMatchObject({ id: 'baton-sim', object: 'model', owned_by: 'vllm', root: 'baton-sim', parent: null, max_model_len: 4096 });
    expect((await getJson(w.url + '/load')).body).toEqual({ server_load: 0 });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, sampling_params: { max_tokens: 5000, ignore_eos: true } });
    await s.waitFrames(1);
    expect((await getJson(w.url + '/load')).body).toEqual({ server_load: 1 });
    s.destroy();
    await eventually(async () => (((await getJson(w.url + '/load')).body as { server_load: number }).server_load === 0 ? true : undefined));
    expect((await getJson(w.url + '/weight_info')).body).toEqual({ weight_version: 'default' });
    expect(await getJson(w.url + '/model_info')).toEqual({ status: 404, body: { detail: 'Not Found' } });
    expect(w.stats().clientDisconnects).toBe(1);
  });

  it('/update_weight_version relabels (and, in the simulator, re-weights) the next tokens: two weight_versions spans', async () => {
    const w = await worker({ tokenIntervalMs: 5 });
    const s = await openSse(w.url + GEN, { token_ids: PROMPT, stream: true, sampling_params: { max_tokens: 40, ignore_eos: true, temperature: 0 } });
    await s.waitFrames(5);
    const up = await postJson(w.url + '/update_weight_version', { new_version: 'v2' });
    expect(up.body).toEqual({ success: true, new_version: 'v2' });
    await s.ended;
    const spans = chunksOf(s).at(-1)!.choices[0]!.weight_versions as { version: string; start: number; end: number }[];
    expect(spans).toHaveLength(2);
    expect(spans[0]).toMatchObject({ version: 'default', start: 0 });
    expect(spans[1]).toMatchObject({ version: 'v2', start: spans[0]!.end, end: 40 });
    const after = await postJson(w.url + GEN, { token_ids: PROMPT, sampling_params: { max_tokens: 5, temperature: 0 } });
    expect((after.body as Chunk).choices[0]!.token_ids).toEqual(vllmReference(PROMPT, { max_tokens: 5, temperature: 0 }, { weights: weightsSalt('baton-sim', 'v2') }).token_ids);
  });
});
