// The fast ByteLevel pre-tokenizer (router/tokenizer/byte-level.ts) is the library's own function:
// on random text (any UTF-16, lone surrogates included) it gives the same pieces for every
// setting, alone and inside a Sequence, and a tokenizer with it encodes as one without it.
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ByteLevelPreTokenizer, SequencePreTokenizer, SplitPreTokenizer, Tokenizer as LibTokenizer } from '@huggingface/tokenizers';
import { byteLevelPiece, speedUpByteLevel } from '../../router/tokenizer/byte-level.ts';
import { fixture, LLAMA3_DIR, QWEN3_DIR, runs } from './fixtures.ts';

type Pre = { pre_tokenize(t: string | string[]): string[]; pre_tokenize_text(t: string): string[] };

const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 80 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.constantFrom("Hello world, it's 2026!\n\n  x", '你好 🙂 naïve\r\n', '\uD800a\uDC00', ' '));

describe('the fast ByteLevel pre-tokenizer', () => {
  it('gives the library pre-tokenizer\'s pieces for every add_prefix_space / use_regex setting', () => {
    const configs = [false, true].flatMap((add_prefix_space) => [false, true].map((use_regex) => ({ type: 'ByteLevel', add_prefix_space, use_regex, trim_offsets: false })));
    const pairs = configs.map((c) => {
      const fast = new ByteLevelPreTokenizer(c as never);
      speedUpByteLevel(fast);
      return { lib: new ByteLevelPreTokenizer(c as never) as unknown as Pre, fast: fast as unknown as Pre };
    });
    fc.assert(
      fc.property(text, fc.array(text, { maxLength: 4 }), (t, many) => {
        for (const { lib, fast } of pairs) {
          expect(fast.pre_tokenize_text(t)).toEqual(lib.pre_tokenize_text(t));
          expect(fast.pre_tokenize(t)).toEqual(lib.pre_tokenize(t));
          expect(fast.pre_tokenize(many)).toEqual(lib.pre_tokenize(many));
        }
      }),
      { numRuns: runs() },
    );
  });

  it('is found inside a Sequence, and the Split before it is left alone', () => {
    const cfg = JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8')).pre_tokenizer;
    const lib = new SequencePreTokenizer(cfg) as unknown as Pre & { tokenizers: unknown[] };
    const fast = new SequencePreTokenizer(cfg) as unknown as Pre & { tokenizers: unknown[] };
    speedUpByteLevel(fast);
    expect(fast.tokenizers[0]).toBeInstanceOf(SplitPreTokenizer);
    expect(Object.hasOwn(fast.tokenizers[0] as object, 'pre_tokenize_text')).toBe(false);
    expect(Object.hasOwn(fast.tokenizers[1] as object, 'pre_tokenize_text')).toBe(true);
    fc.assert(
      fc.property(text, (t) => {
        expect(fast.pre_tokenize(t)).toEqual(lib.pre_tokenize(t));
      }),
      { numRuns: runs() },
    );
  });

  it('maps ASCII and multi-byte text as TextEncoder + the byte table do', () => {
    const table = Array.from({ length: 256 }, (_, b) => String.fromCharCode(b + 256));
    const enc = new TextEncoder();
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 600 }), (t) => {
        expect(byteLevelPiece(t, table)).toBe(Array.from(enc.encode(t), (b) => table[b]).join(''));
      }),
      { numRuns: runs() },
    );
  });

  it("leaves the real tokenizers' encodings as the library's own pipeline gives them", () => {
    const pairs = ([['qwen3', QWEN3_DIR], ['llama3', LLAMA3_DIR]] as const).map(([name, dir]) => {
      const lib = new LibTokenizer(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')));
      return { lib, ours: fixture(name) };
    });
    fc.assert(
      fc.property(text, fc.boolean(), (t, special) => {
        for (const { lib, ours } of pairs) expect(ours.encode(t, { addSpecialTokens: special })).toEqual(t === '' && !special ? [] : lib.encode(t, { add_special_tokens: special }).ids);
      }),
      { numRuns: runs(100) },
    );
  });
});
