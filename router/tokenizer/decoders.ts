// HF tokenizers' decoders, as the Rust crate runs them (huggingface/tokenizers,
// tokenizers/src/decoders/*.rs and pre_tokenizers/{byte_level,metaspace}.rs): a decoder maps the
// list of token strings to a list of strings (`decode_chain`), and decode joins them.
//
// These are reimplemented rather than taken from @huggingface/tokenizers because its decoders
// follow the Python slow tokenizers where the Rust crate differs, and HF's fast tokenizers (which
// SGLang and vLLM load) run the Rust ones: its ByteLevel decoder decodes the bytes between added
// tokens separately, and its ByteFallback decodes invalid bytes with TextDecoder (one U+FFFD per
// maximal invalid subpart) where Rust writes one U+FFFD per byte. A decoder type not listed here
// falls back to the library's (docs/tokenizer.md says which are exact).

/** GPT-2's bytes_to_unicode: the printable stand-in of every byte, and back. */
function byteLevelTables(): { charToByte: Map<string, number>; byteToChar: string[] } {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const byteToChar: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) byteToChar[b] = String.fromCodePoint(printable.includes(b) ? b : 256 + n++);
  const charToByte = new Map<string, number>();
  byteToChar.forEach((c, b) => charToByte.set(c, b));
  return { charToByte, byteToChar };
}

const { charToByte } = byteLevelTables();
/** Stand-in char code (all are below 0x144) → byte, −1 for other chars. */
const CHAR_BYTE = new Int16Array(0x144).fill(-1);
for (const [c, b] of charToByte) CHAR_BYTE[c.charCodeAt(0)] = b;
const UTF8 = new TextEncoder();

/**
 * Writes one token's bytes under the ByteLevel decoder into `out` at `at` and returns how many:
 * every char mapped back to its byte, or, if any char is not a byte stand-in (an added token such
 * as `<|im end|>` with a space), the token's own UTF-8 (byte_level.rs: `try_fold` over
 * CHAR_BYTES, else `t.as_bytes()`). `out` needs room for 3 bytes per UTF-16 unit.
 */
export function writeByteLevelBytes(token: string, out: Uint8Array, at: number): number {
  for (let i = 0; i < token.length; i++) {
    const code = token.charCodeAt(i);
    const b = code < 0x144 ? CHAR_BYTE[code]! : -1;
    if (b < 0) return UTF8.encodeInto(token, out.subarray(at)).written;
    out[at + i] = b;
  }
  return token.length;
}

/** One token's bytes under the ByteLevel decoder (writeByteLevelBytes). */
export function byteLevelBytes(token: string): Uint8Array {
  const out = new Uint8Array(token.length * 3);
  return out.slice(0, writeByteLevelBytes(token, out, 0));
}

/** Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid subpart, a BOM kept (WHATWG's decoder does the same). */
export const lossyUtf8 = (bytes: Uint8Array): string => new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(bytes);

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** One step of a decoder chain. */
export type DecodeStep = (tokens: string[]) => string[];

/** A decoder config from tokenizer.json (`decoder`). */
export type DecoderConfig = { type: string; [k: string]: unknown };

export interface DecoderChain {
  /** Whole chain: tokens in, text out (decoder.decode = decode_chain joined). */
  decode(tokens: string[]): string;
  /** True when the chain is a lone ByteLevel decoder: text is the lossy UTF-8 of the tokens' bytes. */
  readonly byteLevel: boolean;
  /** The token strings' meta-space stand-in for a space, if the chain has one (Metaspace, or Replace of one char by ' '). */
  readonly spaceMarker: string | null;
  /** True when some step is the library's, not one of ours (not guaranteed Rust-exact). */
  readonly approximate: boolean;
}

interface Built {
  step: DecodeStep;
  spaceMarker: string | null;
  approximate: boolean;
}

function byteLevelStep(): Built {
  return {
    step: (tokens) => {
      let size = 0;
      const parts = tokens.map((t) => {
        const b = byteLevelBytes(t);
        size += b.length;
        return b;
      });
      const all = new Uint8Array(size);
      let at = 0;
      for (const p of parts) {
        all.set(p, at);
        at += p.length;
      }
      return [lossyUtf8(all)];
    },
    spaceMarker: null,
    approximate: false,
  };
}

const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;

function byteFallbackStep(): Built {
  return {
    step: (tokens) => {
      const out: string[] = [];
      let pending: number[] = [];
      const flush = () => {
        if (pending.length === 0) return;
        try {
          out.push(strictUtf8.decode(Uint8Array.from(pending)));
        } catch {
          for (let i = 0; i < pending.length; i++) out.push('\uFFFD');
        }
        pending = [];
      };
      for (const t of tokens) {
        const m = t.length === 6 ? BYTE_TOKEN.exec(t) : null;
        if (m) pending.push(parseInt(m[1]!, 16));
        else {
          flush();
          out.push(t);
        }
      }
      flush();
      return out;
    },
    spaceMarker: null,
    approximate: false,
  };
}

function metaspaceStep(cfg: DecoderConfig): Built {
  const replacement = typeof cfg.replacement === 'string' ? cfg.replacement : '\u2581';
  // Older files say add_prefix_space instead of prepend_scheme (false means "never").
  const scheme = typeof cfg.prepend_scheme === 'string' ? cfg.prepend_scheme : cfg.add_prefix_space === false ? 'never' : 'always';
  return {
    step: (tokens) =>
      tokens.map((t, i) => {
        let s = '';
        for (const c of t) s += c === replacement ? (i === 0 && scheme !== 'never' ? '' : ' ') : c;
        return s;
      }),
    spaceMarker: replacement,
    approximate: false,
  };
}

function replaceStep(cfg: DecoderConfig): Built | null {
  const pattern = cfg.pattern as { String?: string; Regex?: string } | undefined;
  const content = typeof cfg.content === 'string' ? cfg.content : '';
  if (pattern && typeof pattern.String === 'string') {
    const from = pattern.String;
    return {
      step: (tokens) => tokens.map((t) => (from === '' ? t : t.split(from).join(content))),
      spaceMarker: content === ' ' && [...from].length === 1 ? from : null,
      approximate: false,
    };
  }
  if (pattern && typeof pattern.Regex === 'string') {
    // Oniguruma syntax read as JavaScript's: close for the simple patterns decoders use.
    const re = new RegExp(pattern.Regex, 'gu');
    return { step: (tokens) => tokens.map((t) => t.replace(re, content)), spaceMarker: null, approximate: true };
  }
  return null;
}

function stripStep(cfg: DecoderConfig): Built {
  const content = typeof cfg.content === 'string' ? cfg.content : ' ';
  const start = typeof cfg.start === 'number' ? cfg.start : 0;
  const stop = typeof cfg.stop === 'number' ? cfg.stop : 0;
  return {
    step: (tokens) =>
      tokens.map((t) => {
        const chars = [...t];
        let startCut = 0;
        for (let i = 0; i < Math.min(start, chars.length) && chars[i] === content; i++) startCut = i + 1;
        let stopCut = chars.length;
        for (let i = 0; i < Math.min(stop, chars.length - startCut); i++) {
          const index = chars.length - i - 1;
          if (chars[index] !== content) break;
          stopCut = index;
        }
        return chars.slice(startCut, stopCut).join('');
      }),
    spaceMarker: null,
    approximate: false,
  };
}

/** The library's decoder for a type we do not reimplement (WordPiece, BPEDecoder, CTC, ...). */
export type LibraryDecoder = { decode_chain(tokens: string[]): string[] } | null;

function build(cfg: DecoderConfig, library: (cfg: DecoderConfig) => LibraryDecoder): Built | null {
  switch (cfg.type) {
    case 'ByteLevel':
      return byteLevelStep();
    case 'ByteFallback':
      return byteFallbackStep();
    case 'Metaspace':
      return metaspaceStep(cfg);
    case 'Fuse':
      return { step: (tokens) => [tokens.join('')], spaceMarker: null, approximate: false };
    case 'Strip':
      return stripStep(cfg);
    case 'Replace':
      return replaceStep(cfg);
    case 'Sequence': {
      const parts = ((cfg.decoders as DecoderConfig[] | undefined) ?? []).map((d) => build(d, library));
      if (parts.some((p) => p === null)) return null;
      const steps = parts as Built[];
      return {
        step: (tokens) => steps.reduce((t, s) => s.step(t), tokens),
        spaceMarker: steps.find((s) => s.spaceMarker !== null)?.spaceMarker ?? null,
        approximate: steps.some((s) => s.approximate),
      };
    }
    default: {
      const lib = library(cfg);
      return lib ? { step: (tokens) => lib.decode_chain(tokens), spaceMarker: null, approximate: true } : null;
    }
  }
}

/**
 * The decoder chain of a tokenizer.json `decoder` (null: no decoder, tokens are joined by spaces,
 * as Rust's decode does). `library` builds the library's decoder for types we do not reimplement.
 */
export function decoderChain(cfg: DecoderConfig | null | undefined, library: (cfg: DecoderConfig) => LibraryDecoder): DecoderChain {
  if (!cfg) return { decode: (tokens) => tokens.join(' '), byteLevel: false, spaceMarker: null, approximate: false };
  const built = build(cfg, library);
  if (!built) throw new Error(`tokenizer.json decoder type ${JSON.stringify(cfg.type)} is not supported`);
  return {
    decode: (tokens) => built.step(tokens).join(''),
    byteLevel: cfg.type === 'ByteLevel',
    spaceMarker: built.spaceMarker,
    approximate: built.approximate,
  };
}
