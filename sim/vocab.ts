// The simulator's tokenizer, behind one small interface (SimTokenizer) that the built-in word list
// and a real Hugging Face tokenizer (router/tokenizer, `--tokenizer DIR`) both satisfy, so text
// mode has one code path whichever stands behind it.
//
// The built-in word list stands for the model's 32000 ids, so text prompts and text answers exist
// without a real tokenizer. Every id decodes to " word" (id 3 + i and every id congruent to it
// modulo the list length decode to WORDS[i]); a known word encodes to its first id, an unknown one
// to an id hashed from its spelling. Round trips are exact for prompts made of listed words, which
// is all the text tests need.
//
// The real tokenizer is the one module the simulator shares with the router: router/tokenizer is
// a leaf (it imports nothing else of the router), and the text the simulator writes is SGLang's
// algorithm over HF's decode (sim/detokenizer.ts), which the router does not share.

import { resolve } from 'node:path';
import { loadTokenizer } from '../router/tokenizer/load.ts';
import type { DecodeOptions, EncodeOptions, Tokenizer } from '../router/tokenizer/types.ts';
import { DEFAULT_MODEL, type ModelConfig } from './model.ts';
import { loadScript } from './script.ts';

/** What the simulator asks of a tokenizer. */
export type SimTokenizer = Pick<Tokenizer, 'vocabSize' | 'eosTokenIds' | 'isSpecial' | 'encode' | 'decode'>;

const WORDS = (
  'the of and to in is that it was for on are as with his they at be this from have or by one had ' +
  'not but what all were when we there can an your which their said if do will each about how up out ' +
  'them then she many some so these would other into has more her two like him see time could no make ' +
  'than first been its who now people my made over did down only way find use may water long little ' +
  'very after words called just where most know get through back much before go good new write our ' +
  'used me man too any day same right look think also around another came come work three word must ' +
  'because does part even place well such here take why things help put years different away again ' +
  'off went old number great tell men say small every found still between name should home big give ' +
  'air line set own under read last never us left end along while might next sound below saw something ' +
  'thought both few those always looked show large often together asked house world going want school ' +
  'important until form food keep children feet land side without boy once animals life enough took ' +
  'sometimes four head above kind began almost live page got earth need far hand high year mother light ' +
  'parts country father let night following picture being study second eyes soon times story boys since ' +
  'white days paper hard near sentence better best across during today others sure means knew its try ' +
  'told young miles sun ways thing whole hear example heard several change answer room sea against top'
).split(' ');

const FIRST_WORD_ID = 3;
const SPECIAL: Record<number, string> = { 0: '<unk>', 1: '<s>', 2: '</s>' };
const INDEX = new Map<string, number>();
WORDS.forEach((w, i) => {
  if (!INDEX.has(w)) INDEX.set(w, FIRST_WORD_ID + i);
});

function hashWord(w: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export class Vocabulary implements SimTokenizer {
  constructor(private readonly cfg: ModelConfig = DEFAULT_MODEL) {}

  get vocabSize(): number {
    return this.cfg.vocabSize;
  }

  get eosTokenIds(): readonly number[] {
    return [this.cfg.eosTokenId];
  }

  isSpecial(id: number): boolean {
    return id >= 0 && id < FIRST_WORD_ID;
  }

  /** Words to ids; there are no special tokens to add (`opts` is accepted for the interface). */
  encode(text: string, _opts?: EncodeOptions): number[] {
    const span = this.cfg.vocabSize - FIRST_WORD_ID;
    return text
      .split(/\s+/)
      .filter((w) => w.length > 0)
      .map((w) => INDEX.get(w) ?? FIRST_WORD_ID + (hashWord(w) % span));
  }

  /** The pieces joined; special tokens add nothing unless skipSpecialTokens is false (then their spelling). */
  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    const skip = opts.skipSpecialTokens ?? true;
    let out = '';
    for (const id of ids) out += skip ? this.piece(id) : this.spelling(id);
    return out;
  }

  /** The text one token adds to an answer; special tokens add nothing (skip_special_tokens). */
  piece(id: number): string {
    if (id < FIRST_WORD_ID) return '';
    return ' ' + WORDS[(id - FIRST_WORD_ID) % WORDS.length]!;
  }

  /** A token's own spelling, as logprob entries show it (special tokens included). */
  spelling(id: number): string {
    return SPECIAL[id] ?? this.piece(id);
  }
}

/** A token's text in a logprob entry: SGLang batch-decodes each id alone, special tokens kept, no cleanup (TM detokenize_logprob_tokens). */
export const tokenSpelling = (tok: SimTokenizer, id: number): string => tok.decode([id], { skipSpecialTokens: false, cleanUpTokenizationSpaces: false });

const loaded = new Map<string, Tokenizer>();

/** A model directory's tokenizer, loaded once per process (in-process tests start many workers). */
export function loadSimTokenizer(dir: string): Tokenizer {
  const key = resolve(dir);
  let tok = loaded.get(key);
  if (!tok) {
    tok = loadTokenizer(key);
    loaded.set(key, tok);
  }
  return tok;
}

/** The smallest --vocab-size: room for the word list and for every ranked candidate list. */
export const MIN_VOCAB_SIZE = 512;

export interface VocabularyChoice {
  /** The model over this vocabulary: its size, its EOS ids, the ids it ranks. */
  model: ModelConfig;
  /** The real tokenizer (`--tokenizer DIR`), or null: the built-in word list. */
  tokenizer: Tokenizer | null;
}

/**
 * The vocabulary a worker serves: a real tokenizer's (ids below its vocabSize; ordinary ids are its
 * non-special tokens; EOS is its first EOS id, and any of its EOS ids ends a request), a plain
 * size (`--vocab-size N`: ids 3 .. N − 1, EOS 2), or the default 32000.
 */
export function vocabularyFor(opts: { tokenizer?: string; vocabSize?: number; eosEvery?: number; script?: string }): VocabularyChoice {
  const v = vocabularyOf(opts);
  if (opts.script !== undefined) v.model.script = loadScript(opts.script, v.tokenizer ?? new Vocabulary(v.model), v.model.eosTokenId);
  return v;
}

function vocabularyOf(opts: { tokenizer?: string; vocabSize?: number; eosEvery?: number }): VocabularyChoice {
  const eosEvery = opts.eosEvery ?? DEFAULT_MODEL.eosEvery;
  if (opts.tokenizer !== undefined && opts.vocabSize !== undefined) throw new Error('a tokenizer sets the vocabulary: give --tokenizer or --vocab-size, not both');
  if (opts.tokenizer === undefined) {
    const vocabSize = opts.vocabSize ?? DEFAULT_MODEL.vocabSize;
    if (!Number.isInteger(vocabSize) || vocabSize < MIN_VOCAB_SIZE) throw new Error(`vocab size must be an integer of at least ${MIN_VOCAB_SIZE}, got ${vocabSize}`);
    return { model: { ...DEFAULT_MODEL, vocabSize, eosEvery }, tokenizer: null };
  }
  const tok = loadSimTokenizer(opts.tokenizer);
  const eos = tok.eosTokenIds;
  if (eos.length === 0) throw new Error(`${opts.tokenizer}: the tokenizer names no EOS token (generation_config.json eos_token_id or tokenizer_config.json eos_token)`);
  const ordinary: number[] = [];
  for (let id = 0; id < tok.vocabSize; id++) if (!tok.isSpecial(id) && !eos.includes(id) && tok.tokenBytes(id) !== null) ordinary.push(id);
  return {
    model: { vocabSize: tok.vocabSize, eosTokenId: eos[0]!, eosTokenIds: eos, eosEvery, ordinaryIds: Int32Array.from(ordinary) },
    tokenizer: tok,
  };
}
