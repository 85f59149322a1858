// Loading, encoding and decoding with real tokenizers: ids checked against ids that the models'
// own tokenizers produce, decode against HF's fast-tokenizer rules (tokenizers' Rust decode, then
// transformers' cleanup), and the decoder chains of other tokenizer families against the
// examples in the Rust crate's own tests.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanUpTokenization, loadTokenizer } from '../../router/tokenizer/index.ts';
import { decoderChain } from '../../router/tokenizer/decoders.ts';
import { QWEN3_DIR, fixture, makeModelDir, runs } from './fixtures.ts';

const qwen = fixture('qwen3');
const llama = fixture('llama3');

const scratch = mkdtempSync(join(tmpdir(), 'baton-tok-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const modelDir = (name: string, from: string, files: Record<string, unknown>) => makeModelDir(scratch, name, from, files);

describe('loadTokenizer', () => {
  it('refuses a missing directory, a missing tokenizer.json and bad JSON, naming the file', () => {
    expect(() => loadTokenizer(join(scratch, 'nope'))).toThrow(/nope does not exist/);
    const empty = join(scratch, 'empty');
    mkdirSync(empty);
    expect(() => loadTokenizer(empty)).toThrow(/empty\/tokenizer\.json is missing/);
    writeFileSync(join(empty, 'tokenizer.json'), '{"model": ');
    expect(() => loadTokenizer(empty)).toThrow(/tokenizer\.json is not valid JSON/);
    const badConfig = modelDir('bad-config', QWEN3_DIR, { 'tokenizer_config.json': '{oops' });
    expect(() => loadTokenizer(badConfig)).toThrow(/bad-config\/tokenizer_config\.json is not valid JSON/);
  });

  it('reads vocabulary size, EOS, BOS and context length from the model files', () => {
    expect([qwen.vocabSize, qwen.eosTokenIds, qwen.bosTokenId, qwen.contextLength]).toEqual([151669, [151645], null, 131072]);
    // Llama 3's model_max_length is 1e30: not a context length.
    expect([llama.vocabSize, llama.eosTokenIds, llama.bosTokenId, llama.contextLength]).toEqual([128256, [128009], 128000, null]);
    expect(qwen.name).toBe('qwen3');
    expect(loadTokenizer(QWEN3_DIR).name).toBe('models');
  });

  it('takes EOS from generation_config.json (an int or a list) before tokenizer_config', () => {
    const config = JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8'));
    const list = modelDir('gen-list', QWEN3_DIR, { 'tokenizer_config.json': config, 'generation_config.json': { eos_token_id: [151645, 151643] } });
    expect(loadTokenizer(list, 'q').eosTokenIds).toEqual([151645, 151643]);
    const one = modelDir('gen-one', QWEN3_DIR, { 'tokenizer_config.json': config, 'generation_config.json': { eos_token_id: 151643 } });
    expect(loadTokenizer(one, 'q').eosTokenIds).toEqual([151643]);
    // The tokenizer's own EOS stays tokenizer_config's (vLLM's eos_token_id; the rest are stop ids).
    expect([loadTokenizer(list, 'q').eosTokenId, loadTokenizer(one, 'q').eosTokenId, qwen.eosTokenId, llama.eosTokenId]).toEqual([151645, 151645, 151645, 128009]);
  });
});

describe('encode', () => {
  // Ids of Meta's Llama 3 tokenizer for these strings, as listed in the tests of
  // belladoreai/llama3-tokenizer-js (taken from the official library's output).
  it.each<[string, number[]]>([
    ['grabbed', [59312, 2788]],
    [' grabbed', [30418]],
    ['           grabbed', [1881, 30418]],
    ['\n', [198]],
    [' \n', [720]],
    ['\ttabs\t\t\t\tout here', [3324, 3518, 573, 14294, 1618]],
    ['ax\n####\nboo', [710, 198, 71050, 34093]],
    ['镇', [104643]],
    ['🦙', [9468, 99, 247]],
    ['🦙Ꙋ', [9468, 99, 247, 166, 247, 232]],
    ['Ꙋ🦙', [166, 247, 232, 9468, 99, 247]],
    ['This is a test sentence.', [2028, 374, 264, 1296, 11914, 13]],
    ['<|start_header_id|>This text has special tokens<|eot_id|>', [128006, 2028, 1495, 706, 3361, 11460, 128009]],
  ])('Llama 3: %j', (text, ids) => {
    expect(llama.encode(text, { addSpecialTokens: false })).toEqual(ids);
  });

  it('Qwen3: the ids of its own chat prompt', () => {
    expect(qwen.encode('Hello world')).toEqual([9707, 1879]);
    expect(qwen.encode('<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n')).toEqual([151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198]);
  });

  it('adds special tokens as HF does by default: Llama 3 prepends BOS, Qwen3 adds nothing', () => {
    expect(llama.encode('I')).toEqual([128000, 40]);
    expect(llama.encode('I', { addSpecialTokens: false })).toEqual([40]);
    expect(llama.encode('')).toEqual([128000]);
    expect(qwen.encode('I')).toEqual(qwen.encode('I', { addSpecialTokens: false }));
    expect(qwen.encode('', { addSpecialTokens: false })).toEqual([]);
  });
});

describe('decode', () => {
  it('skips special tokens by default and keeps them when asked', () => {
    const ids = qwen.encode('<|im_start|>assistant\nHi<|im_end|>');
    expect(qwen.decode(ids)).toBe('assistant\nHi');
    expect(qwen.decode(ids, { skipSpecialTokens: false })).toBe('<|im_start|>assistant\nHi<|im_end|>');
    // <think> is an added token but not a special one: never skipped.
    expect(qwen.isSpecial(151667)).toBe(false);
    expect(qwen.decode([151667, 9707])).toBe('<think>Hello');
    expect(llama.decode([128000, 9906])).toBe('Hello');
  });

  it('drops ids outside the vocabulary, as the Rust decode does', () => {
    expect(qwen.decode([9707, 151669, -1, 10 ** 9, 1879])).toBe('Hello world');
    expect(qwen.decode([])).toBe('');
  });

  it('decodes the bytes of all tokens together: a character split across tokens, lone bytes as U+FFFD, a BOM kept', () => {
    const melt = qwen.encode('🫠', { addSpecialTokens: false });
    expect(melt.length).toBe(3);
    expect(qwen.decode(melt)).toBe('🫠');
    expect(qwen.decode(melt.slice(0, -1))).toBe('\uFFFD');
    expect(qwen.decode([...melt.slice(0, -1), 9707])).toBe('\uFFFDHello');
    expect(qwen.decode([melt[1]!, melt[2]!])).toBe('\uFFFD\uFFFD');
    expect(qwen.decode(qwen.encode('\ufeffHi', { addSpecialTokens: false }))).toBe('\ufeffHi');
  });

  it("applies clean_up_tokenization_spaces where the config asks (Llama 3), and not elsewhere (Qwen3)", () => {
    // Python's str.replace chain gives this (transformers' clean_up_tokenization).
    const text = "Hello , world . I do n't , you 're ' quoted ' right ?";
    expect(llama.decode(llama.encode(text))).toBe("Hello, world. I don't, you're'quoted'right?");
    // What SGLang and vLLM return: no cleanup, whatever the config says.
    expect(llama.decode(llama.encode(text), { cleanUpTokenizationSpaces: false })).toBe(text);
    expect(qwen.decode(qwen.encode(text))).toBe(text);
  });

  it('spaces_between_special_tokens changes nothing (a fast tokenizer ignores it)', () => {
    const ids = qwen.encode('<|im_start|><|im_end|>x<|im_start|>');
    for (const skipSpecialTokens of [true, false]) {
      expect(qwen.decode(ids, { skipSpecialTokens, spacesBetweenSpecialTokens: false })).toBe(qwen.decode(ids, { skipSpecialTokens, spacesBetweenSpecialTokens: true }));
    }
  });

  it('round-trips text: decode(encode(text)) is the text, after Qwen3\'s NFC normalizer or Llama 3\'s cleanup', () => {
    const piece = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.constantFrom(' ', '  ', '\n', ' .', " n't", " 's", '<|im_end|>', '<|eot_id|>', '🚀', 'é', 'e\u0301', '日本', '\u00a0', '\ufeff'),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const text = pieces.join('');
        expect(qwen.decode(qwen.encode(text, { addSpecialTokens: false }), { skipSpecialTokens: false })).toBe(text.normalize('NFC'));
        expect(llama.decode(llama.encode(text, { addSpecialTokens: false }), { skipSpecialTokens: false })).toBe(cleanUpTokenization(text));
      }),
      { numRuns: runs() },
    );
  });
});

describe('one token: tokenText and tokenBytes (logprob entries)', () => {
  it('gives the decoded text, special tokens included, and the raw bytes', () => {
    const [hello, world] = qwen.encode('Hello world');
    expect([qwen.tokenText(hello!), qwen.tokenText(world!)]).toEqual(['Hello', ' world']);
    expect(qwen.tokenBytes(world!)).toEqual([32, 119, 111, 114, 108, 100]);
    expect(qwen.tokenText(151645)).toBe('<|im_end|>');
    expect(qwen.tokenBytes(151645)).toEqual([...new TextEncoder().encode('<|im_end|>')]);
    // A token that is only part of a character: its text is U+FFFD, its bytes are the real ones.
    const clef = qwen.encode('𝄞', { addSpecialTokens: false });
    expect(clef.length).toBe(2);
    expect(clef.flatMap((id) => qwen.tokenBytes(id)!)).toEqual([0xf0, 0x9d, 0x84, 0x9e]);
    expect(qwen.tokenText(clef[0]!)).toBe('\uFFFD');
    expect(qwen.tokenBytes(qwen.vocabSize)).toBeNull();
  });
});

describe('decoder chains of other tokenizer families (Rust semantics)', () => {
  const chain = (cfg: Record<string, unknown>) => decoderChain(cfg as { type: string }, () => null);
  it('ByteFallback: one U+FFFD per byte of an invalid sequence, as tokenizers/src/decoders/byte_fallback.rs', () => {
    const d = chain({ type: 'ByteFallback' });
    expect(d.decode(['<0x61>'])).toBe('a');
    expect(d.decode(['<0xE5>', '<0x8f>'])).toBe('\uFFFD\uFFFD');
    expect(d.decode(['<0xE5>', '<0x8f>', '<0xab>', 'a'])).toBe('叫a');
    expect(d.decode(['<0xE5>', '<0x8f>', 'a'])).toBe('\uFFFD\uFFFDa');
  });
  it('Metaspace: the stand-in becomes a space, and disappears from the first token', () => {
    expect(chain({ type: 'Metaspace', replacement: '▁', prepend_scheme: 'always' }).decode(['▁Hey', '▁friend!'])).toBe('Hey friend!');
    expect(chain({ type: 'Metaspace', replacement: '▁', prepend_scheme: 'never' }).decode(['▁Hey', '▁friend!'])).toBe(' Hey friend!');
  });
  it("Llama 2's sequence: Replace, ByteFallback, Fuse, Strip", () => {
    const d = chain({
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        { type: 'Strip', content: ' ', start: 1, stop: 0 },
      ],
    });
    expect(d.decode(['▁Hey', '▁friend', '<0x21>', '▁', '<0xE5>', '<0x8f>', '<0xab>'])).toBe('Hey friend! 叫');
    expect(d.spaceMarker).toBe('▁');
  });
  it('Strip cuts up to `start` leading and `stop` trailing copies of its char from every token', () => {
    expect(chain({ type: 'Strip', content: 'H', start: 1, stop: 0 }).decode(['Hey', ' friend!', 'HHH'])).toBe('ey friend!HH');
    expect(chain({ type: 'Strip', content: 'y', start: 0, stop: 1 }).decode(['Hey', ' friend!'])).toBe('He friend!');
  });
  it('no decoder: tokens joined by spaces', () => {
    expect(decoderChain(null, () => null).decode(['a', 'b'])).toBe('a b');
  });
});

