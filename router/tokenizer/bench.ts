// `npm run bench`'s tokenizer row: the time to turn a chat request of about 4k prompt tokens into
// ids (chat template + encode, what the OpenAI front does per request), plus load and decode times.

import { performance } from 'node:perf_hooks';
import { loadTokenizer } from './load.ts';
import type { ChatMessage, Tokenizer } from './types.ts';

export interface ChatTokenizeTiming {
  /** Prompt tokens of the chat request timed. */
  tokens: number;
  iterations: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  /** Decoding those ids back to text (skip_special_tokens), mean. */
  decodeMeanMs: number;
}

/** Varied text: words, numbers, punctuation, accents, CJK and emoji, so every pre-tokenizer branch runs. */
const WORDS = (
  'the router keeps every stream alive while workers fail , and 42 requests migrate in 7 ms ; ' +
  'naïve café déjà vu — “quoted” (parenthesised) [bracketed] {braced} 日本語のテキスト 中文文本 🚀 🔥 ' +
  "it's don't we'll x = f(y) + 3.14159 * z_2 / 1e-6 https://example.com/a?b=c&d=e\n"
).split(' ');

/** A system + user conversation whose rendered prompt is about `targetTokens` tokens. */
export function chatOfTokens(tok: Tokenizer, targetTokens = 4096): ChatMessage[] {
  const make = (words: number): ChatMessage[] => {
    let body = '';
    for (let i = 0; i < words; i++) body += WORDS[(i * 7) % WORDS.length] + ' ';
    return [
      { role: 'system', content: 'You are a helpful assistant. Answer briefly.' },
      { role: 'user', content: body.trimEnd() },
    ];
  };
  // Tokens grow about linearly with words: two probes, then one correction.
  let words = targetTokens;
  for (let i = 0; i < 3; i++) {
    const n = tok.encodeChat(make(words), { addGenerationPrompt: true }).length;
    words = Math.max(1, Math.round((words * targetTokens) / n));
  }
  return make(words);
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** Times encodeChat of a ~targetTokens chat request (after a warm-up), and decode of its ids. */
export function timeChatTokenize(tok: Tokenizer, opts: { targetTokens?: number; iterations?: number } = {}): ChatTokenizeTiming {
  const messages = chatOfTokens(tok, opts.targetTokens ?? 4096);
  const iterations = opts.iterations ?? 30;
  let ids = tok.encodeChat(messages, { addGenerationPrompt: true });
  for (let i = 0; i < 3; i++) ids = tok.encodeChat(messages, { addGenerationPrompt: true });
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    ids = tok.encodeChat(messages, { addGenerationPrompt: true });
    times.push(performance.now() - t0);
  }
  let decodeTotal = 0;
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    tok.decode(ids);
    decodeTotal += performance.now() - t0;
  }
  const sorted = [...times].sort((a, b) => a - b);
  return {
    tokens: ids.length,
    iterations,
    meanMs: times.reduce((a, b) => a + b, 0) / iterations,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    decodeMeanMs: decodeTotal / iterations,
  };
}

/** Loads the tokenizer in `dir` (timed) and times a ~4k-token chat request on it. */
export function benchTokenizer(dir: string, opts: { targetTokens?: number; iterations?: number } = {}): ChatTokenizeTiming & { loadMs: number; name: string } {
  const t0 = performance.now();
  const tok = loadTokenizer(dir);
  const loadMs = performance.now() - t0;
  return { name: tok.name, loadMs, ...timeChatTokenize(tok, opts) };
}
