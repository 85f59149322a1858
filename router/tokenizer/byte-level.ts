// A faster ByteLevel pre-tokenizer, installed in place of @huggingface/tokenizers' own.
//
// Why: the library (0.2) maps each pre-token's UTF-8 bytes to the byte-level alphabet with
// `Array.from(new TextEncoder().encode(piece), (b) => table[b]).join('')`: a Uint8Array, an
// array and a join per piece, ~1.6 µs each. For the OpenAI bench's 67-token chat prompt on
// Qwen3's tokenizer that was 108 of the 158 µs that encoding took (2026-12-01, in process), and
// encoding runs for every chat and text request. The mapping below is the same function (every
// UTF-8 byte to its byte-level character, lone surrogates to U+FFFD's bytes as TextEncoder
// writes them), table-driven over char codes, with one scratch buffer for non-ASCII pieces.
// test/tokenizer/byte-level.test.ts holds it equal to the library's own on random text.

import { ByteLevelPreTokenizer, SequencePreTokenizer } from '@huggingface/tokenizers';

/** The library's ByteLevel pre-tokenizer fields this reads (its public constructor sets them). */
interface ByteLevelFields {
  add_prefix_space: boolean;
  use_regex: boolean;
  pattern: RegExp;
  byte_encoder: Record<number, string>;
  pre_tokenize_text(text: string, options?: unknown): string[];
  pre_tokenize(text: string | string[], options?: unknown): string[];
}

const encoder = new TextEncoder();
let scratch = new Uint8Array(1024);

/** `piece`'s UTF-8 bytes, each as its byte-level character (`table[byte]`). */
export function byteLevelPiece(piece: string, table: readonly string[]): string {
  const n = piece.length;
  let out = '';
  let i = 0;
  // ASCII is one byte per char code: no encoding needed.
  for (; i < n; i++) {
    const c = piece.charCodeAt(i);
    if (c >= 0x80) break;
    out += table[c];
  }
  if (i === n) return out;
  // The rest through TextEncoder (surrogate pairs, lone surrogates), into a reused buffer.
  const rest = n - i;
  if (scratch.length < rest * 3) scratch = new Uint8Array(rest * 3);
  const { written } = encoder.encodeInto(i === 0 ? piece : piece.slice(i), scratch);
  for (let k = 0; k < written; k++) out += table[scratch[k]!];
  return out;
}

/**
 * Replaces every ByteLevel pre-tokenizer in `pre` (alone, or inside Sequences) by the fast
 * mapping above; everything else of the library's pipeline stays as it is.
 */
export function speedUpByteLevel(pre: unknown): void {
  if (pre instanceof SequencePreTokenizer) {
    for (const p of (pre as unknown as { tokenizers: unknown[] }).tokenizers) speedUpByteLevel(p);
    return;
  }
  if (!(pre instanceof ByteLevelPreTokenizer)) return;
  const lib = pre as unknown as ByteLevelFields;
  const table: string[] = Array.from({ length: 256 }, (_, b) => lib.byte_encoder[b]!);
  // The library's pre_tokenize_text, with its mapping replaced, pushing into `out`.
  const one = (text: string, out: string[]): void => {
    if (lib.add_prefix_space && !text.startsWith(' ')) text = ' ' + text;
    if (!lib.use_regex) {
      out.push(byteLevelPiece(text, table));
      return;
    }
    for (const piece of text.match(lib.pattern) || []) out.push(byteLevelPiece(piece, table));
  };
  lib.pre_tokenize_text = (text: string): string[] => {
    const out: string[] = [];
    one(text, out);
    return out;
  };
  // The library's pre_tokenize maps every piece to an array and flattens them (a Sequence hands
  // this one the previous step's pieces); one array instead.
  lib.pre_tokenize = (text: string | string[]): string[] => {
    const out: string[] = [];
    if (Array.isArray(text)) for (const t of text) one(t, out);
    else one(text, out);
    return out;
  };
}
