// A Hugging Face model directory's tokenizer: encoding by @huggingface/tokenizers (HF's own
// JavaScript port of the Rust pipeline: normalizers, pre-tokenizers, BPE/Unigram/WordPiece,
// post-processors), decoding as HF's fast tokenizers decode (tokenizers' Rust
// `TokenizerImpl::decode`, then transformers' clean_up_tokenization when the config asks for it),
// chat templates by @huggingface/jinja. docs/tokenizer.md says why and what was measured.

import { BPEDecoder, CTCDecoder, Tokenizer as LibTokenizer, WordPieceDecoder } from '@huggingface/tokenizers';
import { ChatTemplates, templatesFromConfig } from './chat-template.ts';
import { speedUpModel, speedUpPreTokenizer } from './speedups.ts';
import { cleanUpTokenization } from './cleanup.ts';
import { decoderChain, writeByteLevelBytes, type DecoderChain, type DecoderConfig, type LibraryDecoder } from './decoders.ts';
import type { ChatMessage, ChatTemplateOptions, DecodeOptions, EncodeOptions, Tokenizer } from './types.ts';

/** What IncrementalDecoder needs beyond the public interface, to stream exactly (incremental.ts). */
export interface DecodeInternals {
  /** tokenizer_config clean_up_tokenization_spaces: decode = cleanUp(raw decode). */
  readonly cleanUp: boolean;
  /** The decode before cleanup (Rust's decode). */
  rawDecode(ids: readonly number[], skipSpecial: boolean): string;
  /**
   * ByteLevel tokenizers only: the bytes the kept ids stand for, so that raw decode is the lossy
   * UTF-8 of their concatenation and a streaming UTF-8 decoder yields it exactly. Null otherwise.
   * The array may be a view of the tokenizer's own table: read it, never write it.
   */
  readonly keptBytes: ((ids: readonly number[], skipSpecial: boolean) => Uint8Array) | null;
}

export const DECODE_INTERNALS: unique symbol = Symbol('baton.tokenizer.decode');

/** The parsed files of a model directory. */
export interface TokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  generationConfig: Record<string, unknown> | null;
  /** chat_template.jinja, which HF prefers to the config's chat_template when both exist. */
  chatTemplateFile: string | null;
}

const EMPTY = new Uint8Array(0);
const ADDED = 1;
const SPECIAL = 2;

/** A special token as tokenizer_config writes it: a string or an AddedToken object. */
function tokenContent(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return null;
}

const isId = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

function libraryDecoder(cfg: DecoderConfig): LibraryDecoder {
  // The types the Rust-exact chain does not cover; unlikely in generation models.
  const c = cfg as never;
  switch (cfg.type) {
    case 'WordPiece':
      return new WordPieceDecoder(c);
    case 'BPEDecoder':
      return new BPEDecoder(c);
    case 'CTC':
      return new CTCDecoder(c);
    default:
      return null;
  }
}

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
  readonly eosTokenId: number | null;
  readonly bosTokenId: number | null;
  readonly contextLength: number | null;
  readonly [DECODE_INTERNALS]: DecodeInternals;
  private readonly lib: LibTokenizer;
  private readonly tokens: (string | undefined)[];
  private readonly flags: Uint8Array;
  private readonly chain: DecoderChain;
  private readonly cleanUp: boolean;
  private readonly templates: ChatTemplates;
  /** ByteLevel: every id's bytes, id i at [offsets[i], offsets[i + 1]). */
  private readonly bytes: Uint8Array | null = null;
  private readonly offsets: Int32Array | null = null;
  private readonly utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

  constructor(
    readonly name: string,
    readonly dir: string,
    files: TokenizerFiles,
    now?: () => Date,
  ) {
    const { tokenizerJson, tokenizerConfig: config } = files;
    this.lib = new LibTokenizer(tokenizerJson, config);
    // Faster equivalents of the library's hot functions (speedups.ts says why).
    speedUpPreTokenizer(this.lib.pre_tokenizer);
    speedUpModel(this.lib.model);
    const vocab = this.lib.model?.vocab ?? [];
    this.tokens = vocab.slice();
    const added = this.lib.get_added_tokens_decoder();
    let size = this.tokens.length;
    for (const id of added.keys()) size = Math.max(size, id + 1);
    this.vocabSize = size;
    this.flags = new Uint8Array(size);
    for (const [id, t] of added) {
      this.tokens[id] = t.content;
      this.flags[id] = ADDED | (t.special ? SPECIAL : 0);
    }
    this.chain = decoderChain(tokenizerJson.decoder as DecoderConfig | null | undefined, libraryDecoder);
    // transformers reads the flag from tokenizer_config; absent, current transformers defaults to false.
    this.cleanUp = config.clean_up_tokenization_spaces === true;

    if (this.chain.byteLevel) {
      let room = 0;
      for (let id = 0; id < size; id++) room += (this.tokens[id]?.length ?? 0) * 3;
      const bytes = new Uint8Array(room);
      const offsets = new Int32Array(size + 1);
      for (let id = 0; id < size; id++) {
        const t = this.tokens[id];
        offsets[id + 1] = offsets[id]! + (t === undefined ? 0 : writeByteLevelBytes(t, bytes, offsets[id]!));
      }
      this.bytes = bytes.slice(0, offsets[size]!);
      this.offsets = offsets;
    }

    const idOf = (content: string | null): number | null => {
      if (content === null) return null;
      const id = this.lib.token_to_id(content);
      return id === undefined ? null : id;
    };
    const genEos = files.generationConfig?.eos_token_id;
    const fromGen = isId(genEos) ? [genEos] : Array.isArray(genEos) ? genEos.filter(isId) : [];
    const cfgEos = idOf(tokenContent(config.eos_token));
    this.eosTokenIds = Object.freeze(fromGen.length > 0 ? fromGen : cfgEos === null ? [] : [cfgEos]);
    this.eosTokenId = cfgEos;
    this.bosTokenId = idOf(tokenContent(config.bos_token));
    const maxLen = config.model_max_length;
    this.contextLength = typeof maxLen === 'number' && Number.isFinite(maxLen) && maxLen > 0 && maxLen < 1e7 ? Math.floor(maxLen) : null;

    const special: Record<string, string> = {};
    for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
      const c = tokenContent(config[key]);
      if (c !== null) special[key] = c;
    }
    const fromConfig = templatesFromConfigOrFile(config.chat_template, files.chatTemplateFile);
    this.templates = new ChatTemplates(fromConfig, special, now);

    this[DECODE_INTERNALS] = {
      cleanUp: this.cleanUp,
      rawDecode: (ids, skip) => this.rawDecode(ids, skip),
      keptBytes: this.bytes ? (ids, skip) => this.keptBytes(ids, skip) : null,
    };
  }

  private keep(id: number, skip: boolean): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize && this.tokens[id] !== undefined && !(skip && (this.flags[id]! & SPECIAL) !== 0);
  }

  private keptBytes(ids: readonly number[], skip: boolean): Uint8Array {
    const offsets = this.offsets!;
    // One id (every streamed token): a view of the table, no copy. Callers only read it.
    if (ids.length === 1) {
      const id = ids[0]!;
      return this.keep(id, skip) ? this.bytes!.subarray(offsets[id]!, offsets[id + 1]!) : EMPTY;
    }
    let size = 0;
    for (const id of ids) if (this.keep(id, skip)) size += offsets[id + 1]! - offsets[id]!;
    const out = new Uint8Array(size);
    let at = 0;
    for (const id of ids) {
      if (!this.keep(id, skip)) continue;
      const from = offsets[id]!;
      const to = offsets[id + 1]!;
      out.set(this.bytes!.subarray(from, to), at);
      at += to - from;
    }
    return out;
  }

  /** tokenizers' TokenizerImpl::decode: unknown ids dropped, special ones dropped when asked, the decoder chain over the rest. */
  private rawDecode(ids: readonly number[], skip: boolean): string {
    if (this.bytes) return this.utf8.decode(this.keptBytes(ids, skip));
    const kept: string[] = [];
    for (const id of ids) if (this.keep(id, skip)) kept.push(this.tokens[id]!);
    return this.chain.decode(kept);
  }

  encode(text: string, opts: EncodeOptions = {}): number[] {
    if (text === '' && opts.addSpecialTokens === false) return [];
    return this.lib.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }).ids;
  }

  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    // spaces_between_special_tokens has no effect on a fast tokenizer (types.ts, docs/tokenizer.md).
    const raw = this.rawDecode(ids, opts.skipSpecialTokens ?? true);
    return (opts.cleanUpTokenizationSpaces ?? this.cleanUp) ? cleanUpTokenization(raw) : raw;
  }

  isSpecial(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize && (this.flags[id]! & SPECIAL) !== 0;
  }

  tokenText(id: number): string {
    const text = this.decode([id], { skipSpecialTokens: false });
    // A Metaspace decoder drops the first token's leading stand-in; vLLM's logprob tokens put the
    // spaces back (detokenizer_utils.py _restore_leading_spaces), and so do we.
    const marker = this.chain.spaceMarker;
    const raw = this.tokens[id];
    if (marker === null || raw === undefined || !this.keep(id, false)) return text;
    let lead = 0;
    while (raw.startsWith(marker.repeat(lead + 1))) lead++;
    const existing = text.length - text.trimStart().length;
    return lead > existing ? ' '.repeat(lead - existing) + text : text;
  }

  tokenString(id: number): string {
    return this.tokens[id] ?? '';
  }

  tokenBytes(id: number): number[] | null {
    if (!this.keep(id, false)) return null;
    if (this.bytes) return Array.from(this.bytes.subarray(this.offsets![id]!, this.offsets![id + 1]!));
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(this.tokens[id]!);
    if (m) return [parseInt(m[1]!, 16)];
    const text = this.tokenText(id);
    return text.includes('\uFFFD') ? null : Array.from(new TextEncoder().encode(text));
  }

  applyChatTemplate(messages: ChatMessage[], opts?: ChatTemplateOptions): string {
    return this.templates.render(messages, opts);
  }

  encodeChat(messages: ChatMessage[], opts?: ChatTemplateOptions): number[] {
    // apply_chat_template(tokenize=True) encodes with add_special_tokens=False: the template
    // writes BOS itself where the model wants one.
    return this.encode(this.applyChatTemplate(messages, opts), { addSpecialTokens: false });
  }

  /** Whether decode is Rust-exact for this tokenizer's decoder (false: a library decoder is in the chain). */
  get exactDecoder(): boolean {
    return !this.chain.approximate;
  }
}

function templatesFromConfigOrFile(configValue: unknown, file: string | null) {
  const fromConfig = templatesFromConfig(configValue);
  // transformers: "an independent chat template file takes priority over template entries in the tokenizer config".
  return file === null ? fromConfig : { default: file, named: fromConfig.named };
}

