// SGLang conformance, part 2: the wire details real SGLang clusters exercise
// (shared/docs/sglang-wire.md, "Details that real SGLang clusters exercise", read in SGLang's
// http_server.py HS, tokenizer_manager.py TM, io_struct.py IO, sampling_params.py SP,
// scheduler.py SCH, schedule_batch.py SB), plus test_srt_endpoint.test_cache_tokens and the
// /generate refusals of test_input_embeddings / test_srt_endpoint's custom logit processor on a
// server started without their flags. Every test runs on every target of targets.ts.
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL, runModel } from '../../sim/model.ts';
import { TARGETS, useTarget } from './targets.ts';
import { fold, freshRid, generate, meta, openStream, outputIds, post, request, sleep, stream, uniquePrompt, type Json, type LpEntry } from './client.ts';

const EOS = DEFAULT_MODEL.eosTokenId;
const PROMPT = [101, 202, 303, 404, 505, 606];

/** The running-request abort finish reason (SCH abort_request → FINISH_ABORT defaults). */
const ABORTED = { type: 'abort', message: 'Aborted', status_code: null, err_type: null };

describe.each(TARGETS)('$name', (spec) => {
  const t = useTarget(spec);

  /** A ValueError refusal: unary 400 {"error":{"message"}}, stream 200 + one error frame + [DONE] (HS:836-868). */
  const expectRefused = async (body: Json, message: RegExp) => {
    const u = await generate(t.url, body);
    expect(u.status, u.text).toBe(400);
    expect(u.body, `unary body ${u.text.slice(0, 300)}`).toEqual({ error: { message: expect.stringMatching(message) } });
    const s = await stream(t.url, body);
    expect(s.status, `stream status; body ${s.raw.slice(0, 300)}`).toBe(200);
    expect(s.contentType).toContain('text/event-stream');
    expect(s.data, `stream frames ${s.raw.slice(0, 300)}`).toHaveLength(2);
    expect(s.data[1]).toBe('[DONE]');
    expect(s.chunks[0], `error frame ${s.data[0]}`).toEqual({ error: { message: expect.stringMatching(message), type: expect.any(String), code: 400, retryable: false } });
  };

  // ---- streaming -----------------------------------------------------------------------------

  describe('streaming', () => {
    it('framing: text/event-stream, only "data: " events, [DONE] last, finish_reason only on the last chunk', async () => {
      const s = await stream(t.url, { input_ids: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 12, ignore_eos: true } });
      expect(s.status).toBe(200);
      expect(s.contentType).toMatch(/^text\/event-stream/);
      expect(s.strayLines).toEqual([]);
      expect(s.done).toBe(true);
      expect(s.data.filter((d) => d === '[DONE]')).toHaveLength(1);
      expect(s.chunks.length).toBeGreaterThan(1);
      s.chunks.forEach((c, i) => {
        expect(meta(c).finish_reason === null, `chunk ${i}`).toBe(i < s.chunks.length - 1);
        expect(c).not.toHaveProperty('text');
      });
    });

    it('the chunks fold (per the server mode) to the unary answer; completion_tokens counts every token so far', async () => {
      const body = { input_ids: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 24, stop_token_ids: [EOS] } };
      const unary = await generate(t.url, body);
      const s = await stream(t.url, body);
      const whole = fold(s.chunks, t.incremental);
      expect(outputIds(whole)).toEqual(outputIds(unary.body));
      expect(meta(whole).finish_reason).toEqual(meta(unary.body).finish_reason);
      expect(outputIds(whole)).toEqual(runModel(PROMPT, { max_new_tokens: 24, temperature: 0, stop_token_ids: [EOS] }).output_ids);
      let sofar = 0;
      for (const c of s.chunks) {
        sofar = t.incremental ? sofar + outputIds(c).length : outputIds(c).length;
        expect(meta(c).completion_tokens).toBe(sofar);
      }
    });

    it('with return_logprob: output lists fold to the unary ones, output_token_logprobs_length is cumulative, input lists repeat whole', async () => {
      const body = { input_ids: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 10, ignore_eos: true }, return_logprob: true, top_logprobs_num: 2, logprob_start_len: 0 };
      const unary = await generate(t.url, body);
      const s = await stream(t.url, body);
      const whole = fold(s.chunks, t.incremental);
      const um = meta(unary.body);
      expect(meta(whole).output_token_logprobs).toEqual(um.output_token_logprobs);
      expect(meta(whole).output_top_logprobs).toEqual(um.output_top_logprobs);
      expect(um.output_token_logprobs_length).toBe(10);
      let sofar = 0;
      for (const c of s.chunks) {
        const m = meta(c);
        sofar = t.incremental ? sofar + outputIds(c).length : outputIds(c).length;
        expect(m.output_token_logprobs_length).toBe(sofar);
        expect(m.input_token_logprobs).toEqual(um.input_token_logprobs);
      }
    });
  });

  // ---- in-band refusals ----------------------------------------------------------------------

  describe('refusals (a request ValueError)', () => {
    it('input_ids past the vocab: "contains values greater than the vocab size"', async () => {
      await expectRefused({ input_ids: [1, 2, DEFAULT_MODEL.vocabSize + 5] }, /contains values greater than the vocab size/);
    });
    it('stop strings with --skip-tokenizer-init (SP raise_if_tokenizer_required)', async () => {
      await expectRefused({ input_ids: PROMPT, sampling_params: { stop: ['x'] } }, /^stop=.*is unavailable when skip_tokenizer_init=True/);
    });
    it('stop_regex with --skip-tokenizer-init', async () => {
      await expectRefused({ input_ids: PROMPT, sampling_params: { stop_regex: ['x+'] } }, /^stop_regex=.*is unavailable when skip_tokenizer_init=True/);
    });
    it.skip('min_new_tokens > 0 with --skip-tokenizer-init [SKIPPED: the simulator accepts it on purpose — migration continuations carry a reduced min_new_tokens (docs/simulator.md)]', async () => {
      await expectRefused({ input_ids: PROMPT, sampling_params: { min_new_tokens: 2, max_new_tokens: 4 } }, /^min_new_tokens=2 is unavailable when skip_tokenizer_init=True/);
    });
    it('custom_logit_processor without --enable-custom-logit-processor (TM)', async () => {
      await expectRefused({ input_ids: PROMPT, custom_logit_processor: '{"callable": "x"}' }, /custom logit processor/);
    });
    it('return_hidden_states without --enable-return-hidden-states (TM)', async () => {
      await expectRefused({ input_ids: PROMPT, return_hidden_states: true }, /hidden states/);
    });
    it('input_embeds with the radix cache on (test_input_embeddings on a server without --disable-radix)', async () => {
      await expectRefused({ input_embeds: [[0.1, 0.2], [0.3, 0.4]], sampling_params: { temperature: 0, max_new_tokens: 50 } }, /input_embeds is provided while disable_radix_cache is False/);
    });
    it('a text prompt on a token-only server', async () => {
      await expectRefused({ text: 'The capital of France is' }, /skip_tokenizer_init=True cannot accept text prompts/);
    });
    it('no prompt, and empty input_ids', async () => {
      await expectRefused({ sampling_params: { max_new_tokens: 2 } }, /Either text, input_ids or input_embeds should be provided/);
      await expectRefused({ input_ids: [] }, /input_ids cannot be empty/);
    });
    it('sampling-parameter validation (SP verify): each a 400', async () => {
      const bad: Json[] = [
        { temperature: -1 },
        { top_p: 0 },
        { top_p: 1.5 },
        { min_p: 1.5 },
        { temperature: 0.7, top_k: 0 },
        { frequency_penalty: 3 },
        { presence_penalty: -3 },
        { repetition_penalty: 0 },
        { min_new_tokens: 5, max_new_tokens: 2 },
        { regex: 'a', json_schema: '{}' },
      ];
      for (const sp of bad) {
        const r = await generate(t.url, { input_ids: PROMPT, sampling_params: sp });
        expect(r.status, JSON.stringify(sp)).toBe(400);
        expect(r.body, JSON.stringify(sp)).toEqual({ error: { message: expect.any(String) } });
      }
    });
  });

  describe('malformed bodies and FastAPI answers', () => {
    const badRequest = { object: 'error', message: expect.any(String), type: 'Bad Request', param: null, code: 400 };
    it('a body that is not JSON: 400 {"object":"error",...,"type":"Bad Request"} (HS:542-585)', async () => {
      const r = await post(t.url + '/generate', '{"input_ids": [1, 2');
      expect(r.status).toBe(400);
      expect(r.body, r.text.slice(0, 300)).toEqual(badRequest);
    });
    it('a field of the wrong type is a schema error even with stream: true (no SSE)', async () => {
      const r = await post(t.url + '/generate', { input_ids: PROMPT, stream: true, return_logprob: 'yes please' });
      expect(r.status).toBe(400);
      expect(r.headers.get('content-type')).not.toContain('text/event-stream');
      expect(r.body, r.text.slice(0, 300)).toEqual(badRequest);
    });
    it('unknown path: 404 {"detail":"Not Found"}', async () => {
      const r = await request(t.url + '/no_such_endpoint');
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ detail: 'Not Found' });
    });
    it('wrong method: 405 {"detail":"Method Not Allowed"}', async () => {
      const r = await request(t.url + '/generate');
      expect(r.status).toBe(405);
      expect(r.body).toEqual({ detail: 'Method Not Allowed' });
    });
  });

  // ---- abort ---------------------------------------------------------------------------------

  describe('abort', () => {
    const longRun = (rid: string) => ({ rid, input_ids: uniquePrompt(8), sampling_params: { temperature: 0, max_new_tokens: 100, ignore_eos: true } });

    // TM abort_request acts only when the given rid itself is in flight (`rid not in
    // self.rid_to_state: return`, with one tokenizer worker); the scheduler then aborts every
    // request whose rid starts with it.
    it('POST /abort_request of a running rid aborts every running request whose rid starts with it (TM abort_request, SCH:4154-4160)', async () => {
      await t.slow(20);
      try {
        const base = freshRid('pfx');
        const a = await openStream(t.url, longRun(base));
        const b = await openStream(t.url, longRun(`${base}-b`));
        const other = await openStream(t.url, { ...longRun(freshRid('other')), sampling_params: { temperature: 0, max_new_tokens: 30, ignore_eos: true } });
        await Promise.all([a.first, b.first, other.first]);
        const r = await post(t.url + '/abort_request', { rid: base });
        expect(r.status).toBe(200);
        expect(r.text).toBe('');
        for (const s of [await a.done, await b.done]) {
          expect(s.done).toBe(true);
          const last = s.chunks.at(-1)!;
          expect(meta(last).finish_reason, `finish_reason ${JSON.stringify(meta(last).finish_reason)}`).toEqual(ABORTED);
          expect(meta(last).completion_tokens as number).toBeLessThan(100);
        }
        const o = await other.done;
        expect(meta(o.chunks.at(-1)).finish_reason).toEqual({ type: 'length', length: 30 });
      } finally {
        await t.clear();
      }
    });

    it('abort_all ends every running request; an unknown rid is ignored with 200', async () => {
      const unknown = await post(t.url + '/abort_request', { rid: freshRid('nobody') });
      expect(unknown.status).toBe(200);
      await t.slow(20);
      try {
        const a = await openStream(t.url, longRun(freshRid('all')));
        const b = await openStream(t.url, longRun(freshRid('all')));
        await Promise.all([a.first, b.first]);
        const r = await post(t.url + '/abort_request', { rid: '', abort_all: true });
        expect(r.status).toBe(200);
        for (const s of [await a.done, await b.done]) expect(meta(s.chunks.at(-1)).finish_reason).toEqual(ABORTED);
      } finally {
        await t.clear();
      }
    });

    it('a request aborted while queued ends with TM _handle_abort_req\'s chunk: no prompt/cached tokens, text "", completion_tokens', async () => {
      // 30 000 uncached prompt tokens keep the request in prefill (the queue) for ~0.6 s.
      const rid = freshRid('queued');
      const pending = stream(t.url, { rid, input_ids: uniquePrompt(30_000), sampling_params: { temperature: 0, max_new_tokens: 8 } });
      await sleep(100);
      const r = await post(t.url + '/abort_request', { rid });
      expect(r.status).toBe(200);
      const s = await pending;
      expect(s.done).toBe(true);
      const last = s.chunks.at(-1)!;
      const m = meta(last);
      expect((m.finish_reason as Json).type).toBe('abort');
      expect(m.id).toBe(rid);
      expect(m).not.toHaveProperty('prompt_tokens');
      expect(m).not.toHaveProperty('cached_tokens');
      expect(m.completion_tokens).toBe(0);
      expect(last.text).toBe('');
      expect(outputIds(last)).toEqual([]);
    });
  });

  // ---- logprob window ------------------------------------------------------------------------

  describe('logprob window', () => {
    it('logprob_start_len -1 with return_logprob: input_token_logprobs is [] (SCH:2305-2312)', async () => {
      const r = await generate(t.url, { input_ids: PROMPT, return_logprob: true, logprob_start_len: -1, sampling_params: { temperature: 0, max_new_tokens: 3 } });
      expect(r.status).toBe(200);
      expect(meta(r.body).input_token_logprobs).toEqual([]);
      expect((meta(r.body).output_token_logprobs as unknown[]).length).toBe(3);
    });
    it('logprob_start_len == prompt length is valid (no prompt positions); larger is refused (SCH:2323-2328)', async () => {
      const ok = await generate(t.url, { input_ids: PROMPT, return_logprob: true, logprob_start_len: PROMPT.length, sampling_params: { temperature: 0, max_new_tokens: 3 } });
      expect(ok.status, ok.text).toBe(200);
      expect(meta(ok.body).input_token_logprobs).toEqual([]);
      expect(outputIds(ok.body)).toEqual(runModel(PROMPT, { max_new_tokens: 3, temperature: 0 }).output_ids);
      const bad = await generate(t.url, { input_ids: PROMPT, return_logprob: true, logprob_start_len: PROMPT.length + 1, sampling_params: { temperature: 0, max_new_tokens: 3 } });
      expect(bad.status).toBe(400);
      expect(bad.body, bad.text.slice(0, 300)).toEqual({ error: { message: expect.stringMatching(/logprob_start_len/) } });
    });
  });

  // ---- meta_info and sampling defaults -------------------------------------------------------

  describe('meta_info', () => {
    it('carries id, finish_reason, prompt/completion/cached tokens, e2e_latency, num_retractions and weight_version', async () => {
      const rid = freshRid('meta');
      const r = await generate(t.url, { rid, input_ids: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 4, ignore_eos: true } });
      const m = meta(r.body);
      expect(m).toMatchObject({ id: rid, finish_reason: { type: 'length', length: 4 }, prompt_tokens: PROMPT.length, completion_tokens: 4 });
      expect(Number.isInteger(m.cached_tokens)).toBe(true);
      expect(typeof m.e2e_latency).toBe('number');
      expect(m.num_retractions).toBe(0);
      expect(typeof m.weight_version).toBe('string');
      expect(m).not.toHaveProperty('output_token_logprobs_length');
    });
  });

  describe('sampling defaults', () => {
    it('max_new_tokens defaults to 128', async () => {
      const r = await generate(t.url, { input_ids: PROMPT, sampling_params: { temperature: 0, ignore_eos: true } });
      expect(meta(r.body)).toMatchObject({ completion_tokens: 128, finish_reason: { type: 'length', length: 128 } });
    });
    it('temperature defaults to 1.0: requests without one sample (they are not all the greedy answer)', async () => {
      const body = { input_ids: PROMPT, sampling_params: { max_new_tokens: 16, ignore_eos: true } };
      const greedy = runModel(PROMPT, { max_new_tokens: 16, temperature: 0, ignore_eos: true }).output_ids;
      const answers = await Promise.all(Array.from({ length: 4 }, () => generate(t.url, body)));
      for (const a of answers) expect(a.status).toBe(200);
      expect(answers.map((a) => JSON.stringify(outputIds(a.body))).some((x) => x !== JSON.stringify(greedy))).toBe(true);
    });
    it('temperature 0 with top_k 0 is accepted (greedy is set first, SP:168-171)', async () => {
      const r = await generate(t.url, { input_ids: PROMPT, sampling_params: { temperature: 0, top_k: 0, max_new_tokens: 8 } });
      expect(r.status, r.text).toBe(200);
      expect(outputIds(r.body)).toEqual(runModel(PROMPT, { max_new_tokens: 8, temperature: 0 }).output_ids);
    });
    it('both text and input_ids: served from input_ids (IO:360-372)', async () => {
      const r = await generate(t.url, { text: 'The capital of France is', input_ids: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 8 } });
      expect(r.status, r.text).toBe(200);
      expect(meta(r.body).prompt_tokens).toBe(PROMPT.length);
      expect(outputIds(r.body)).toEqual(runModel(PROMPT, { max_new_tokens: 8, temperature: 0 }).output_ids);
    });
    it('sampling_params null means all defaults', async () => {
      const r = await generate(t.url, { input_ids: PROMPT, sampling_params: null });
      expect(r.status, r.text).toBe(200);
      expect(meta(r.body).completion_tokens as number).toBeLessThanOrEqual(128);
    });
  });

  // ---- other endpoints -----------------------------------------------------------------------

  describe('endpoints', () => {
    it('/get_model_info and /model_info: model_path, tokenizer_path, is_generation, preferred_sampling_params (object), weight_version, ... (HS:683-755)', async () => {
      for (const path of ['/get_model_info', '/model_info']) {
        const r = await request(t.url + path);
        expect(r.status, path).toBe(200);
        const info = r.body as Json;
        expect(typeof info.model_path).toBe('string');
        expect(info).toHaveProperty('tokenizer_path');
        expect(info.is_generation).toBe(true);
        expect(info).toHaveProperty('preferred_sampling_params');
        expect(typeof info.preferred_sampling_params === 'string', 'preferred_sampling_params is an object (or null) since Dec 2025').toBe(false);
        expect(typeof info.weight_version).toBe('string');
        for (const k of ['architectures', 'model_type', 'has_image_understanding', 'has_audio_understanding']) expect(info, `${path} ${k}`).toHaveProperty(k);
      }
    });
    it('/get_weight_version answers {"weight_version"}, the same as meta_info.weight_version', async () => {
      const r = await request(t.url + '/get_weight_version');
      expect(r.status).toBe(200);
      expect(Object.keys(r.body as Json)).toEqual(['weight_version']);
      const g = await generate(t.url, { input_ids: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 1 } });
      expect(meta(g.body).weight_version).toBe((r.body as Json).weight_version);
    });
    it('/health and /health_generate: 200 with an empty body', async () => {
      for (const path of ['/health', '/health_generate']) {
        const r = await request(t.url + path);
        expect(r.status, path).toBe(200);
        expect(r.text, path).toBe('');
      }
    });
    it('/get_server_info and /server_info tell the streaming mode and token-only mode', async () => {
      for (const path of ['/get_server_info', '/server_info']) {
        const r = await request(t.url + path);
        expect(r.status, path).toBe(200);
        expect(r.body, path).toMatchObject({ skip_tokenizer_init: true, incremental_streaming_output: t.incremental });
      }
    });
    it('/flush_cache (POST, idle): 200', async () => {
      const r = await post(t.url + '/flush_cache', {});
      expect(r.status).toBe(200);
    });
  });

  // ---- test_srt_endpoint.test_cache_tokens ---------------------------------------------------

  // Through the router over two workers with cache_aware (targets.ts): each request goes where its
  // prefix is cached, so the figures are one worker's. The router's /flush_cache empties the
  // workers' caches and its own picture of them.
  it('test_cache_tokens: after /flush_cache, cached_tokens 0, 100, 9999, 999, 10000', async () => {
    for (let i = 0; i < 2; i++) expect((await post(t.url + '/flush_cache', {})).status).toBe(200);
    const cached = async (n: number) => meta((await generate(t.url, { input_ids: Array.from({ length: n }, (_, i) => i), sampling_params: { max_new_tokens: 1 } })).body).cached_tokens;
    const got = [await cached(100), await cached(10000), await cached(10000), await cached(1000), await cached(11000)];
    expect(got, `cached_tokens ${JSON.stringify(got)}`).toEqual([0, 100, 9999, 999, 10000]);
  });

  // ---- duplicate rid -------------------------------------------------------------------------

  it('a rid already in flight: "Duplicate request ID detected: X" (TM:3020), 400 unary, in-band for a stream', async () => {
    await t.slow(20);
    const rid = freshRid('dup');
    const first = await openStream(t.url, { rid, input_ids: uniquePrompt(8), sampling_params: { temperature: 0, max_new_tokens: 100, ignore_eos: true } });
    try {
      await first.first;
      await expectRefused({ rid, input_ids: PROMPT, sampling_params: { max_new_tokens: 2 } }, new RegExp(`^Duplicate request ID detected: ${rid}$`));
    } finally {
      await post(t.url + '/abort_request', { rid });
      first.cancel();
      await first.done;
      await t.clear();
    }
  });

  it('logprob entries are [logprob, token_id, null] triples in token-only mode', async () => {
    const r = await generate(t.url, { input_ids: PROMPT, return_logprob: true, logprob_start_len: 0, sampling_params: { temperature: 0, max_new_tokens: 3 } });
    const m = meta(r.body);
    for (const e of [...(m.input_token_logprobs as LpEntry[]), ...(m.output_token_logprobs as LpEntry[])]) {
      expect(e).toHaveLength(3);
      expect(e[2]).toBeNull();
    }
  });
});
