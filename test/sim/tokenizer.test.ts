// Simulated workers with a real tokenizer (Qwen3's and Llama 3's, from the fixture packages), on
// the wire: ids from the tokenizer's vocabulary ending on its EOS, text prompts tokenized as
// SGLang's tokenizer manager does, `text` as SGLang's detokenizer manager writes it (whole
// characters only, stop strings cut, skip_special_tokens), and the same through worker processes.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { SglangDetokenizer, findPrintableText } from '../../sim/detokenizer.ts';
import { runModel } from '../../sim/model.ts';
import { vocabularyFor } from '../../sim/vocab.ts';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { LLAMA3_DIR, QWEN3_DIR, fixture } from '../tokenizer/fixtures.ts';
import { openSse, postJson } from './helpers.ts';

const qwen = fixture('qwen3');
const llama = fixture('llama3');
/** What SGLang's text is made of: HF decode without cleanup (SGLang loads tokenizers with clean_up_tokenization_spaces=False). */
const sglangDecode = (tok: typeof qwen, ids: number[], skipSpecialTokens = true) => tok.decode(ids, { skipSpecialTokens, cleanUpTokenizationSpaces: false });
const PROMPT = 'Write a short note about migrating streams between workers.';

type Json = Record<string, unknown>;
const meta = (b: unknown) => (b as { meta_info: Json }).meta_info;
const ids = (b: unknown) => (b as { output_ids: number[] }).output_ids;
const text = (b: unknown) => (b as { text: string }).text;

let qw: SimWorker; // Qwen3, text mode, cumulative
let qwi: SimWorker; // Qwen3, text mode, incremental
let qeos: SimWorker; // Qwen3, text mode, EOS ranked first in one state out of 3
let lw: SimWorker; // Llama 3, text mode
let tokOnly: SimWorker; // Qwen3's vocabulary, token-only

beforeAll(async () => {
  [qw, qwi, qeos, lw, tokOnly] = await Promise.all([
    startWorker({ text: true, tokenizer: QWEN3_DIR }),
    startWorker({ text: true, tokenizer: QWEN3_DIR, incremental: true }),
    startWorker({ text: true, tokenizer: QWEN3_DIR, eosEvery: 3 }),
    startWorker({ text: true, tokenizer: LLAMA3_DIR }),
    startWorker({ tokenizer: QWEN3_DIR }),
  ]);
});

afterAll(async () => {
  await Promise.all([qw, qwi, qeos, lw, tokOnly].map((w) => w?.close()));
});

describe('the model over a real vocabulary', () => {
  it("generates the tokenizer's ordinary ids and ends on its EOS, as runModel over the same vocabulary says", async () => {
    const prompt = qwen.encode(PROMPT);
    const r = await postJson(`${tokOnly.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 400, temperature: 0 } });
    const out = ids(r.body);
    expect(meta(r.body).finish_reason).toEqual({ type: 'stop', matched: 151645 });
    expect(out.at(-1)).toBe(151645);
    for (const id of out.slice(0, -1)) {
      expect(id).toBeLessThan(qwen.vocabSize);
      expect(qwen.isSpecial(id)).toBe(false);
    }
    expect(out).toEqual(runModel(prompt, { max_new_tokens: 400, temperature: 0 }, vocabularyFor({ tokenizer: QWEN3_DIR }).model).output_ids);
    // The tokenizer's vocabulary size bounds prompts too.
    const refused = await postJson(`${tokOnly.url}/generate`, { input_ids: [1, qwen.vocabSize] });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`contains values greater than the vocab size (${qwen.vocabSize})`);
  });

  it('--vocab-size N: ids in [3, N), EOS 2', async () => {
    const w = await startWorker({ vocabSize: 1000, eosEvery: 8 });
    try {
      const r = await postJson(`${w.url}/generate`, { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 300, temperature: 0 } });
      const out = ids(r.body);
      expect(out.at(-1)).toBe(2);
      for (const id of out.slice(0, -1)) expect(id >= 3 && id < 1000).toBe(true);
    } finally {
      await w.close();
    }
    await expect(startWorker({ vocabSize: 100 })).rejects.toThrow(/at least 512/);
    await expect(startWorker({ vocabSize: 1000, tokenizer: QWEN3_DIR })).rejects.toThrow(/not both/);
  });
});

describe('SGLang text mode with a real tokenizer', () => {
  it('tokenizes a text prompt as the tokenizer manager does (special tokens added: Llama 3 gets its BOS)', async () => {
    const q = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: { max_new_tokens: 1 } });
    expect(meta(q.body).prompt_tokens).toBe(qwen.encode(PROMPT).length);
    const l = await postJson(`${lw.url}/generate`, { text: PROMPT, sampling_params: { max_new_tokens: 1 } });
    expect(meta(l.body).prompt_tokens).toBe(llama.encode(PROMPT, { addSpecialTokens: false }).length + 1);
    // text and input_ids together: input_ids win, as in SGLang.
    const both = await postJson(`${qw.url}/generate`, { text: PROMPT, input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 1 } });
    expect(meta(both.body).prompt_tokens).toBe(3);
  });

  it("text is the decode of the output ids, the EOS cut, without cleanup (even for Llama 3's config)", async () => {
    for (const [w, tok] of [
      [qw, qwen],
      [lw, llama],
    ] as const) {
      for (const maxNew of [20, 120]) {
        const r = await postJson(`${w.url}/generate`, { text: PROMPT, sampling_params: { max_new_tokens: maxNew, temperature: 0.7, sampling_seed: maxNew } });
        const out = ids(r.body);
        const stopped = (meta(r.body).finish_reason as Json).type === 'stop';
        expect(text(r.body)).toBe(sglangDecode(tok, stopped ? out.slice(0, -1) : out));
      }
    }
  });

  it('skip_special_tokens (default true) and spaces_between_special_tokens (no effect on a fast tokenizer)', async () => {
    const body = (sp: Json) => ({ text: PROMPT, sampling_params: { max_new_tokens: 12, ignore_eos: true, ...sp } });
    const plain = await postJson(`${qeos.url}/generate`, body({}));
    const out = ids(plain.body);
    expect(out).toContain(151645);
    expect(text(plain.body)).not.toContain('<|im_end|>');
    const shown = await postJson(`${qeos.url}/generate`, body({ skip_special_tokens: false }));
    expect(text(shown.body)).toBe(sglangDecode(qwen, out, false));
    expect(text(shown.body)).toContain('<|im_end|>');
    const noSpaces = await postJson(`${qeos.url}/generate`, body({ skip_special_tokens: false, spaces_between_special_tokens: false }));
    expect(text(noSpaces.body)).toBe(text(shown.body));
  });

  it('streams: incremental pieces and cumulative texts fold to the unary text; no piece ends in half a character', async () => {
    const body = { text: PROMPT, sampling_params: { max_new_tokens: 150, ignore_eos: true, temperature: 0.9, sampling_seed: 7 } };
    const unary = text((await postJson(`${qw.url}/generate`, body)).body);
    const inc = await openSse(`${qwi.url}/generate`, { ...body, stream: true });
    await inc.ended;
    const pieces = inc.chunks().map((c) => c.text as string);
    expect(pieces.join('')).toBe(unary);
    for (const p of pieces.slice(0, -1)) expect(p.endsWith('\uFFFD')).toBe(false);
    const cum = await openSse(`${qw.url}/generate`, { ...body, stream: true });
    await cum.ended;
    const texts = cum.chunks().map((c) => c.text as string);
    for (let i = 1; i < texts.length; i++) expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
    expect(texts.at(-1)).toBe(unary);
  });

  it('a stop string spanning two tokens ends the answer and is cut; streams never show its start; no_stop_trim keeps it', async () => {
    const sp = { max_new_tokens: 40, ignore_eos: true, temperature: 0 };
    const full = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: sp });
    const out = ids(full.body);
    const whole = text(full.body);
    // A stop string made of the end of token k and the start of token k + 1, first found there.
    let k = 5;
    let stop = '';
    for (; k < out.length - 1; k++) {
      const a = sglangDecode(qwen, [out[k]!]);
      const b = sglangDecode(qwen, [out[k + 1]!]);
      if (a.length < 2 || b.length < 2 || (a + b).includes('\uFFFD')) continue;
      stop = a.slice(-2) + b.slice(0, 2);
      const at = sglangDecode(qwen, out.slice(0, k + 1)).length - 2;
      if (whole.indexOf(stop) === at) break;
    }
    expect(stop).not.toBe('');
    const upTo = sglangDecode(qwen, out.slice(0, k + 2));
    const cut = whole.slice(0, whole.indexOf(stop));

    const stopped = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: { ...sp, stop: ['never-there', stop] } });
    expect(meta(stopped.body).finish_reason).toEqual({ type: 'stop', matched: stop });
    expect(ids(stopped.body)).toEqual(out.slice(0, k + 2));
    expect(text(stopped.body)).toBe(cut);

    const inc = await openSse(`${qwi.url}/generate`, { text: PROMPT, stream: true, sampling_params: { ...sp, stop } });
    await inc.ended;
    expect(inc.chunks().map((c) => c.text).join('')).toBe(cut);

    const kept = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: { ...sp, stop, no_stop_trim: true } });
    expect(text(kept.body)).toBe(upTo);
  });

  it('a stop token is cut from the text unless no_stop_trim; stop_regex reports its pattern', async () => {
    const sp = { max_new_tokens: 30, ignore_eos: true, temperature: 0 };
    const out = ids((await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: sp })).body);
    const stopId = out[9]!;
    const first = out.indexOf(stopId);
    const r = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: { ...sp, stop_token_ids: [stopId] } });
    expect(meta(r.body).finish_reason).toEqual({ type: 'stop', matched: stopId });
    expect(text(r.body)).toBe(sglangDecode(qwen, out.slice(0, first)));
    const kept = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: { ...sp, stop_token_ids: [stopId], no_stop_trim: true } });
    expect(text(kept.body)).toBe(sglangDecode(qwen, out.slice(0, first + 1)));
    const re = await postJson(`${qw.url}/generate`, { text: PROMPT, sampling_params: { ...sp, stop_regex: '[A-Za-z]{3}' } });
    expect(meta(re.body).finish_reason).toEqual({ type: 'stop', matched: '[A-Za-z]{3}' });
  });

  it("return_text_in_logprobs: each entry's text is that token decoded alone, special tokens kept", async () => {
    const r = await postJson(`${qeos.url}/generate`, { text: PROMPT, return_logprob: true, return_text_in_logprobs: true, top_logprobs_num: 2, sampling_params: { max_new_tokens: 8, ignore_eos: true } });
    for (const [, id, t] of meta(r.body).output_token_logprobs as [number, number, string][]) expect(t).toBe(sglangDecode(qwen, [id], false));
  });
});

describe("SGLang's detokenizer manager, step by step", () => {
  it('holds back a character split across tokens, then sends it whole', () => {
    const prompt = qwen.encode('Say:');
    const out = qwen.encode(' melting 🫠 face 日本 end', { addSpecialTokens: false });
    const d = new SglangDetokenizer(qwen, prompt, { skipSpecialTokens: true, spacesBetweenSpecialTokens: true });
    const pieces = out.map((id) => d.step([id], null, false));
    expect(pieces.join('') + d.step([], { type: 'length', length: out.length }, false)).toBe(' melting 🫠 face 日本 end');
    expect(pieces.some((p) => p.includes('\uFFFD'))).toBe(false);
    expect(pieces).toContain('🫠');
  });

  it("find_printable_text: up to the last space, whole CJK characters, everything before a newline", () => {
    expect(findPrintableText('hello wor\uFFFD')).toBe('hello ');
    expect(findPrintableText('line\n')).toBe('line\n');
    expect(findPrintableText('日本')).toBe('日本');
    expect(findPrintableText('日本\uFFFD')).toBe('日本');
    expect(findPrintableText('𠀀\uFFFD')).toBe('𠀀');
    expect(findPrintableText('nospace\uFFFD')).toBe('');
  });
});

describe('worker processes with --tokenizer / --vocab-size', () => {
  let sgl: SimCluster;
  let vl: SimCluster;
  beforeAll(async () => {
    [sgl, vl] = await Promise.all([
      startCluster({ workers: 1, port: 0, text: true, incremental: true, tokenizer: QWEN3_DIR, modelPath: 'qwen3-sim' }),
      startCluster({ workers: 1, port: 0, format: 'vllm', tokenizer: QWEN3_DIR }),
    ]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([sgl?.stop(), vl?.stop()]);
  });

  it('an SGLang text worker process answers as the in-process one with the same weights', async () => {
    const body = { text: PROMPT, stream: true, sampling_params: { max_new_tokens: 60, ignore_eos: true, temperature: 0 } };
    const s = await openSse(`${sgl.workers()[0]!.url}/generate`, body);
    await s.ended;
    const chunks = s.chunks();
    const local = await startWorker({ text: true, tokenizer: QWEN3_DIR, modelPath: 'qwen3-sim' });
    try {
      const u = await postJson(`${local.url}/generate`, { ...body, stream: false });
      expect(chunks.map((c) => c.text).join('')).toBe(text(u.body));
      expect(chunks.flatMap((c) => c.output_ids as number[])).toEqual(ids(u.body));
    } finally {
      await local.close();
    }
    const info = (await (await fetch(`${sgl.workers()[0]!.url}/model_info`)).json()) as Json;
    expect(info).toMatchObject({ model_path: 'qwen3-sim', tokenizer_path: QWEN3_DIR });
  });

  it("a vLLM worker process takes the tokenizer's vocabulary and EOS (its API stays token-only)", async () => {
    const r = await postJson(`${vl.workers()[0]!.url}/inference/v1/generate`, { token_ids: qwen.encode(PROMPT), sampling_params: { max_tokens: 400, temperature: 0 } });
    const choice = (r.body as { choices: { token_ids: number[]; finish_reason: string }[] }).choices[0]!;
    expect(choice.finish_reason).toBe('stop');
    expect(choice.token_ids.at(-1)).toBe(151645);
    for (const id of choice.token_ids.slice(0, -1)) expect(qwen.isSpecial(id)).toBe(false);
  });

  it('refuses a directory without tokenizer.json, and --tokenizer with --vocab-size', async () => {
    await expect(startCluster({ workers: 1, tokenizer: '/nonexistent/model' })).rejects.toThrow(/has no tokenizer\.json/);
    await expect(startCluster({ workers: 1, tokenizer: QWEN3_DIR, vocabSize: 1000 })).rejects.toThrow(/not both/);
  });
});

describe('baton sim flags', () => {
  const ROOT = fileURLToPath(new URL('../../', import.meta.url));
  it.each([
    [['--tokenizer', QWEN3_DIR, '--vocab-size', '1000'], /--tokenizer sets the vocabulary: give --tokenizer or --vocab-size, not both/],
    [['--tokenizer', '/nonexistent/model'], /--tokenizer \/nonexistent\/model: no tokenizer\.json there/],
    [['--vocab-size', '10'], /--vocab-size must be an integer >= 512/],
  ])('%j: one line, exit 2', (args, message) => {
    const r = spawnSync(process.execPath, ['bin/baton.js', 'sim', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
  });
});
