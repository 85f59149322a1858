// Text mode's tokenizer: a small built-in word list stands for the model's 32000 ids, so text
// prompts and text answers exist without a real tokenizer. Every id decodes to " word" (id 3 + i
// and every id congruent to it modulo the list length decode to WORDS[i]); a known word encodes to
// its first id, an unknown one to an id hashed from its spelling. Round trips are exact for
// prompts made of listed words, which is all the text tests need.

import { DEFAULT_MODEL, type ModelConfig } from './model.ts';

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

export class Vocabulary {
  constructor(private readonly cfg: ModelConfig = DEFAULT_MODEL) {}

  encode(text: string): number[] {
    const span = this.cfg.vocabSize - FIRST_WORD_ID;
    return text
      .split(/\s+/)
      .filter((w) => w.length > 0)
      .map((w) => INDEX.get(w) ?? FIRST_WORD_ID + (hashWord(w) % span));
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
