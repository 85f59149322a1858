// SGLang's streamed text, computed from token ids: the detokenizer manager's DecodeStatus
// (python/sglang/srt/managers/detokenizer_manager.py `handle_batch_token_id_out`,
// `trim_matched_stop`; schedule_batch.py `Req.init_incremental_detokenize`, whose surrogate is
// the prompt's last INIT_INCREMENTAL_DETOKENIZATION_OFFSET = 5 ids; utils.py
// `find_printable_text`). One implementation for both sides: the router renders a migrated text
// answer with it, as the uninterrupted worker would have, and the simulated text-mode worker
// (sim/answer.ts) writes its `text` with it. Decoding is HF's without cleanup: SGLang loads
// tokenizers with clean_up_tokenization_spaces False (hf_transformers_utils.py get_tokenizer).
import type { DecodeOptions } from '../../tokenizer/types.ts';

/** schedule_batch.py INIT_INCREMENTAL_DETOKENIZATION_OFFSET: prompt ids decoded along as context. */
const PROMPT_CONTEXT = 5;

/** What the detokenizer needs of a tokenizer (the router's, or the simulator's word list). */
export interface Decoder {
  decode(ids: readonly number[], opts?: DecodeOptions): string;
}

/** A finish reason as far as the text is concerned (SGLang's finish_reason JSON). */
export interface TextFinish {
  type: string;
  /** A stop string or stop token id (absent or null: nothing matched). */
  matched?: unknown;
  [key: string]: unknown;
}

/** transformers' _is_chinese_char (CJK ideographs), as sglang/utils.py copies it. */
function isCjk(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

/** sglang/utils.py find_printable_text: the whole words of a held-back text (Python indexes code points). */
export function findPrintableText(text: string): string {
  if (text.endsWith('\n')) return text;
  const last = Array.from(text.slice(-4)).slice(-2);
  const cp = (s: string | undefined) => (s === undefined ? -1 : s.codePointAt(0)!);
  if (last.length > 0 && isCjk(cp(last.at(-1)))) return text;
  if (last.length > 1 && isCjk(cp(last.at(-2)))) return text.slice(0, text.length - last.at(-1)!.length);
  return text.slice(0, text.lastIndexOf(' ') + 1);
}

/** Python's s[len(prefix):], `prefix` usually but not always a prefix of `s` (Python counts code points). */
function sliceAfter(s: string, prefix: string): string {
  if (s.startsWith(prefix)) return s.slice(prefix.length);
  return Array.from(s).slice(Array.from(prefix).length).join('');
}

/** One request's DecodeStatus in SGLang's detokenizer manager. */
export class SglangDetokenizer {
  /** decode_ids: up to 5 prompt ids, then every output id sent so far. */
  private readonly ids: number[];
  private decodedText = '';
  private surrOffset = 0;
  private readOffset: number;
  /** The output_str last sent (SGLang keeps its length, sent_offset): the answer's text so far. */
  private sent = '';

  constructor(
    private readonly tok: Decoder,
    promptIds: readonly number[],
    private readonly opts: { skipSpecialTokens: boolean; spacesBetweenSpecialTokens: boolean },
  ) {
    // Req.init_incremental_detokenize: read_offset at the prompt's end, surr_offset up to 5 before.
    const context = Math.min(PROMPT_CONTEXT, promptIds.length);
    this.ids = promptIds.slice(promptIds.length - context);
    this.readOffset = context;
  }

  /** The text the client holds so far (cumulative). */
  get text(): string {
    return this.sent;
  }

  private decode(ids: readonly number[]): string {
    return this.tok.decode(ids, { ...this.opts, cleanUpTokenizationSpaces: false });
  }

  /**
   * One scheduler output for this request: the output ids since the last one and its finish
   * reason (null while it runs). Returns the text SGLang adds to the request's answer.
   */
  step(newIds: readonly number[], finish: TextFinish | null, noStopTrim: boolean): string {
    for (const id of newIds) this.ids.push(id);
    const matched = finish?.matched;
    const trim = finish !== null && !noStopTrim && finish.type === 'stop' && matched !== undefined && matched !== null;
    let readIds = this.ids.slice(this.surrOffset);
    // trim_matched_stop: a stop token (or EOS) is cut from the ids before decoding.
    if (trim && typeof matched === 'number' && readIds.length > 0) readIds = readIds.slice(0, -1);
    const surrText = this.decode(this.ids.slice(this.surrOffset, this.readOffset));
    const readText = this.decode(readIds);
    let newText = sliceAfter(readText, surrText);
    if (finish === null) {
      if (newText.length > 0 && !newText.endsWith('\uFFFD')) {
        this.decodedText += newText;
        this.surrOffset = this.readOffset;
        this.readOffset = this.ids.length;
        newText = '';
      } else newText = findPrintableText(newText);
    }
    let out = this.decodedText + newText;
    // trim_matched_stop: a stop string is cut where it first occurs in the whole text.
    if (trim && typeof matched === 'string') {
      const at = out.indexOf(matched);
      if (at >= 0) out = out.slice(0, at);
    }
    // Incrementally send text: output_str[sent_offset:], then sent_offset = len(output_str).
    const delta = sliceAfter(out, this.sent);
    this.sent = out;
    return delta;
  }
}
