// SGLang conformance, part 1: the HTTP-level assertions of SGLang's own /generate tests, ported
// to the token-only simulator (see docs/conformance.md for the file, function and commit of each).
//
//   test/registered/tokenizer/test_skip_tokenizer_init.py   TestSkipTokenizerInit
//   test/registered/core/test_srt_endpoint.py               TestSRTEndpoint (token-only forms)
//   python/sglang/test/kits/logprob_kit.py                  run_logprob_check & co.
//
// Every test runs on every target of targets.ts. Exact token ids come from the simulator's
// reference model (runModel in sim/model.ts); what needs a real model (text content, real logprob
// values) is ported as the structural and consistency checks SGLang's tests make.
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL, runModel } from '../../sim/model.ts';
import { TARGETS, useTarget } from './targets.ts';
import { fold, byIndex, generate, meta, outputIds, post, request, stream, uniquePrompt, type Json, type LpEntry } from './client.ts';

const EOS = DEFAULT_MODEL.eosTokenId;

/** The first of a fixed family of prompts whose greedy answer ends the way `want` says (reference model). */
function promptWhere(maxNew: number, want: 'length' | 'stop'): number[] {
  for (let k = 0; k < 1000; k++) {
    const p = [1000 + k, 2000 + 3 * k, 3000 + 7 * k, 4000 + 11 * k, 5000 + 13 * k, 6000 + 17 * k];
    if (runModel(p, { max_new_tokens: maxNew, temperature: 0, stop_token_ids: [EOS] }).finish_reason.type === want) return p;
  }
  throw new Error(`no prompt found that ends by ${want}`);
}

describe.each(TARGETS)('$name', (spec) => {
  const t = useTarget(spec);

  // ---- test_skip_tokenizer_init.py: TestSkipTokenizerInit ------------------------------------

  /** run_decode's request (get_request_json): temperature 0 (n = 1) or 0.5, stop at EOS, logprob_start_len 0. */
  const decodeRequest = (inputIds: number[], o: { maxNew?: number; returnLogprob?: boolean; topLogprobsNum?: number; n?: number; stream?: boolean } = {}) => ({
    input_ids: inputIds,
    sampling_params: { temperature: (o.n ?? 1) === 1 ? 0 : 0.5, max_new_tokens: o.maxNew ?? 32, n: o.n ?? 1, stop_token_ids: [EOS] },
    stream: o.stream ?? false,
    return_logprob: o.returnLogprob ?? false,
    top_logprobs_num: o.topLogprobsNum ?? 0,
    logprob_start_len: 0,
  });

  /** run_decode's assert_one_item. */
  const assertOneItem = (item: Json, inputIds: number[], maxNew: number, returnLogprob: boolean, logprobStartLen = 0) => {
    const m = meta(item);
    const finish = m.finish_reason as Json;
    if (finish.type === 'stop') {
      expect(finish.matched).toBe(EOS);
    } else {
      expect(finish.type).toBe('length');
      expect(outputIds(item).length).toBe(m.completion_tokens);
      expect(outputIds(item).length).toBe(maxNew);
      expect(m.prompt_tokens).toBe(inputIds.length);
      if (returnLogprob) {
        let numInputLogprobs = inputIds.length - logprobStartLen;
        if (numInputLogprobs > inputIds.length) numInputLogprobs -= inputIds.length;
        expect((m.input_token_logprobs as unknown[]).length).toBe(numInputLogprobs);
        expect((m.output_token_logprobs as unknown[]).length).toBe(maxNew);
      }
    }
  };

  it('run_decode (test_simple_decode): token-only answer, length branch, equals the reference model', async () => {
    const p = promptWhere(32, 'length');
    const r = await generate(t.url, decodeRequest(p));
    expect(r.status).toBe(200);
    const item = r.body as Json;
    // --skip-tokenizer-init: no `text` key, only output_ids and meta_info.
    expect(item).not.toHaveProperty('text');
    assertOneItem(item, p, 32, false);
    expect(meta(item).finish_reason).toEqual({ type: 'length', length: 32 });
    expect(outputIds(item)).toEqual(runModel(p, { max_new_tokens: 32, temperature: 0, stop_token_ids: [EOS] }).output_ids);
  });

  it('run_decode (test_eos_behavior, max_new_tokens 256): stop branch matches the EOS id', async () => {
    const p = promptWhere(256, 'stop');
    const r = await generate(t.url, decodeRequest(p, { maxNew: 256 }));
    expect(r.status).toBe(200);
    assertOneItem(r.body as Json, p, 256, false);
    const ref = runModel(p, { max_new_tokens: 256, temperature: 0, stop_token_ids: [EOS] });
    expect(meta(r.body).finish_reason).toEqual({ type: 'stop', matched: EOS });
    expect(outputIds(r.body)).toEqual(ref.output_ids);
    expect(meta(r.body).completion_tokens).toBe(ref.output_ids.length);
  });

  it('run_decode (test_parallel_sample, n=3): a list of 3 items, each one a full answer', async () => {
    const p = promptWhere(32, 'length');
    const r = await generate(t.url, decodeRequest(p, { n: 3 }));
    expect(r.status).toBe(200);
    expect(Array.isArray(r.body)).toBe(true);
    const items = r.body as Json[];
    expect(items).toHaveLength(3);
    for (const item of items) assertOneItem(item, p, 32, false);
    // SGLang gives every sample of n > 1 its own rid.
    expect(new Set(items.map((x) => meta(x).id)).size).toBe(3);
  });

  it('run_decode (test_logprob, top_logprobs_num 0 and 3): input logprobs cover the prompt, output logprobs every token', async () => {
    const p = promptWhere(32, 'length');
    for (const top of [0, 3]) {
      const r = await generate(t.url, decodeRequest(p, { returnLogprob: true, topLogprobsNum: top }));
      expect(r.status).toBe(200);
      assertOneItem(r.body as Json, p, 32, true);
      const m = meta(r.body);
      if (top > 0) {
        expect((m.input_top_logprobs as unknown[]).length).toBe(p.length);
        expect((m.output_top_logprobs as unknown[][]).map((x) => x.length)).toEqual(Array(32).fill(top));
      } else {
        expect(m).not.toHaveProperty('output_top_logprobs');
      }
    }
  });

  it('run_decode_stream (test_simple_decode_stream): the stream adds up to the unary output_ids', async () => {
    const p = promptWhere(32, 'length');
    expect((await post(t.url + '/flush_cache', {})).status).toBe(200);
    const unary = await generate(t.url, decodeRequest(p));
    expect(unary.status).toBe(200);
    expect((await post(t.url + '/flush_cache', {})).status).toBe(200);
    const s = await stream(t.url, decodeRequest(p, { stream: true }));
    expect(s.status).toBe(200);
    expect(s.done).toBe(true);
    // SGLang's test runs --stream-output (incremental) and concatenates; a cumulative server's
    // last chunk is the whole answer. The suite folds per the target's mode.
    const folded = fold(s.chunks, t.incremental);
    expect(outputIds(folded)).toEqual(outputIds(unary.body));
    if (t.incremental) expect(s.chunks.flatMap((c) => outputIds(c))).toEqual(outputIds(unary.body));
    else expect(outputIds(s.chunks.at(-1))).toEqual(outputIds(unary.body));
  });

  // ---- test_srt_endpoint.py: TestSRTEndpoint (token-only forms) --------------------------------

  /** test_srt_endpoint's run_decode, with input_ids instead of text. */
  const srtDecode = (inputIds: number[] | number[][], o: { n?: number; stream?: boolean; returnLogprob?: boolean; top?: number; returnText?: boolean } = {}) => ({
    input_ids: inputIds,
    sampling_params: { temperature: (o.n ?? 1) === 1 ? 0 : 0.5, max_new_tokens: 16, n: o.n ?? 1 },
    stream: o.stream ?? false,
    return_logprob: o.returnLogprob ?? false,
    top_logprobs_num: o.top ?? 0,
    return_text_in_logprobs: o.returnText ?? false,
    logprob_start_len: 0,
  });
  const CAPITAL = [791, 6864, 315, 9822, 374]; // "The capital of France is" as Llama-3 ids (any valid ids would do)

  it('test_simple_decode: 200 with output_ids and meta_info', async () => {
    const r = await generate(t.url, srtDecode(CAPITAL));
    expect(r.status).toBe(200);
    expect(outputIds(r.body)).toEqual(runModel(CAPITAL, { max_new_tokens: 16, temperature: 0 }).output_ids);
  });

  it('test_simple_decode_batch: a one-prompt batch answers a one-item list', async () => {
    const r = await generate(t.url, srtDecode([CAPITAL]));
    expect(r.status).toBe(200);
    expect(Array.isArray(r.body)).toBe(true);
    expect(r.body as Json[]).toHaveLength(1);
    expect(outputIds((r.body as Json[])[0])).toEqual(runModel(CAPITAL, { max_new_tokens: 16, temperature: 0 }).output_ids);
  });

  it('test_parallel_sample_stream (n=3): chunks carry index 0..2, each sample ends once with a finish_reason', async () => {
    const s = await stream(t.url, srtDecode(CAPITAL, { n: 3, stream: true }));
    expect(s.status).toBe(200);
    expect(s.done).toBe(true);
    const groups = byIndex(s.chunks);
    expect([...groups.keys()].sort()).toEqual([0, 1, 2]);
    for (const chunks of groups.values()) {
      const finished = chunks.filter((c) => meta(c).finish_reason !== null);
      expect(finished).toHaveLength(1);
      expect(finished[0]).toBe(chunks.at(-1));
      const whole = fold(chunks, t.incremental);
      expect(outputIds(whole).length).toBe(meta(whole).completion_tokens);
    }
  });

  it('test_logprob (top_logprobs_num 5): every output token has a [logprob, id, text] entry and 5 alternatives', async () => {
    const r = await generate(t.url, srtDecode(CAPITAL, { returnLogprob: true, top: 5, returnText: true }));
    expect(r.status).toBe(200);
    const m = meta(r.body);
    const out = m.output_token_logprobs as LpEntry[];
    expect(out.map((e) => e[1])).toEqual(outputIds(r.body));
    for (const e of out) expect(e).toHaveLength(3);
    expect((m.output_top_logprobs as LpEntry[][]).every((x) => x.length === 5)).toBe(true);
    expect((m.input_token_logprobs as LpEntry[]).map((e) => e[1])).toEqual(CAPITAL);
  });

  it('test_logprob_start_len (batch of 2, start 4, 4 new tokens): prompt_tokens == start + len(input_token_logprobs)', async () => {
    const prompts = [
      [40, 617, 264, 1633, 1695, 4623, 389], // "I have a very good idea on"
      [15724, 374, 264, 7160, 77, 10470, 1938, 323], // "Today is a sunndy day and"
    ];
    const start = 4;
    const newTokens = 4;
    const r = await generate(t.url, {
      input_ids: prompts,
      sampling_params: { temperature: 0, max_new_tokens: newTokens, ignore_eos: true },
      return_logprob: true,
      top_logprobs_num: 5,
      return_text_in_logprobs: true,
      logprob_start_len: start,
    });
    expect(r.status).toBe(200);
    const items = r.body as Json[];
    expect(items).toHaveLength(2);
    items.forEach((res, i) => {
      const m = meta(res);
      const input = m.input_token_logprobs as LpEntry[];
      expect(m.prompt_tokens).toBe(start + input.length);
      // prompts[i].endswith(join of the input entries): in token-only form, the ids are the prompt's suffix.
      expect(input.map((x) => x[1])).toEqual(prompts[i]!.slice(prompts[i]!.length - input.length));
      expect(m.completion_tokens).toBe(newTokens);
      expect((m.output_token_logprobs as LpEntry[]).length).toBe(newTokens);
      expect((m.output_token_logprobs as LpEntry[]).map((x) => x[1])).toEqual(outputIds(res));
    });
  });

  it('test_logprob_with_chunked_prefill: long prompt, logprob_start_len -1, top 5: top-1 equals the greedy token', async () => {
    // SGLang's prompt is ~72k tokens on a 128k-context model; the simulator's context is 32768.
    const prompt = uniquePrompt(20_000);
    const newTokens = 4;
    const r = await generate(t.url, {
      input_ids: prompt,
      sampling_params: { temperature: 0, max_new_tokens: newTokens, ignore_eos: true },
      return_logprob: true,
      logprob_start_len: -1,
      top_logprobs_num: 5,
    });
    expect(r.status).toBe(200);
    const m = meta(r.body);
    expect(m.completion_tokens).toBe(newTokens);
    expect((m.output_token_logprobs as unknown[]).length).toBe(newTokens);
    expect((m.output_top_logprobs as unknown[]).length).toBe(newTokens);
    for (let i = 0; i < newTokens; i++) {
      expect((m.output_top_logprobs as LpEntry[][])[i]![0]).toEqual((m.output_token_logprobs as LpEntry[])[i]);
      expect((m.output_top_logprobs as LpEntry[][])[i]).toHaveLength(5);
    }
  });

  it('test_logprob_match: sampled output logprobs equal a prefill re-scoring of prompt + output (max |diff| < 0.35)', async () => {
    const runGenerate = (prompt: number[], maxNew: number) =>
      generate(t.url, {
        input_ids: prompt,
        sampling_params: { temperature: 1.0, max_new_tokens: maxNew, ignore_eos: true },
        return_logprob: true,
        return_text_in_logprobs: true,
        logprob_start_len: 0,
      });
    const prompt = [40, 617, 264, 1633, 1695, 4623, 389, 1268, 311]; // "I have a very good idea on how to"
    const gen = await runGenerate(prompt, 512);
    expect(gen.status).toBe(200);
    const g = meta(gen.body);
    const outputLogprobs = (g.output_token_logprobs as LpEntry[]).map((x) => x[0]!);
    expect(outputLogprobs).toHaveLength(512);
    const numPromptTokens = g.prompt_tokens as number;
    const inputTokens = (g.input_token_logprobs as LpEntry[]).map((x) => x[1]);
    const outputTokens = (g.output_token_logprobs as LpEntry[]).map((x) => x[1]);
    const score = await runGenerate([...inputTokens, ...outputTokens], 0);
    expect(score.status).toBe(200);
    const scored = (meta(score.body).input_token_logprobs as LpEntry[]).slice(numPromptTokens).map((x) => x[0]!);
    expect(scored).toHaveLength(outputLogprobs.length);
    const maxDiff = Math.max(...outputLogprobs.map((v, i) => Math.abs(v - scored[i]!)));
    expect(maxDiff).toBeLessThan(0.35);
  });

  it('test_logprob_mixed (run_logprob_mixed_check → run_logprob_check): logprob shapes over 112 parameter combinations', async () => {
    // logprob_kit.run_logprob_mixed_check's defaults (test_logprob_mixed's 50k-token prompts do not fit the simulator's 32768 context).
    const args: [number, number, number, number, boolean, number][] = [];
    for (const inputLen of [200, 500, 1000, 2000])
      for (const outputLen of [4, 8])
        for (const startLen of [0, 100, 300, 800, 1998])
          for (const returnLogprob of [true, false])
            for (const top of [0, 5]) if (startLen < inputLen) args.push([inputLen, outputLen, 0, startLen, returnLogprob, top]);
    expect(args).toHaveLength(112);
    const failures: string[] = [];
    const check = async ([inputLen, outputLen, temperature, startLen, returnLogprob, top]: (typeof args)[number]) => {
      const tag = `(input ${inputLen}, output ${outputLen}, start ${startLen}, logprob ${returnLogprob}, top ${top})`;
      const r = await generate(t.url, {
        input_ids: Array.from({ length: inputLen }, (_, i) => i),
        sampling_params: { temperature, max_new_tokens: outputLen, ignore_eos: true },
        return_logprob: returnLogprob,
        logprob_start_len: startLen,
        top_logprobs_num: top,
      });
      const m = meta(r.body);
      const fail = (what: string) => failures.push(`${tag}: ${what}`);
      if (r.status !== 200 || !m) return fail(`status ${r.status} ${r.text.slice(0, 200)}`);
      if (m.prompt_tokens !== inputLen) fail(`prompt_tokens ${String(m.prompt_tokens)}`);
      if (m.completion_tokens !== outputLen) fail(`completion_tokens ${String(m.completion_tokens)}`);
      if (!returnLogprob) return;
      const input = m.input_token_logprobs as LpEntry[];
      const output = m.output_token_logprobs as LpEntry[];
      if (input.length + startLen !== m.prompt_tokens) fail(`len(input_token_logprobs) + start = ${input.length + startLen}`);
      if (output.length !== outputLen) fail(`len(output_token_logprobs) ${output.length}`);
      if (!top) return;
      const inputTop = m.input_top_logprobs as unknown[];
      const outputTop = m.output_top_logprobs as LpEntry[][];
      if (inputTop.length + startLen !== m.prompt_tokens) fail(`len(input_top_logprobs) + start = ${inputTop.length + startLen}`);
      if (outputTop.length !== outputLen) fail(`len(output_top_logprobs) ${outputTop.length}`);
      for (let i = 0; i < outputLen; i++) {
        if (outputTop[i]!.length !== top) fail(`len(output_top_logprobs[${i}]) ${outputTop[i]!.length}`);
        // temperature 0: the output token is the top-1 entry (ties may move it down among equals).
        let rank = 0;
        while (rank < outputTop[i]!.length && JSON.stringify(outputTop[i]![rank]) !== JSON.stringify(output[i])) {
          if (rank + 1 < outputTop[i]!.length && outputTop[i]![rank]![0] === outputTop[i]![rank + 1]![0]) rank++;
          else {
            fail(`output_token_logprobs[${i}] ${JSON.stringify(output[i])} is not top-1 ${JSON.stringify(outputTop[i]![0])}`);
            break;
          }
        }
      }
    };
    // ThreadPoolExecutor(8) in SGLang.
    const queue = [...args];
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let a = queue.shift(); a; a = queue.shift()) await check(a);
    }));
    expect(failures.length, `${failures.length} of 112 failed, e.g. ${failures.slice(0, 2).join(' | ')}`).toBe(0);
  });

  it('test_get_server_info (and _concurrent): max_total_num_tokens is an int, version a string', async () => {
    const replies = await Promise.all(Array.from({ length: 4 }, () => request(t.url + '/get_server_info')));
    for (const r of replies) {
      expect(r.status).toBe(200);
      const info = r.body as Json;
      expect(Number.isInteger(info.max_total_num_tokens)).toBe(true);
      expect(typeof info.version).toBe('string');
    }
  });

  it('test_logit_bias: a +100 bias forces every sampled token', async () => {
    const target = 12345; // any ordinary id (SGLang's 60704 is past the simulator's 32000 vocab)
    const r = await generate(t.url, {
      input_ids: CAPITAL,
      sampling_params: { temperature: 1.0, max_new_tokens: 4, logit_bias: { [String(target)]: 100.0 } },
      return_logprob: true,
    });
    expect(r.status).toBe(200);
    const sampled = (meta(r.body).output_token_logprobs as LpEntry[]).map((x) => x[1]);
    expect(sampled).toEqual(Array(4).fill(target));
  });

  it('test_forbidden_token: a -100 bias keeps a token out of the output', async () => {
    // Forbid the reference model's top-ranked first token, the one most likely to appear.
    const forbidden = runModel(CAPITAL, { max_new_tokens: 1, temperature: 0 }).output_ids[0]!;
    const r = await generate(t.url, {
      input_ids: CAPITAL,
      sampling_params: { temperature: 1.0, max_new_tokens: 50, logit_bias: { [String(forbidden)]: -100.0 } },
      return_logprob: true,
    });
    expect(r.status).toBe(200);
    const sampled = (meta(r.body).output_token_logprobs as LpEntry[]).map((x) => x[1]);
    expect(sampled.length).toBeGreaterThan(0);
    expect(sampled).not.toContain(forbidden);
  });

  it('test_logit_bias_isolation: a bias on one request does not leak into the next', async () => {
    const biased = 12345;
    const req = (bias: boolean) =>
      generate(t.url, {
        input_ids: CAPITAL,
        sampling_params: { temperature: 1.0, max_new_tokens: 4, ...(bias ? { logit_bias: { [String(biased)]: 100.0 } } : {}) },
        return_logprob: true,
      });
    const a = await req(true);
    const b = await req(false);
    const tokens = (x: unknown) => (meta(x).output_token_logprobs as LpEntry[]).map((e) => e[1]);
    expect(tokens(a.body).every((x) => x === biased)).toBe(true);
    expect(tokens(b.body).some((x) => x !== biased)).toBe(true);
  });

  // ---- logprob_kit.py ------------------------------------------------------------------------

  const PROBE_TOKEN_IDS = [1, 2, 10, 100, 1000]; // DEFAULT_PROBE_TOKEN_IDS
  const CROSS_MODE_PROMPTS = [CAPITAL, [849, 21435, 31228, 25213, 304, 4382, 3878, 25], [15724, 374, 264, 30298, 1938, 323, 358, 1093]];

  /** generate_with_logprobs: temperature 0, ignore_eos. */
  const withLogprobs = async (ids: number[], maxNew: number, top: number, tokenIds: number[] | null, start: number, returnText = false) => {
    const r = await generate(t.url, {
      input_ids: ids,
      sampling_params: { temperature: 0, ignore_eos: true, max_new_tokens: maxNew },
      return_logprob: true,
      top_logprobs_num: top,
      logprob_start_len: start,
      return_text_in_logprobs: returnText,
      ...(tokenIds ? { token_ids_logprob: tokenIds } : {}),
    });
    if (r.status !== 200) throw new Error(`Server returned ${r.status}: ${r.text.slice(0, 300)}`);
    return meta(r.body);
  };
  /** assertAlmostEqual(places=1). */
  const almost = (a: number, b: number, tag: string) => expect(Math.round((a - b) * 10) / 10, `${tag}: ${a} vs ${b}`).toBe(0);
  const compareTokenLps = (target: LpEntry[], baseline: LpEntry[], tag: string) => {
    expect(target.length, `[${tag}] length mismatch`).toBe(baseline.length);
    target.forEach((e, i) => {
      const b = baseline[i]!;
      if (e[0] === null || b[0] === null) return;
      expect(e[1], `[${tag}] token_id mismatch at pos ${i}`).toBe(b[1]);
      almost(e[0], b[0], `[${tag}] pos ${i}`);
    });
  };
  const compareTops = (target: (LpEntry[] | null)[], baseline: (LpEntry[] | null)[], tag: string) => {
    expect(target.length, `[${tag}] length mismatch`).toBe(baseline.length);
    target.forEach((tops, pos) => {
      const b = baseline[pos];
      if (!tops || !b) return;
      const dec = new Map(tops.filter((x) => x[0] !== null).map((x) => [x[1], x[0]!]));
      const scr = new Map(b.filter((x) => x[0] !== null).map((x) => [x[1], x[0]!]));
      const common = [...dec.keys()].filter((k) => scr.has(k));
      expect(common.length, `[${tag}] pos ${pos}: no common top-k IDs`).toBeGreaterThan(0);
      for (const id of common) almost(dec.get(id)!, scr.get(id)!, `[${tag}] pos ${pos} tid=${id}`);
    });
  };
  const compareIds = (target: (LpEntry[] | null)[], baseline: (LpEntry[] | null)[], tag: string) => {
    expect(target.length, `[${tag}] length mismatch`).toBe(baseline.length);
    target.forEach((entries, pos) => {
      const b = baseline[pos];
      if (!entries || !b) return;
      const dec = new Map(entries.map((x) => [x[1], x[0]]));
      const scr = new Map(b.map((x) => [x[1], x[0]]));
      expect([...dec.keys()].sort(), `[${tag}] pos ${pos}: token IDs differ`).toEqual([...scr.keys()].sort());
      for (const [id, v] of dec) almost(v!, scr.get(id)!, `[${tag}] pos ${pos} tid=${id}`);
    });
  };

  it('run_logprob_cross_mode_check: decode logprobs (token, top-k, token_ids_logprob) equal prefill scoring of the same sequence', async () => {
    for (const [round, prompt] of CROSS_MODE_PROMPTS.entries()) {
      const tag = `round ${round}`;
      const m = await withLogprobs(prompt, 32, 5, PROBE_TOKEN_IDS, 0);
      const P = m.prompt_tokens as number;
      const fullSequence = [...(m.input_token_logprobs as LpEntry[]).map((x) => x[1]), ...(m.output_token_logprobs as LpEntry[]).map((x) => x[1])];
      const s = await withLogprobs(fullSequence, 0, 5, PROBE_TOKEN_IDS, 0);
      const sIn = s.input_token_logprobs as LpEntry[];
      compareTokenLps(m.output_token_logprobs as LpEntry[], sIn.slice(P), `${tag} output_token_logprobs`);
      compareTokenLps(m.input_token_logprobs as LpEntry[], sIn.slice(0, P), `${tag} input_token_logprobs`);
      const sTop = s.input_top_logprobs as (LpEntry[] | null)[];
      compareTops(m.output_top_logprobs as LpEntry[][], sTop.slice(P), `${tag} output_top_logprobs`);
      compareTops(m.input_top_logprobs as (LpEntry[] | null)[], sTop.slice(0, P), `${tag} input_top_logprobs`);
      expect(m.output_token_ids_logprobs, `${tag}: output_token_ids_logprobs`).toBeDefined();
      expect(s.input_token_ids_logprobs, `${tag}: input_token_ids_logprobs of the scoring`).toBeDefined();
      const sIds = s.input_token_ids_logprobs as (LpEntry[] | null)[];
      compareIds(m.output_token_ids_logprobs as LpEntry[][], sIds.slice(P), `${tag} output_token_ids_logprobs`);
      if (m.input_token_ids_logprobs != null) compareIds(m.input_token_ids_logprobs as (LpEntry[] | null)[], sIds.slice(0, P), `${tag} input_token_ids_logprobs`);
      expect((m.input_token_logprobs as unknown[]).length, `${tag}: input_token_logprobs length != prompt_tokens`).toBe(P);
    }
  });

  it('run_logprob_start_len_check: for start in [0, 1, P//2, P-1], input logprob lists have P - start entries', async () => {
    for (const prompt of CROSS_MODE_PROMPTS) {
      const P = (await withLogprobs(prompt, 1, 0, null, -1)).prompt_tokens as number;
      for (const sl of [0, 1, Math.floor(P / 2), P - 1]) {
        const m = await withLogprobs(prompt, 8, 5, null, sl);
        expect((m.input_token_logprobs as unknown[]).length, `start_len=${sl}: input_token_logprobs len`).toBe(P - sl);
        expect((m.input_top_logprobs as unknown[]).length, `start_len=${sl}: input_top_logprobs len`).toBe(P - sl);
        expect((m.output_token_logprobs as unknown[]).length).toBe(8);
        expect(m.prompt_tokens).toBe(sl + (m.input_token_logprobs as unknown[]).length);
      }
    }
  });

  it('logprob structure: top lists sorted descending, logprobs <= 0, the greedy token is top-1 and equals the reference model', async () => {
    const prompt = CROSS_MODE_PROMPTS[1]!;
    const m = await withLogprobs(prompt, 16, 5, null, 0);
    const ref = runModel(prompt, { max_new_tokens: 16, temperature: 0, ignore_eos: true, top_logprobs_num: 5 });
    const out = m.output_token_logprobs as LpEntry[];
    expect(out.map((x) => x[1])).toEqual(ref.output_ids);
    expect(out.map((x) => x[0])).toEqual(ref.output_logprobs);
    const tops = m.output_top_logprobs as LpEntry[][];
    tops.forEach((list, i) => {
      expect(list.map((x) => [x[0], x[1]])).toEqual(ref.output_top_logprobs[i]);
      for (let j = 1; j < list.length; j++) expect(list[j]![0]!).toBeLessThanOrEqual(list[j - 1]![0]!);
      expect(list.every((x) => x[0]! <= 0)).toBe(true);
      expect(list[0]).toEqual(out[i]);
    });
    const inTops = m.input_top_logprobs as (LpEntry[] | null)[];
    expect(inTops).toHaveLength(prompt.length);
    for (const list of inTops) if (list) for (let j = 1; j < list.length; j++) expect(list[j]![0]!).toBeLessThanOrEqual(list[j - 1]![0]!);
    // The first prompt position has nothing before it: a null logprob.
    expect((m.input_token_logprobs as LpEntry[])[0]![0]).toBeNull();
  });

  it('return_text_in_logprobs under --skip-tokenizer-init: the text slots are null', async () => {
    const m = await withLogprobs(CAPITAL, 4, 2, null, 0, true);
    for (const e of [...(m.input_token_logprobs as LpEntry[]), ...(m.output_token_logprobs as LpEntry[])]) expect(e[2]).toBeNull();
  });
});
