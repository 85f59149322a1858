// Faster equivalents of a few hot functions of @huggingface/tokenizers (0.2), installed on the
// instances of a loaded tokenizer. Encoding runs for every chat and text request, and the
// library's pipeline spent most of its time on allocations rather than on tokenizing: for the
// OpenAI bench's 67-token chat prompt on Qwen3's tokenizer, 158 µs an encode, 108 of them in the
// ByteLevel pre-tokenizer (2026-12-01, in process). Each replacement computes the library's own
// function (test/tokenizer/speedups.test.ts holds them equal on random text, and whole encodings
// of the real tokenizers equal the library's unpatched ones):
// - ByteLevel: each piece's UTF-8 bytes mapped to the byte-level alphabet through a table over
//   char codes (the library: TextEncoder.encode + Array.from + join per piece, ~1.6 µs each);
// - every pre-tokenizer's `pre_tokenize` over a list: one output array (the library maps each
//   piece to an array and flattens them);
// - Split with an isolated pattern: a `RegExp.exec` loop (the library: a matchAll iterator);
// - BPE's word cache: a bounded Map, as the Rust crate's (tokenizers/src/utils/cache.rs: a full
//   cache takes no new entries); the library's LRU re-inserts every hit (delete + set). The cache
//   only saves work: what a word encodes to does not depend on it.

import { BPE, ByteLevelPreTokenizer, SequencePreTokenizer, SplitPreTokenizer } from '@huggingface/tokenizers';

type PreTokenizeText = (text: string, options?: unknown) => string[];

/** The library's pre-tokenizer fields this reads (their public constructors set them). */
interface PreTokenizerFields {
  pre_tokenize_text: PreTokenizeText;
  pre_tokenize(text: string | string[], options?: unknown): string[];
}

interface ByteLevelFields extends PreTokenizerFields {
  add_prefix_space: boolean;
  use_regex: boolean;
  pattern: RegExp;
  byte_encoder: Record<number, string>;
}

interface SplitFields extends PreTokenizerFields {
  pattern: RegExp | null;
  config: { invert?: boolean; behavior?: string };
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
 * The library's PreTokenizer.pre_tokenize (`text`, or each of a list, through pre_tokenize_text,
 * flattened one level), into one array. Every pre_tokenize_text returns a flat list of strings.
 */
function flatPreTokenize(p: PreTokenizerFields): PreTokenizerFields['pre_tokenize'] {
  const push = (out: string[], pieces: readonly string[]) => {
    for (const x of pieces) out.push(x);
  };
  return (text, options) => {
    const out: string[] = [];
    if (Array.isArray(text)) for (const t of text) push(out, p.pre_tokenize_text(t, options));
    else push(out, p.pre_tokenize_text(text, options));
    return out;
  };
}

/** The library's regex_split (`Isolated`: the matches and the text between them, empty matches dropped), by exec. */
export function isolatedSplit(text: string, pattern: RegExp): string[] {
  // The pattern itself (a copy would compile again: ~50 µs for Qwen3's): exec starts at lastIndex
  // and leaves it at 0 once it finds no more, as it was before. `pattern` is global.
  const re = pattern;
  re.lastIndex = 0;
  const out: string[] = [];
  let prev = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const full = m[0];
    if (prev < m.index) out.push(text.slice(prev, m.index));
    if (full.length > 0) out.push(full);
    else re.lastIndex = advance(text, re.lastIndex, re.unicode);
    prev = m.index + full.length;
  }
  if (prev < text.length) out.push(text.slice(prev));
  return out;
}

/** ECMAScript's AdvanceStringIndex: past an empty match, by a code point under the `u` flag. */
function advance(text: string, at: number, unicode: boolean): number {
  if (!unicode || at + 1 >= text.length) return at + 1;
  const c = text.charCodeAt(at);
  return c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00 ? at + 2 : at + 1;
}

function speedUpByteLevel(lib: ByteLevelFields): void {
  const table: string[] = Array.from({ length: 256 }, (_, b) => lib.byte_encoder[b]!);
  const one = (text: string, out: string[]): void => {
    if (lib.add_prefix_space && !text.startsWith(' ')) text = ' ' + text;
    if (!lib.use_regex) {
      out.push(byteLevelPiece(text, table));
      return;
    }
    for (const piece of text.match(lib.pattern) || []) out.push(byteLevelPiece(piece, table));
  };
  lib.pre_tokenize_text = (text) => {
    const out: string[] = [];
    one(text, out);
    return out;
  };
  lib.pre_tokenize = (text) => {
    const out: string[] = [];
    if (Array.isArray(text)) for (const t of text) one(t, out);
    else one(text, out);
    return out;
  };
}

/** Installs the fast paths above on `pre` (a pre-tokenizer, or a Sequence of them, nested). */
export function speedUpPreTokenizer(pre: unknown): void {
  // The library's pre-tokenizers are callable objects (functions), or null.
  if (pre === null || (typeof pre !== 'object' && typeof pre !== 'function')) return;
  if (pre instanceof ByteLevelPreTokenizer) {
    speedUpByteLevel(pre as unknown as ByteLevelFields);
    return;
  }
  const p = pre as unknown as PreTokenizerFields;
  if (pre instanceof SequencePreTokenizer) {
    for (const inner of (pre as unknown as { tokenizers: unknown[] }).tokenizers) speedUpPreTokenizer(inner);
  } else if (pre instanceof SplitPreTokenizer) {
    const s = pre as unknown as SplitFields;
    // Only the library's regex_split branch (not inverted, not "removed"), with its global
    // pattern (exec walks by lastIndex only with the g flag; the library compiles every one so).
    if (s.pattern !== null && s.pattern.global && !s.config.invert && s.config.behavior?.toLowerCase() !== 'removed') {
      const pattern = s.pattern;
      s.pre_tokenize_text = (text) => isolatedSplit(text, pattern);
    }
  }
  p.pre_tokenize = flatPreTokenize(p);
}

/** A BPE model's word cache as the Rust crate keeps it: bounded, never reordered. */
class BoundedCache<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly capacity: number) {}
  get(key: string): V | undefined {
    return this.map.get(key);
  }
  put(key: string, value: V): void {
    if (this.map.size < this.capacity) this.map.set(key, value);
  }
  clear(): void {
    this.map.clear();
  }
}

/** Installs the bounded word cache on a BPE model (other models are left as they are). */
export function speedUpModel(model: unknown): void {
  if (!(model instanceof BPE)) return;
  const m = model as unknown as { cache: unknown; cache_capacity: number };
  m.cache = new BoundedCache(m.cache_capacity);
}
