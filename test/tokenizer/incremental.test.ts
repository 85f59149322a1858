// The law of incremental detokenization, on both fixture tokenizers, for random id sequences from
// the real vocabulary (special, single-byte and partial-character tokens included) pushed in
// random pieces, one cut being a "migration point" where one attempt's ids end and the next
// attempt's begin: the text handed out plus the flush is decode(all ids), and after every push the
// text so far is decode(ids so far) less a held-back tail.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IncrementalDecoder, cleanUpTokenization, type Tokenizer } from '../../router/tokenizer/index.ts';
import { fixture, idArbitrary, runs, splitAt } from './fixtures.ts';

const qwen = fixture('qwen3');
const llama = fixture('llama3');

interface Case {
  ids: number[];
  cuts: number[];
  migration: number;
  skipSpecialTokens: boolean;
  /** undefined: the tokenizer's own setting. */
  cleanUp: boolean | undefined;
}

const caseOf = (tok: Tokenizer) =>
  fc
    .record({
      ids: fc.array(idArbitrary(tok), { maxLength: 48 }),
      cuts: fc.array(fc.nat({ max: 48 }), { maxLength: 12 }),
      migration: fc.nat({ max: 48 }),
      skipSpecialTokens: fc.boolean(),
      cleanUp: fc.option(fc.boolean(), { nil: undefined }),
    })
    .map((c): Case => c);

/** Runs one case: every push checked against decode of the ids so far, the whole against decode of all. */
function check(tok: Tokenizer, c: Case, forceWindow: boolean, heldTail: (cleanUp: boolean) => RegExp): void {
  const cleans = c.cleanUp ?? tok === llama;
  const opts = { skipSpecialTokens: c.skipSpecialTokens, cleanUpTokenizationSpaces: c.cleanUp };
  const dec = new IncrementalDecoder(tok, { ...opts, forceWindow });
  const whole = tok.decode(c.ids, opts);
  let emitted = '';
  let seen: number[] = [];
  for (const piece of splitAt(c.ids, [...c.cuts, c.migration])) {
    emitted += dec.push(piece);
    seen = seen.concat(piece);
    expect(dec.text).toBe(emitted);
    expect(whole.startsWith(emitted)).toBe(true);
    const sofar = tok.decode(seen, opts);
    expect(sofar.startsWith(emitted)).toBe(true);
    expect(sofar.slice(emitted.length)).toMatch(heldTail(cleans));
  }
  expect(emitted + dec.flush()).toBe(whole);
  expect(dec.ids).toEqual(c.ids);
}

describe('IncrementalDecoder', () => {
  // Without cleanup only an unfinished character is ever held back; with cleanup (Llama 3's config,
  // or asked for) also a tail that the cleanup could still rewrite (" ", " '", " n", ...).
  const held = (cleans: boolean) => (cleans ? /^[ 'nvr]*\uFFFD?$/ : /^\uFFFD?$/);

  it('Qwen3: pieces + flush == decode(all); held back at most one unfinished character', () => {
    fc.assert(fc.property(caseOf(qwen), (c) => check(qwen, c, false, held)), { numRuns: runs() });
  });

  it('Llama 3 (clean_up_tokenization_spaces): pieces + flush == decode(all); held back an open cleanup tail and an unfinished character', () => {
    fc.assert(fc.property(caseOf(llama), (c) => check(llama, c, false, held)), { numRuns: runs() });
  });

  // The prefix/read-offset windows (used for decoders that are not ByteLevel) obey the same law here.
  it('the vLLM/TGI window algorithm gives the same text on both tokenizers', () => {
    const any = () => /^[^]*$/;
    fc.assert(fc.property(caseOf(qwen), (c) => check(qwen, c, true, any)), { numRuns: runs(100) });
    fc.assert(fc.property(caseOf(llama), (c) => check(llama, c, true, any)), { numRuns: runs(100) });
  });

  it('never hands out half a character: a split emoji appears whole, once its last byte arrives', () => {
    const melt = qwen.encode('a🫠b', { addSpecialTokens: false });
    const dec = new IncrementalDecoder(qwen);
    const out = melt.map((id) => dec.push([id]));
    expect(out.join('') + dec.flush()).toBe('a🫠b');
    expect(out.every((s) => !s.includes('\uFFFD'))).toBe(true);
    expect(out).toContain('🫠');
  });

  it('holds back what cleanup could still change, and only that', () => {
    const dec = new IncrementalDecoder(llama);
    const pushed: string[] = [];
    for (const piece of ['I do', ' n', "'t", ' know', ' ']) pushed.push(dec.push(llama.encode(piece, { addSpecialTokens: false })));
    // " n" might become "n't": held until "'t" arrives; a trailing space might precede "."; held too.
    expect(pushed).toEqual(['I do', '', "n't", ' know', '']);
    expect(dec.push(llama.encode('.', { addSpecialTokens: false }))).toBe('.');
    expect(dec.flush()).toBe('');
    expect(dec.text).toBe(cleanUpTokenization("I do n't know ."));
  });

  it('skip_special_tokens: special tokens vanish from the stream, others stay', () => {
    const ids = qwen.encode('<|im_start|>assistant\n<think>x</think>hi<|im_end|>');
    const shown = new IncrementalDecoder(qwen, { skipSpecialTokens: false });
    const hidden = new IncrementalDecoder(qwen);
    expect(shown.push(ids) + shown.flush()).toBe('<|im_start|>assistant\n<think>x</think>hi<|im_end|>');
    expect(hidden.push(ids) + hidden.flush()).toBe('assistant\n<think>x</think>hi');
  });
});
