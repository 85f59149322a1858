// The fast paths of router/tokenizer/speedups.ts are the library's own functions: on random text
// (any UTF-16, lone surrogates included) the ByteLevel and Split pre-tokenizers give the same
// pieces for every setting, alone and inside a Sequence, and the real tokenizers encode with them
// as the unpatched library does.
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ByteLevelPreTokenizer, DigitsPreTokenizer, MetaspacePreTokenizer, PunctuationPreTokenizer, SequencePreTokenizer, SplitPreTokenizer, Tokenizer as LibTokenizer, WhitespacePreTokenizer } from '@huggingface/tokenizers';
import { byteLevelPiece, speedUpPreTokenizer } from '../../router/tokenizer/speedups.ts';
import { fixture, LLAMA3_DIR, QWEN3_DIR, runs } from './fixtures.ts';

type Pre = { pre_tokenize(t: string | string[]): string[]; pre_tokenize_text(t: string): string[] };

const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 80 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.constantFrom("Hello world, it's 2026!\n\n  x", '你好 🙂 naïve\r\n', '\uD800a\uDC00', ' '));

describe('the fast pre-tokenizers', () => {
  it('gives the library pre-tokenizer\'s pieces for every add_prefix_space / use_regex setting', () => {
    const configs = [false, true].flatMap((add_prefix_space) => [false, true].map((use_regex) => ({ type: 'ByteLevel', add_prefix_space, use_regex, trim_offsets: false })));
    const pairs = configs.map((c) => {
      const fast = new ByteLevelPreTokenizer(c as never);
      speedUpPreTokenizer(fast);
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

  it("are found inside a Sequence (Qwen3's Split + ByteLevel), and give its pieces", () => {
    const cfg = JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8')).pre_tokenizer;
    const lib = new SequencePreTokenizer(cfg) as unknown as Pre & { tokenizers: unknown[] };
    const fast = new SequencePreTokenizer(cfg) as unknown as Pre & { tokenizers: unknown[] };
    speedUpPreTokenizer(fast);
    expect(fast.tokenizers[0]).toBeInstanceOf(SplitPreTokenizer);
    for (const inner of fast.tokenizers) expect(Object.hasOwn(inner as object, 'pre_tokenize_text')).toBe(true);
    fc.assert(
      fc.property(text, (t) => {
        expect(fast.pre_tokenize(t)).toEqual(lib.pre_tokenize(t));
      }),
      { numRuns: runs() },
    );
  });

  it('split as the library does for every Split behaviour, patterns that match empty strings included', () => {
    const patterns = [{ Regex: "(?i:'s|'t)|\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s+(?!\\S)|\\s+" }, { Regex: 'x*' }, { Regex: '(?=a)' }, { String: ' ' }, { String: 'ab' }];
    const pairs = patterns.flatMap((pattern) =>
      ['Isolated', 'Removed', 'MergedWithPrevious'].flatMap((behavior) =>
        [false, true].map((invert) => {
          const cfg = { type: 'Split', pattern, behavior, invert } as never;
          const fast = new SplitPreTokenizer(cfg);
          speedUpPreTokenizer(fast);
          return { lib: new SplitPreTokenizer(cfg) as unknown as Pre, fast: fast as unknown as Pre };
        }),
      ),
    );
    fc.assert(
      fc.property(fc.oneof(text, fc.array(fc.constantFrom('a', 'x', ' ', '\uD83D\uDE00', '\uD800'), { maxLength: 12 }).map((xs) => xs.join(''))), fc.array(text, { maxLength: 3 }), (t, many) => {
        for (const { lib, fast } of pairs) {
          expect(fast.pre_tokenize(t)).toEqual(lib.pre_tokenize(t));
          expect(fast.pre_tokenize(many)).toEqual(lib.pre_tokenize(many));
        }
      }),
      { numRuns: runs() },
    );
  });

  it("leave other pre-tokenizers' pieces as they were, only flattened into one array", () => {
    const make = () => [new WhitespacePreTokenizer(), new PunctuationPreTokenizer({} as never), new DigitsPreTokenizer({ individual_digits: true } as never), new MetaspacePreTokenizer({ replacement: '\u2581', prepend_scheme: 'always', split: true } as never)] as unknown as Pre[];
    const lib = make();
    const fast = make();
    for (const p of fast) speedUpPreTokenizer(p);
    fc.assert(
      fc.property(text, fc.array(text, { maxLength: 3 }), (t, many) => {
        for (let i = 0; i < lib.length; i++) {
          expect(fast[i]!.pre_tokenize(t)).toEqual(lib[i]!.pre_tokenize(t));
          expect(fast[i]!.pre_tokenize(many)).toEqual(lib[i]!.pre_tokenize(many));
        }
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
