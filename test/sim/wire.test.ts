// The simulated worker on the wire, as an SGLang client sees it (in-process workers, real HTTP).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runModel } from '../../sim/model.ts';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { Vocabulary } from '../../sim/vocab.ts';
import { eventually, getJson, openSse, postJson } from './helpers.ts';

type Json = Record<string, unknown>;
type Meta = Json & { finish_reason: Json | null };
const meta = (x: unknown) => (x as { meta_info: Meta }).meta_info;
const ids = (x: unknown) => (x as { output_ids: number[] }).output_ids;

let w: SimWorker; // token-only, cumulative
let wi: SimWorker; // token-only, incremental
let wt: SimWorker; // text mode
let wp: SimWorker; // preferred max_new_tokens 7
let slow: SimWorker; // 20 ms between tokens

beforeAll(async () => {
  [w, wi, wt, wp, slow] = await Promise.all([
    startWorker(),
    startWorker({ incremental: true }),
    startWorker({ text: true }),
    startWorker({ preferredSamplingParams: { max_new_tokens: 7 } }),
    startWorker({ tokenIntervalMs: 20 }),
  ]);
});

afterAll(async () => {
  await Promise.all([w, wi, wt, wp, slow].map((x) => x?.close()));
});

const PROMPT = [101, 202, 303, 404, 505];

describe('unary /generate', () => {
  it('answers output_ids and meta_info only (token-only mode) with the model answer', async () => {
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, rid: 'u1', sampling_params: { max_new_tokens: 12 } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
    expect(Object.keys(r.body as Json).sort()).toEqual(['meta_info', 'output_ids']);
    const ref = runModel(PROMPT, { max_new_tokens: 12 });
    expect(ids(r.body)).toEqual(ref.output_ids);
    const m = meta(r.body);
    expect(m).toMatchObject({ id: 'u1', finish_reason: ref.finish_reason, prompt_tokens: 5, completion_tokens: ref.output_ids.length, cached_tokens: 0, weight_version: 'default' });
    expect(typeof m.e2e_latency).toBe('number');
    expect(m).not.toHaveProperty('output_token_logprobs');
  });

  it('defaults max_new_tokens to 128, or to the advertised preferred value', async () => {
    const plain = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { ignore_eos: true } });
    expect(meta(plain.body)).toMatchObject({ completion_tokens: 128, finish_reason: { type: 'length', length: 128 } });
    const pref = await postJson(`${wp.url}/generate`, { input_ids: PROMPT, sampling_params: { ignore_eos: true } });
    expect(meta(pref.body)).toMatchObject({ completion_tokens: 7, finish_reason: { type: 'length', length: 7 } });
    const explicit = await postJson(`${wp.url}/generate`, { input_ids: PROMPT, sampling_params: { ignore_eos: true, max_new_tokens: 3 } });
    expect(meta(explicit.body).completion_tokens).toBe(3);
  });

  it('answers a batch and n > 1 as a JSON array in order', async () => {
    const batch = await postJson(`${w.url}/generate`, { input_ids: [PROMPT, [7, 8]], sampling_params: { max_new_tokens: 5 } });
    expect(Array.isArray(batch.body)).toBe(true);
    const arr = batch.body as unknown[];
    expect(arr.map(ids)).toEqual([runModel(PROMPT, { max_new_tokens: 5 }).output_ids, runModel([7, 8], { max_new_tokens: 5 }).output_ids]);
    const n = await postJson(`${w.url}/generate`, { input_ids: PROMPT, rid: 'nn', sampling_params: { max_new_tokens: 4, n: 3 } });
    const samples = n.body as unknown[];
    expect(samples).toHaveLength(3);
    expect(new Set(samples.map((s) => meta(s).id)).size).toBe(3);
    samples.forEach((s) => expect(ids(s)).toEqual(runModel(PROMPT, { max_new_tokens: 4 }).output_ids));
  });
});

describe('streaming /generate', () => {
  it('cumulative: SGLang frames, growing output_ids, finish only on the last chunk, then [DONE]', async () => {
    const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 9, ignore_eos: true } });
    const end = await s.ended;
    expect(s.status).toBe(200);
    expect(String(s.headers['content-type'])).toContain('text/event-stream');
    expect(end).toMatchObject({ sawDone: true, complete: true, error: null });
    expect(s.frames.at(-1)!.data).toBe('[DONE]');
    for (const f of s.frames.slice(0, -1)) expect(f.data).toBe(JSON.stringify(JSON.parse(f.data)));
    const chunks = s.chunks();
    const ref = runModel(PROMPT, { max_new_tokens: 9, ignore_eos: true });
    expect(chunks).toHaveLength(9);
    chunks.forEach((c, i) => {
      expect(ids(c)).toEqual(ref.output_ids.slice(0, i + 1));
      expect(meta(c).completion_tokens).toBe(i + 1);
      expect(meta(c).finish_reason).toEqual(i === 8 ? { type: 'length', length: 9 } : null);
      expect('e2e_latency' in meta(c)).toBe(i === 8);
    });
  });

  it('incremental: output ids and output logprobs are deltas, input logprobs repeat', async () => {
    const body = { input_ids: PROMPT, stream: true, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2, sampling_params: { max_new_tokens: 6, ignore_eos: true } };
    const s = await openSse(`${wi.url}/generate`, body);
    expect((await s.ended).sawDone).toBe(true);
    const chunks = s.chunks();
    const ref = runModel(PROMPT, { max_new_tokens: 6, ignore_eos: true, top_logprobs_num: 2 });
    expect(chunks.flatMap(ids)).toEqual(ref.output_ids);
    chunks.forEach((c, i) => {
      expect(ids(c)).toEqual([ref.output_ids[i]]);
      expect(meta(c).output_token_logprobs).toEqual([[ref.output_logprobs[i], ref.output_ids[i], null]]);
      expect(meta(c).output_top_logprobs).toEqual([ref.output_top_logprobs[i]!.map(([lp, id]) => [lp, id, null])]);
      expect(meta(c).input_token_logprobs).toEqual(meta(chunks[0]).input_token_logprobs);
      expect(meta(c).input_top_logprobs).toEqual(meta(chunks[0]).input_top_logprobs);
    });
    const info = await getJson(`${wi.url}/server_info`);
    expect(info.body).toMatchObject({ incremental_streaming_output: true });
  });

  it('batch streams carry index; one [DONE] after every sample finished', async () => {
    const s = await openSse(`${w.url}/generate`, { input_ids: [PROMPT, [9, 9, 9]], stream: true, sampling_params: { max_new_tokens: 4, ignore_eos: true } });
    expect((await s.ended).sawDone).toBe(true);
    const chunks = s.chunks();
    expect(s.frames.filter((f) => f.data === '[DONE]')).toHaveLength(1);
    for (const index of [0, 1]) {
      const mine = chunks.filter((c) => c.index === index);
      expect(mine).toHaveLength(4);
      expect(meta(mine.at(-1)).finish_reason).toEqual({ type: 'length', length: 4 });
    }
  });
});

describe('logprobs', () => {
  it('follow SGLang shapes: [logprob, id, null] triples, a null first prompt position, top lists per position', async () => {
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 3, sampling_params: { max_new_tokens: 5, ignore_eos: true } });
    const m = meta(r.body);
    const itl = m.input_token_logprobs as [number | null, number, null][];
    expect(itl).toHaveLength(PROMPT.length);
    expect(itl[0]).toEqual([null, PROMPT[0], null]);
    itl.slice(1).forEach((t, i) => expect(t).toEqual([expect.any(Number), PROMPT[i + 1], null]));
    const itop = m.input_top_logprobs as unknown[];
    expect(itop[0]).toBeNull();
    itop.slice(1).forEach((t) => expect(t).toHaveLength(3));
    const ref = runModel(PROMPT, { max_new_tokens: 5, ignore_eos: true, top_logprobs_num: 3 });
    expect(m.output_token_logprobs).toEqual(ref.output_ids.map((id, i) => [ref.output_logprobs[i], id, null]));
    expect(m.output_top_logprobs).toEqual(ref.output_top_logprobs.map((top) => top.map(([lp, id]) => [lp, id, null])));
  });

  it('cover no prompt position by default (logprob_start_len -1) nor with a start equal to the prompt length', async () => {
    for (const extra of [{}, { logprob_start_len: -1 }, { logprob_start_len: PROMPT.length }]) {
      const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, return_logprob: true, top_logprobs_num: 2, ...extra, sampling_params: { max_new_tokens: 2 } });
      expect(r.status).toBe(200);
      expect(meta(r.body)).toMatchObject({ input_token_logprobs: [], input_top_logprobs: [] });
      expect(meta(r.body).output_token_logprobs).toHaveLength(2);
    }
  });

  it('refuse a logprob window past the prompt: 400 unary, an abort chunk with status 400 in a stream', async () => {
    const body = { input_ids: PROMPT, return_logprob: true, logprob_start_len: PROMPT.length + 1, sampling_params: { max_new_tokens: 2 } };
    const r = await postJson(`${w.url}/generate`, body);
    expect(r.status).toBe(400);
    expect((r.body as { error: { message: string } }).error.message).toBe(
      `req.logprob_start_len=${PROMPT.length + 1} is higher than the number of input tokens len(req.origin_input_ids)=${PROMPT.length}. Please use a smaller logprob_start_len.`,
    );
    const s = await openSse(`${w.url}/generate`, { ...body, stream: true });
    expect((await s.ended).sawDone).toBe(true);
    expect(meta(s.chunks()[0]).finish_reason).toMatchObject({ type: 'abort', status_code: 400 });
  });

  it('carry token text in text mode with return_text_in_logprobs', async () => {
    const r = await postJson(`${wt.url}/generate`, { text: 'the answer is', return_logprob: true, return_text_in_logprobs: true, sampling_params: { max_new_tokens: 3 } });
    const out = meta(r.body).output_token_logprobs as [number, number, string][];
    const v = new Vocabulary();
    out.forEach(([, id, text]) => expect(text).toBe(v.spelling(id)));
  });
});

describe('validation', () => {
  const bad: [string, Json][] = [
    ['temperature < 0', { sampling_params: { temperature: -1 } }],
    ['top_p 0', { sampling_params: { top_p: 0 } }],
    ['top_p > 1', { sampling_params: { top_p: 1.5 } }],
    ['min_p > 1', { sampling_params: { min_p: 2 } }],
    ['top_k 0', { sampling_params: { top_k: 0, temperature: 0.7 } }],
    ['frequency_penalty', { sampling_params: { frequency_penalty: 3 } }],
    ['presence_penalty', { sampling_params: { presence_penalty: -3 } }],
    ['repetition_penalty', { sampling_params: { repetition_penalty: 0 } }],
    ['min > max new tokens', { sampling_params: { min_new_tokens: 5, max_new_tokens: 2 } }],
    ['negative max_new_tokens', { sampling_params: { max_new_tokens: -1 } }],
    ['two grammars', { sampling_params: { regex: 'a+', json_schema: '{}' } }],
    ['stop strings in token-only mode', { sampling_params: { stop: ['x'] } }],
    ['stop_regex in token-only mode', { sampling_params: { stop_regex: 'x' } }],
    ['logit_bias out of vocabulary', { sampling_params: { logit_bias: { '99999999': 1 } } }],
  ];
  for (const [name, extra] of bad) {
    it(`refuses ${name} with 400 {"error":{"message"}}`, async () => {
      const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, ...extra });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body as Json)).toEqual(['error']);
      expect(typeof (r.body as { error: { message: unknown } }).error.message).toBe('string');
    });
  }

  const badInputs: [string, Json][] = [
    ['empty input_ids', { input_ids: [] }],
    ['no prompt', {}],
    ['text, input_ids and input_embeds', { text: 'hi', input_ids: PROMPT, input_embeds: [[0.1, 0.2]] }],
    ['a text prompt in token-only mode', { text: 'hello there' }],
    ['input_embeds', { input_embeds: [[0.1, 0.2]] }],
  ];
  for (const [name, body] of badInputs) {
    it(`refuses ${name} with 400`, async () => {
      const r = await postJson(`${w.url}/generate`, body);
      expect(r.status).toBe(400);
      expect((r.body as { error: { message: string } }).error.message.length).toBeGreaterThan(0);
    });
  }

  it('reports a stream request error in-band after a 200, as SGLang does', async () => {
    const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { temperature: -1 } });
    expect(s.status).toBe(200);
    expect((await s.ended).sawDone).toBe(true);
    expect(s.frames.map((f) => f.data)).toEqual([
      JSON.stringify({ error: { message: 'temperature must be a non-negative finite number, got -1.', type: 'invalid_request_error', code: 400, retryable: false } }),
      '[DONE]',
    ]);
  });

  // SamplingParams(**sampling_params) raises a TypeError, which generate_request does not catch
  // (it catches ValueError): Starlette's 500 for a unary request; a stream is cut after its 200.
  const typeErrors: [string, Json][] = [
    ['an unknown sampling key (OpenAI\'s max_tokens)', { max_tokens: 8 }],
    ['a typo', { max_new_token: 8 }],
    ['a number as stop_token_ids', { stop_token_ids: 5 }],
  ];
  for (const [name, sp] of typeErrors) {
    it(`answers ${name} as SGLang's unhandled TypeError: 500 text unary, a stream cut after its 200 headers`, async () => {
      const res = await fetch(`${w.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: PROMPT, sampling_params: sp }) });
      expect(res.status).toBe(500);
      expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await res.text()).toBe('Internal Server Error');
      const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: sp });
      expect(s.status).toBe(200);
      const end = await s.ended;
      expect(end.sawDone).toBe(false);
      expect(end.complete).toBe(false); // no last chunk: the connection closed mid-body
      expect(s.frames).toEqual([]);
    });
  }

  it('as SGLang 2025 (--legacy-sampling), takes no sampling_seed or stop_regex: the TypeError, which newer workers do not raise', async () => {
    const x = await startWorker({ legacySampling: true });
    try {
      for (const sp of [{ sampling_seed: 3 }, { stop_regex: 'a' }]) {
        const res = await fetch(`${x.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: PROMPT, sampling_params: { max_new_tokens: 2, ...sp } }) });
        expect(res.status).toBe(500);
        expect(await res.text()).toBe('Internal Server Error');
      }
      expect((await postJson(`${x.url}/generate`, { input_ids: PROMPT, sampling_params: { max_new_tokens: 2, temperature: 0 } })).status).toBe(200);
      expect((await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { max_new_tokens: 2, sampling_seed: 3 } })).status).toBe(200);
    } finally {
      await x.close();
    }
  });

  it('takes every SamplingParams field of the supported versions, nulls included', async () => {
    const sp = { max_new_tokens: 3, stream_interval: null, sampling_seed: null, custom_params: null, no_stop_trim: false, stop_regex: null, is_normalized: false };
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: sp });
    expect(r.status).toBe(200);
  });

  it('streams one chunk per stream_interval tokens, the first token at once (len % k == 1), and the last', async () => {
    const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 10, ignore_eos: true, stream_interval: 4 } });
    await s.ended;
    expect(s.frames.filter((f) => f.data !== '[DONE]').map((f) => ids(JSON.parse(f.data)).length)).toEqual([1, 5, 9, 10]);
  });

  it('refuses bodies that do not fit the schema with the object error shape', async () => {
    const res = await fetch(`${w.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ object: 'error', type: 'Bad Request', param: null, code: 400 });
    const typed = await postJson(`${w.url}/generate`, { input_ids: 'abc' });
    expect(typed.status).toBe(400);
    expect(typed.body).toMatchObject({ object: 'error', code: 400 });
  });

  it('refuses a rid that is already in flight', async () => {
    const s = await openSse(`${slow.url}/generate`, { input_ids: PROMPT, rid: 'dup', stream: true, sampling_params: { max_new_tokens: 10_000, ignore_eos: true } });
    await s.waitFrames(1);
    const r = await postJson(`${slow.url}/generate`, { input_ids: PROMPT, rid: 'dup' });
    expect(r.status).toBe(400);
    expect((r.body as { error: { message: string } }).error.message).toContain('dup');
    s.destroy();
  });
});

describe('text mode', () => {
  it('takes text prompts and returns text, ending at a stop string', async () => {
    const v = new Vocabulary();
    const r = await postJson(`${wt.url}/generate`, { text: 'the answer is', sampling_params: { max_new_tokens: 20, ignore_eos: true } });
    const out = r.body as { text: string; output_ids: number[] };
    expect(out.text).toBe(out.output_ids.map((id) => v.piece(id)).join(''));
    expect(out.output_ids).toEqual(runModel(v.encode('the answer is'), { max_new_tokens: 20, ignore_eos: true }).output_ids);
    const words = out.text.trim().split(' ');
    const stop = words[3]!;
    const stopped = await postJson(`${wt.url}/generate`, { text: 'the answer is', sampling_params: { max_new_tokens: 20, ignore_eos: true, stop: [stop] } });
    const s = stopped.body as { text: string; meta_info: Meta };
    expect(s.meta_info.finish_reason).toEqual({ type: 'stop', matched: stop });
    expect(s.text).toBe(out.text.slice(0, out.text.indexOf(stop)));
  });
});

describe('prefix cache', () => {
  it('reports cached prompt tokens on reuse in whole pages, never the whole prompt, and forgets on /flush_cache', async () => {
    const x = await startWorker({ pageSize: 16 });
    try {
      const prompt = Array.from({ length: 40 }, (_, i) => 1000 + i);
      const first = await postJson(`${x.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 2 } });
      expect(meta(first.body).cached_tokens).toBe(0);
      const again = await postJson(`${x.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 2 } });
      expect(meta(again.body).cached_tokens).toBe(32);
      const block = await postJson(`${x.url}/generate`, { input_ids: prompt.slice(0, 32), sampling_params: { max_new_tokens: 2 } });
      expect(meta(block.body).cached_tokens).toBe(16);
      expect((await fetch(`${x.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
      const flushed = await postJson(`${x.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 2 } });
      expect(meta(flushed.body).cached_tokens).toBe(0);
    } finally {
      await x.close();
    }
  });
});

describe('other endpoints', () => {
  it('health, model info, server info, models, 404', async () => {
    const h = await fetch(`${w.url}/health`);
    expect(h.status).toBe(200);
    expect(await h.text()).toBe('');
    expect((await fetch(`${w.url}/health_generate`)).status).toBe(200);
    for (const path of ['/get_model_info', '/model_info']) {
      expect((await getJson(w.url + path)).body).toMatchObject({ model_path: 'baton-sim', is_generation: true, preferred_sampling_params: null });
    }
    for (const path of ['/get_model_info', '/model_info', '/get_server_info', '/server_info']) {
      expect((await getJson(wp.url + path)).body).toMatchObject({ preferred_sampling_params: { max_new_tokens: 7 } });
    }
    for (const path of ['/get_server_info', '/server_info']) {
      expect((await getJson(w.url + path)).body).toMatchObject({
        skip_tokenizer_init: true,
        incremental_streaming_output: false,
        preferred_sampling_params: null,
        context_length: expect.any(Number),
        max_total_num_tokens: expect.any(Number),
        max_req_input_len: expect.any(Number),
        internal_states: expect.any(Array),
        version: expect.any(String),
      });
    }
    expect((await getJson(`${wt.url}/server_info`)).body).toMatchObject({ skip_tokenizer_init: false });
    expect((await getJson(`${w.url}/v1/models`)).body).toMatchObject({ object: 'list', data: [{ id: 'baton-sim', object: 'model' }] });
    expect((await fetch(`${w.url}/nope`)).status).toBe(404);
  });

  it('/metrics is Prometheus text with SGLang names', async () => {
    await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { max_new_tokens: 3, ignore_eos: true } });
    const res = await fetch(`${w.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    const samples = new Map<string, number>();
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
      expect(m, line).not.toBeNull();
      expect(Number.isNaN(Number(m![3])) && m![3] !== 'NaN').toBe(false);
      samples.set(m![1]! + (m![2] ?? ''), Number(m![3]));
    }
    for (const name of ['sglang:num_running_reqs', 'sglang:num_queue_reqs', 'sglang:token_usage', 'sglang:prompt_tokens_total', 'sglang:generation_tokens_total', 'sglang:time_to_first_token_seconds_count']) {
      expect([...samples.keys()].some((k) => k.startsWith(name)), name).toBe(true);
    }
    expect(samples.get('sglang:generation_tokens_total{model_name="baton-sim"}')).toBeGreaterThanOrEqual(3);
  });
});

describe('aborts', () => {
  it('/abort_request ends a stream with an abort chunk then [DONE]; unknown rids are ignored', async () => {
    const before = slow.stats().requestsAborted;
    const s = await openSse(`${slow.url}/generate`, { input_ids: PROMPT, rid: 'to-abort', stream: true, sampling_params: { max_new_tokens: 10_000, ignore_eos: true } });
    await s.waitFrames(2);
    const unknown = await fetch(`${slow.url}/abort_request`, { method: 'POST', body: JSON.stringify({ rid: 'nobody' }) });
    expect(unknown.status).toBe(200);
    const r = await fetch(`${slow.url}/abort_request`, { method: 'POST', body: JSON.stringify({ rid: 'to-abort' }) });
    expect(r.status).toBe(200);
    const end = await s.ended;
    expect(end.sawDone).toBe(true);
    const last = s.chunks().at(-1);
    expect(meta(last).finish_reason).toMatchObject({ type: 'abort', message: expect.any(String), status_code: null });
    expect(slow.stats().requestsAborted).toBe(before + 1);
  });

  it('a client that disconnects aborts its generation at once', async () => {
    const x = await startWorker({ tokenIntervalMs: 10 });
    try {
      const s = await openSse(`${x.url}/generate`, { input_ids: PROMPT, rid: 'gone', stream: true, sampling_params: { max_new_tokens: 30_000, ignore_eos: true } });
      await s.waitFrames(3);
      s.destroy();
      const stats = await eventually(() => {
        const st = x.stats();
        return st.clientDisconnects === 1 && st.inFlight === 0 ? st : undefined;
      });
      expect(stats.rids).toContain('gone');
      const tokens = stats.tokensGenerated;
      // Had the generation kept going, ten more intervals would have produced tokens.
      await new Promise((r) => setTimeout(r, 100));
      expect(x.stats().tokensGenerated).toBe(tokens);
    } finally {
      await x.close();
    }
  });
});
