// The simulator against current SGLang's wire details (docs/simulator.md cites the source for
// each): error frames, prefix aborts and the queued-abort shape, duplicate rids, feature flags,
// model info, weight versions (and weights that change the tokens), meta_info extras,
// token_ids_logprob, logit_bias, the default temperature, logprob windows, input precedence and
// the token-only stop messages. In-process workers over real HTTP; one real process for the flags.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster } from '../../sim/cluster.ts';
import { DEFAULT_MODEL, promptLogprobs, runModel, weightsSalt, type DecodeParams } from '../../sim/model.ts';
import { startWorker, type SimWorker, type WorkerOptions } from '../../sim/worker.ts';
import { eventually, getJson, openSse, postJson } from './helpers.ts';

type Json = Record<string, unknown>;
type Meta = Json & { finish_reason: Json | null };
const meta = (x: unknown) => (x as { meta_info: Meta }).meta_info;
const ids = (x: unknown) => (x as { output_ids: number[] }).output_ids;
const errorOf = (x: unknown) => (x as { error: Json }).error;

const PROMPT = [101, 202, 303, 404, 505];
const workers: SimWorker[] = [];
async function worker(opts: WorkerOptions = {}): Promise<SimWorker> {
  const w = await startWorker(opts);
  workers.push(w);
  return w;
}
let w: SimWorker;
let slow: SimWorker;
beforeAll(async () => {
  w = await worker();
  slow = await worker({ tokenIntervalMs: 20 });
});
afterAll(async () => {
  await Promise.all(workers.map((x) => x.close()));
});

const long = (rid: string, extra: Json = {}) => ({ input_ids: PROMPT, rid, stream: true, sampling_params: { max_new_tokens: 20_000, ignore_eos: true }, ...extra });
const abort = (url: string, body: Json) => fetch(`${url}/abort_request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('request errors (ValueError in the generate handler)', () => {
  it("a stream gets 200, one in-band frame {message, type, code 400, retryable false}, then [DONE]", async () => {
    const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { top_p: 0 } });
    expect(s.status).toBe(200);
    expect((await s.ended).sawDone).toBe(true);
    expect(s.frames.map((f) => f.data)).toEqual([
      '{"error":{"message":"top_p must be in (0, 1], got 0.","type":"invalid_request_error","code":400,"retryable":false}}',
      '[DONE]',
    ]);
  });

  it('a unary request gets 400 {"error":{"message"}} only, in both shapes', async () => {
    const legacy = await worker({ legacyErrors: true });
    for (const x of [w, legacy]) {
      const r = await postJson(`${x.url}/generate`, { input_ids: PROMPT, sampling_params: { top_p: 0 } });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: { message: 'top_p must be in (0, 1], got 0.' } });
    }
  });

  it('legacyErrors: the older in-band frame, {"error":{"message"}} only', async () => {
    const legacy = await worker({ legacyErrors: true });
    const s = await openSse(`${legacy.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { top_p: 0 } });
    await s.ended;
    expect(s.frames.map((f) => f.data)).toEqual(['{"error":{"message":"top_p must be in (0, 1], got 0."}}', '[DONE]']);
  });
});

describe('/abort_request', () => {
  it('aborts every request whose rid starts with the given rid, when that rid is in flight', async () => {
    const streams = await Promise.all(['job', 'job-2', 'jobX', 'other'].map((rid) => openSse(`${slow.url}/generate`, long(rid))));
    await Promise.all(streams.map((s) => s.waitFrames(2)));
    // A prefix that is not itself a request in flight aborts nothing (the tokenizer manager drops it).
    expect((await abort(slow.url, { rid: 'jo' })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 100));
    expect(streams.some((s) => s.isEnded())).toBe(false);
    const r = await abort(slow.url, { rid: 'job' });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('');
    for (const s of streams.slice(0, 3)) {
      expect((await s.ended).sawDone).toBe(true);
      expect(meta(s.chunks().at(-1)).finish_reason).toEqual({ type: 'abort', message: 'Aborted', status_code: null, err_type: null });
    }
    expect(streams[3]!.isEnded()).toBe(false);
    streams[3]!.destroy();
  });

  it('a request aborted while queued (before prefill) ends with the queued-abort shape', async () => {
    // 1 s of prefill per uncached prompt token: the request stays queued while we abort it.
    const q = await worker({ prefillUsPerToken: 1_000_000 });
    const s = await openSse(`${q.url}/generate`, { input_ids: PROMPT, rid: 'queued', stream: true, sampling_params: { max_new_tokens: 4 } });
    const unary = postJson(`${q.url}/generate`, { input_ids: PROMPT, rid: 'queued-unary', return_logprob: true, top_logprobs_num: 2, token_ids_logprob: [7], sampling_params: { max_new_tokens: 4 } });
    await eventually(() => (q.stats().inFlight === 2 ? true : undefined));
    await abort(q.url, { rid: 'queued' });
    expect((await s.ended).sawDone).toBe(true);
    const frames = s.frames.map((f) => f.data);
    expect(frames).toHaveLength(2);
    const chunk = JSON.parse(frames[0]!) as Json;
    expect(Object.keys(chunk)).toEqual(['text', 'output_ids', 'meta_info']);
    expect(chunk).toMatchObject({ text: '', output_ids: [] });
    expect(Object.keys(meta(chunk))).toEqual(['id', 'finish_reason', 'weight_version', 'e2e_latency', 'completion_tokens']);
    expect(meta(chunk)).toMatchObject({ id: 'queued', finish_reason: { type: 'abort', message: 'Abort in waiting queue' }, weight_version: 'default', completion_tokens: 0 });
    // The prefix matched the unary request too: it answers 200 with the same shape, logprob lists empty.
    const u = await unary;
    expect(u.status).toBe(200);
    expect(Object.keys(meta(u.body))).toEqual([
      'id', 'finish_reason', 'weight_version', 'e2e_latency', 'input_token_logprobs', 'output_token_logprobs', 'output_token_logprobs_length',
      'input_top_logprobs', 'output_top_logprobs', 'input_token_ids_logprobs', 'output_token_ids_logprobs', 'completion_tokens',
    ]);
    expect(u.body).toMatchObject({ text: '', output_ids: [], meta_info: { id: 'queued-unary', finish_reason: { type: 'abort', message: 'Abort in waiting queue' }, output_token_logprobs_length: 0 } });
    expect(q.stats().requestsAborted).toBe(2);
  });

  it('abort_all aborts running and queued requests alike', async () => {
    const s = await openSse(`${slow.url}/generate`, long('all-1'));
    await s.waitFrames(1);
    await abort(slow.url, { abort_all: true });
    expect(meta(s.chunks().at(-1)).finish_reason).toMatchObject({ type: 'abort', message: 'Aborted' });
  });
});

describe('duplicate rids', () => {
  it("a rid in flight is refused with SGLang's message: in-band for a stream, 400 for unary", async () => {
    const running = await openSse(`${slow.url}/generate`, long('twice'));
    await running.waitFrames(1);
    const u = await postJson(`${slow.url}/generate`, { input_ids: PROMPT, rid: 'twice' });
    expect(u.status).toBe(400);
    expect(u.body).toEqual({ error: { message: 'Duplicate request ID detected: twice' } });
    const s = await openSse(`${slow.url}/generate`, { input_ids: PROMPT, rid: 'twice', stream: true });
    await s.ended;
    expect(s.frames.map((f) => f.data)).toEqual([
      JSON.stringify({ error: { message: 'Duplicate request ID detected: twice', type: 'invalid_request_error', code: 400, retryable: false } }),
      '[DONE]',
    ]);
    expect(running.isEnded()).toBe(false);
    running.destroy();
  });

  it('repeated rids inside one batch are refused with the batch message', async () => {
    const r = await postJson(`${w.url}/generate`, { input_ids: [PROMPT, PROMPT, [1, 2]], rid: ['a', 'a', 'b'] });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: { message: "Duplicate request IDs detected within the request: ['a']" } });
  });
});

describe('feature flags', () => {
  it('custom_logit_processor and return_hidden_states are refused without their server flags', async () => {
    const c = await postJson(`${w.url}/generate`, { input_ids: PROMPT, custom_logit_processor: '{"callable": "x"}' });
    expect(c.status).toBe(400);
    expect(errorOf(c.body).message).toBe('The server is not configured to enable custom logit processor. Please set `--enable-custom-logit-processor` to enable this feature.');
    const h = await postJson(`${w.url}/generate`, { input_ids: PROMPT, return_hidden_states: true });
    expect(h.status).toBe(400);
    expect(errorOf(h.body).message).toBe(
      'The server is not configured to return hidden states. Please set `--return-hidden-states-mode last`, `--return-hidden-states-mode full`, or the legacy `--enable-return-hidden-states` flag.',
    );
  });

  it('with the flags both are accepted (the processor is ignored, no hidden states are returned)', async () => {
    const x = await worker({ enableCustomLogitProcessor: true, enableReturnHiddenStates: true });
    const body = { input_ids: PROMPT, custom_logit_processor: '{"callable": "x"}', return_hidden_states: true, sampling_params: { max_new_tokens: 6 } };
    const r = await postJson(`${x.url}/generate`, body);
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual(runModel(PROMPT, { max_new_tokens: 6 }).output_ids);
    expect((await getJson(`${x.url}/server_info`)).body).toMatchObject({ enable_custom_logit_processor: true, enable_return_hidden_states: true });
  });
});

describe('model info and the prefix cache page size', () => {
  it('/model_info and /get_model_info carry the model description', async () => {
    for (const path of ['/model_info', '/get_model_info']) {
      expect((await getJson(w.url + path)).body).toMatchObject({
        model_path: 'baton-sim',
        served_model_name: 'baton-sim',
        tokenizer_path: 'baton-sim',
        is_generation: true,
        preferred_sampling_params: null,
        weight_version: 'default',
        has_image_understanding: false,
        has_audio_understanding: false,
        model_type: 'llama',
        architectures: ['LlamaForCausalLM'],
      });
    }
  });

  it('page size 1 (the default, as SGLang): a repeated prompt finds all but its last token cached, a logprob window caps it', async () => {
    const x = await worker();
    expect((await getJson(`${x.url}/server_info`)).body).toMatchObject({ page_size: 1 });
    const prompt = Array.from({ length: 40 }, (_, i) => 2000 + i);
    expect(meta((await postJson(`${x.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 1 } })).body).cached_tokens).toBe(0);
    expect(meta((await postJson(`${x.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 1 } })).body).cached_tokens).toBe(39);
    const windowed = await postJson(`${x.url}/generate`, { input_ids: prompt, return_logprob: true, logprob_start_len: 10, sampling_params: { max_new_tokens: 1 } });
    expect(meta(windowed.body).cached_tokens).toBe(10);
    expect(meta((await postJson(`${x.url}/generate`, { input_ids: prompt.slice(0, 25), sampling_params: { max_new_tokens: 1 } })).body).cached_tokens).toBe(24);
  });
});

describe('weights', () => {
  const sp = { max_new_tokens: 24, ignore_eos: true };

  it('--weight-version and --model-path are reported and change the tokens; runModel computes them with weightsSalt', async () => {
    const v2 = await worker({ weightVersion: 'v2' });
    const other = await worker({ modelPath: 'org/other-model' });
    const answers = await Promise.all([w, v2, other].map(async (x) => (await postJson(`${x.url}/generate`, { input_ids: PROMPT, return_logprob: true, sampling_params: sp })).body));
    expect(ids(answers[0])).toEqual(runModel(PROMPT, sp).output_ids);
    expect(ids(answers[1])).toEqual(runModel(PROMPT, sp, DEFAULT_MODEL, weightsSalt('baton-sim', 'v2')).output_ids);
    expect(ids(answers[2])).toEqual(runModel(PROMPT, sp, DEFAULT_MODEL, weightsSalt('org/other-model', 'default')).output_ids);
    expect(new Set(answers.map((a) => ids(a).join())).size).toBe(3);
    expect(meta(answers[1]).weight_version).toBe('v2');
    expect((await getJson(`${v2.url}/get_weight_version`)).body).toEqual({ weight_version: 'v2' });
    expect((await getJson(`${other.url}/model_info`)).body).toMatchObject({ model_path: 'org/other-model', served_model_name: 'org/other-model', weight_version: 'default' });
    expect((await getJson(`${other.url}/v1/models`)).body).toMatchObject({ data: [{ id: 'org/other-model' }] });
    expect(weightsSalt('baton-sim', 'default')).toBe(0);
  });

  it('every chunk carries the weight version; /update_weight_version changes it live and aborts running requests by default', async () => {
    const x = await worker({ tokenIntervalMs: 10 });
    const s = await openSse(`${x.url}/generate`, long('upd'));
    await s.waitFrames(2);
    for (const c of s.chunks()) expect(meta(c).weight_version).toBe('default');
    const bad = await postJson(`${x.url}/update_weight_version`, {});
    expect(bad.status).toBe(400);
    const r = await postJson(`${x.url}/update_weight_version`, { new_version: 'step-7' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ success: true, message: 'Weight version updated to step-7', new_version: 'step-7' });
    expect((await s.ended).sawDone).toBe(true);
    expect(meta(s.chunks().at(-1)).finish_reason).toMatchObject({ type: 'abort', message: 'Aborted' });
    expect((await getJson(`${x.url}/get_weight_version`)).body).toEqual({ weight_version: 'step-7' });
    expect((await getJson(`${x.url}/model_info`)).body).toMatchObject({ weight_version: 'step-7' });
    const after = await postJson(`${x.url}/generate`, { input_ids: PROMPT, sampling_params: sp });
    expect(meta(after.body).weight_version).toBe('step-7');
    expect(ids(after.body)).toEqual(runModel(PROMPT, sp, DEFAULT_MODEL, weightsSalt('baton-sim', 'step-7')).output_ids);
  });

  it('abort_all_requests false: a running stream goes on, with the new version and the new weights from its next token', async () => {
    const x = await worker({ tokenIntervalMs: 10 });
    const s = await openSse(`${x.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 60, ignore_eos: true } });
    await s.waitFrames(3);
    await postJson(`${x.url}/update_weight_version`, { new_version: 'hot', abort_all_requests: false });
    await s.ended;
    const chunks = s.chunks();
    const last = chunks.at(-1)!;
    expect(meta(last)).toMatchObject({ weight_version: 'hot', finish_reason: { type: 'length', length: 60 } });
    const switched = chunks.findIndex((c) => meta(c).weight_version === 'hot');
    expect(switched).toBeGreaterThan(0);
    // Tokens before the switch are the old weights'; the rest follow the new weights from that context.
    const out = ids(last);
    const k = ids(chunks[switched - 1]).length;
    expect(out.slice(0, k)).toEqual(runModel(PROMPT, { max_new_tokens: k, ignore_eos: true }).output_ids);
    const salt = weightsSalt('baton-sim', 'hot');
    expect(out.slice(k)).toEqual(runModel([...PROMPT, ...out.slice(0, k)], { max_new_tokens: 60 - k, ignore_eos: true }, DEFAULT_MODEL, salt).output_ids);
  });

  it('/update_weights_from_disk waits for running requests, then swaps model path and version', async () => {
    const x = await worker({ tokenIntervalMs: 5 });
    const s = await openSse(`${x.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 30, ignore_eos: true } });
    await s.waitFrames(1);
    const r = await postJson(`${x.url}/update_weights_from_disk`, { model_path: 'org/new', weight_version: 'w2' });
    expect((await s.ended).sawDone).toBe(true);
    // The stream finished on the old weights: every token, and the version of its last chunk.
    const last = s.chunks().at(-1);
    expect(meta(last)).toMatchObject({ finish_reason: { type: 'length', length: 30 }, weight_version: 'default' });
    expect(ids(last)).toEqual(runModel(PROMPT, { max_new_tokens: 30, ignore_eos: true }).output_ids);
    expect(r.body).toEqual({ success: true, message: 'Succeeded to update model weights. Weight version updated to w2.', num_paused_requests: 0 });
    expect((await getJson(`${x.url}/model_info`)).body).toMatchObject({ model_path: 'org/new', served_model_name: 'org/new', weight_version: 'w2' });
    const after = await postJson(`${x.url}/generate`, { input_ids: PROMPT, sampling_params: sp });
    expect(ids(after.body)).toEqual(runModel(PROMPT, sp, DEFAULT_MODEL, weightsSalt('org/new', 'w2')).output_ids);
  });
});

describe('meta_info extras', () => {
  it('num_retractions is 0 in every chunk; output_token_logprobs_length only with return_logprob, cumulative in incremental mode', async () => {
    const inc = await worker({ incremental: true });
    const plain = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 3 } });
    await plain.ended;
    for (const c of plain.chunks()) {
      expect(meta(c).num_retractions).toBe(0);
      expect(meta(c)).not.toHaveProperty('output_token_logprobs_length');
    }
    const s = await openSse(`${inc.url}/generate`, { input_ids: PROMPT, stream: true, return_logprob: true, sampling_params: { max_new_tokens: 5, ignore_eos: true } });
    await s.ended;
    s.chunks().forEach((c, i) => {
      expect(meta(c).output_token_logprobs).toHaveLength(1);
      expect(meta(c).output_token_logprobs_length).toBe(i + 1);
    });
    const keys = Object.keys(meta(s.chunks().at(-1)));
    expect(keys).toEqual([
      'id', 'finish_reason', 'prompt_tokens', 'weight_version', 'num_retractions', 'input_token_logprobs', 'output_token_logprobs',
      'output_token_logprobs_length', 'reasoning_tokens', 'completion_tokens', 'cached_tokens', 'e2e_latency',
    ]);
  });
});

describe('token_ids_logprob', () => {
  const wanted = [5, 77, DEFAULT_MODEL.eosTokenId];

  it('returns [logprob, id, null] per requested id at every prompt position of the window and every output step', async () => {
    const sp = { max_new_tokens: 6, ignore_eos: true };
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, return_logprob: true, logprob_start_len: 1, token_ids_logprob: wanted, sampling_params: sp });
    const m = meta(r.body);
    const lp = promptLogprobs(PROMPT, 1, 0, DEFAULT_MODEL, 0, wanted);
    expect(m.input_token_ids_logprobs).toEqual(lp.ids.map((v) => (v === null ? null : v.map((x, i) => [x, wanted[i], null]))));
    expect((m.input_token_ids_logprobs as unknown[])[0]).toBeNull();
    const ref = runModel(PROMPT, { ...sp, token_ids_logprob: wanted });
    expect(m.output_token_ids_logprobs).toEqual(ref.output_ids_logprobs.map((v) => v.map((x, i) => [x, wanted[i], null])));
    // Consistent with the output logprobs: a requested id that was generated has its own logprob there.
    const other = runModel(PROMPT, { ...sp, token_ids_logprob: ref.output_ids });
    other.output_ids_logprobs.forEach((v, step) => expect(v[step]).toBe(ref.output_logprobs[step]));
  });

  it('is sliced like the other output lists in incremental streaming; out-of-vocabulary ids are refused', async () => {
    const inc = await worker({ incremental: true });
    const s = await openSse(`${inc.url}/generate`, { input_ids: PROMPT, stream: true, return_logprob: true, token_ids_logprob: wanted, sampling_params: { max_new_tokens: 4, ignore_eos: true } });
    await s.ended;
    const ref = runModel(PROMPT, { max_new_tokens: 4, ignore_eos: true, token_ids_logprob: wanted });
    s.chunks().forEach((c, i) => {
      expect(meta(c).output_token_ids_logprobs).toEqual([ref.output_ids_logprobs[i]!.map((x, j) => [x, wanted[j], null])]);
      expect(meta(c).input_token_ids_logprobs).toEqual([]);
    });
    const bad = await postJson(`${w.url}/generate`, { input_ids: PROMPT, return_logprob: true, token_ids_logprob: [1, 32000] });
    expect(bad.status).toBe(400);
    expect(errorOf(bad.body).message).toBe('token_ids_logprob contains out-of-vocabulary token id 32000; valid range is [0, 32000).');
  });
});

describe('logit_bias', () => {
  it('a large positive bias makes that id the top candidate, a large negative one removes it; the worker agrees with runModel', async () => {
    const greedy: DecodeParams = { max_new_tokens: 12, ignore_eos: true, temperature: 0 };
    const forced = runModel(PROMPT, { ...greedy, logit_bias: { '4242': 100 } });
    expect(forced.output_ids).toEqual(Array(12).fill(4242));
    const plain = runModel(PROMPT, greedy);
    const banned = runModel(PROMPT, { ...greedy, logit_bias: { [String(plain.output_ids[0])]: -100 } });
    expect(banned.output_ids[0]).not.toBe(plain.output_ids[0]);
    const biases: Record<string, number>[] = [{ '4242': 100 }, { [String(plain.output_ids[0])]: -100 }, { '7': 3, '99': -1.5 }];
    for (const bias of biases) {
      const sp = { max_new_tokens: 12, ignore_eos: true, logit_bias: bias };
      const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, return_logprob: true, sampling_params: sp });
      const ref = runModel(PROMPT, sp);
      expect(ids(r.body)).toEqual(ref.output_ids);
      expect(meta(r.body).output_token_logprobs).toEqual(ref.output_ids.map((id, i) => [ref.output_logprobs[i], id, null]));
    }
  });
});

describe('sampling defaults and validation', () => {
  it('no temperature samples (1.0), as SGLang; the worker and runModel agree, and it differs from greedy', async () => {
    const sp = { max_new_tokens: 40, ignore_eos: true };
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: sp });
    expect(ids(r.body)).toEqual(runModel(PROMPT, sp).output_ids);
    const g = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { ...sp, temperature: 0 } });
    expect(ids(g.body)).toEqual(runModel(PROMPT, { ...sp, temperature: 0 }).output_ids);
    expect(ids(r.body)).not.toEqual(ids(g.body));
  });

  it('temperature 0 with top_k 0 is accepted as greedy; text with input_ids is served from input_ids', async () => {
    const sp = { max_new_tokens: 8, ignore_eos: true };
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { ...sp, temperature: 0, top_k: 0 } });
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual(runModel(PROMPT, { ...sp, temperature: 0 }).output_ids);
    const both = await postJson(`${w.url}/generate`, { text: 'ignored words', input_ids: PROMPT, sampling_params: sp });
    expect(both.status).toBe(200);
    expect(ids(both.body)).toEqual(runModel(PROMPT, sp).output_ids);
    expect(meta(both.body).prompt_tokens).toBe(PROMPT.length);
    const none = await postJson(`${w.url}/generate`, { sampling_params: sp });
    expect(errorOf(none.body).message).toBe('Either text, input_ids or input_embeds should be provided.');
  });

  it("token-only mode refuses stop and stop_regex with SGLang's messages (Python reprs); min_new_tokens stays allowed", async () => {
    const stop = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { stop: 'x' } });
    expect(errorOf(stop.body).message).toBe("stop=['x'] is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).");
    const re = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { stop_regex: ['a+', "it's"] } });
    expect(errorOf(re.body).message).toBe(`stop_regex=['a+', "it's"] is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).`);
    // The stop check (SamplingParams.normalize) runs before verify.
    const first = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { stop: ['x'], top_p: 0 } });
    expect(errorOf(first.body).message).toMatch(/^stop=/);
    const minNew = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { min_new_tokens: 3, max_new_tokens: 5 } });
    expect(minNew.status).toBe(200);
    const vocab = await postJson(`${w.url}/generate`, { input_ids: [1, 2, 40000] });
    expect(errorOf(vocab.body).message).toBe('The input_ids [1, 2, 40000] contains values greater than the vocab size (32000).');
  });
});

describe('flags of a worker process', () => {
  it('baton sim workers take --legacy-errors, --enable-*, --page-size, --model-path and --weight-version', async () => {
    const c = await startCluster({
      workers: 1,
      legacyErrors: true,
      enableCustomLogitProcessor: true,
      enableReturnHiddenStates: true,
      pageSize: 8,
      modelPath: 'org/flagged',
      weightVersion: 'v9',
    });
    try {
      const url = c.workers()[0]!.url;
      expect((await getJson(`${url}/server_info`)).body).toMatchObject({
        page_size: 8,
        model_path: 'org/flagged',
        weight_version: 'v9',
        enable_custom_logit_processor: true,
        enable_return_hidden_states: true,
      });
      const s = await openSse(`${url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { top_p: 0 } });
      await s.ended;
      expect(s.frames[0]!.data).toBe('{"error":{"message":"top_p must be in (0, 1], got 0."}}');
      const r = await postJson(`${url}/generate`, { input_ids: PROMPT, custom_logit_processor: 'x', sampling_params: { max_new_tokens: 5 } });
      expect(ids(r.body)).toEqual(runModel(PROMPT, { max_new_tokens: 5 }, DEFAULT_MODEL, weightsSalt('org/flagged', 'v9')).output_ids);
    } finally {
      await c.stop();
    }
  }, 60_000);
});
