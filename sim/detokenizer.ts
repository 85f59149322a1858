// SGLang's text, as its processes make it (docs/simulator.md cites the source):
// - the scheduler decides stop strings on the decode of the last few output ids
//   (schedule_batch.py Req.tail_str / _check_str_based_finish), and holds back a stream's chunk
//   while that tail ends with the start of a stop string (Req.check_match_stop_str_prefix);
// - the detokenizer manager turns each scheduler output into new text with two windows over
//   (up to 5 prompt ids +) the output ids, holding back a tail that decodes to U+FFFD and showing
//   only whole words of it, and cuts the stop string or stop token at the end
//   (detokenizer_manager.py DetokenizerManager.handle_batch_token_id_out, trim_matched_stop).
// Decoding is HF's, without cleanup: SGLang loads tokenizers with clean_up_tokenization_spaces
// False (hf_transformers_utils.py get_tokenizer).

import type { FinishReason } from './model.ts';
import type { SimTokenizer } from './vocab.ts';

/** schedule_batch.py INIT_INCREMENTAL_DETOKENIZATION_OFFSET: prompt ids decoded along as context. */
const PROMPT_CONTEXT = 5;

/** The text stops of one request, as SamplingParams.normalize leaves them. */
export interface TextStops {
  /** stop, in the request's order (the first listed that the tail contains wins). */
  strings: readonly string[];
  /** stop_regex: the pattern as sent (it is what a match reports) and its JavaScript form. */
  regex: readonly { source: string; re: RegExp }[];
  /** stop_str_max_len: the longest stop string's length in tokens (encoded without special tokens). */
  maxTokens: number;
}

const raw = (tok: SimTokenizer, ids: readonly number[]) => tok.decode(ids, { skipSpecialTokens: false, cleanUpTokenizationSpaces: false });

/** Req.tail_str: the decode of the last stop_str_max_len + 1 output ids (tokenizer.decode's defaults: special tokens kept). */
function tail(tok: SimTokenizer, outputIds: readonly number[], stops: TextStops): string {
  return raw(tok, outputIds.slice(-Math.min(stops.maxTokens + 1, outputIds.length)));
}

/**
 * The scheduler's check after a new token: the first listed stop string in the tail, then the
 * first stop_regex that matches. SGLang bounds a regex's tail by the longest text it can match
 * (get_max_seq_length, 2^30 when unbounded); here a regex sees the whole output's text.
 */
export function textStopMatch(tok: SimTokenizer, outputIds: readonly number[], stops: TextStops): FinishReason | null {
  if (stops.strings.length > 0) {
    const t = tail(tok, outputIds, stops);
    for (const s of stops.strings) if (t.includes(s)) return { type: 'stop', matched: s };
  }
  if (stops.regex.length > 0) {
    const all = raw(tok, outputIds);
    // FINISHED_MATCHED_REGEX reports the pattern, not the text it matched.
    for (const r of stops.regex) if (r.re.test(all)) return { type: 'stop', matched: r.source };
  }
  return null;
}

/** Req.check_match_stop_str_prefix: the tail contains a stop string or ends with the start of one (a stream then sends nothing). */
export function stopPrefixPending(tok: SimTokenizer, outputIds: readonly number[], stops: TextStops): boolean {
  if (stops.strings.length === 0 || outputIds.length === 0) return false;
  const t = tail(tok, outputIds, stops);
  if (t === '') return false;
  for (const s of stops.strings) {
    if (s === '') continue;
    if (t.includes(s)) return true;
    for (let i = 1; i <= Math.min(t.length, s.length); i++) if (t.endsWith(s.slice(0, i))) return true;
  }
  return false;
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
  /** The output_str last sent (SGLang keeps its length, sent_offset). */
  private sent = '';

  constructor(
    private readonly tok: SimTokenizer,
    promptIds: readonly number[],
    private readonly opts: { skipSpecialTokens: boolean; spacesBetweenSpecialTokens: boolean },
  ) {
    // Req.init_incremental_detokenize: read_offset at the prompt's end, surr_offset up to 5 before.
    const context = Math.min(PROMPT_CONTEXT, promptIds.length);
    this.ids = promptIds.slice(promptIds.length - context);
    this.readOffset = context;
  }

  private decode(ids: readonly number[]): string {
    return this.tok.decode(ids, { ...this.opts, cleanUpTokenizationSpaces: false });
  }

  /**
   * One scheduler output for this request: the output ids since the last one and its finish
   * reason (null while it runs). Returns the text SGLang adds to the request's answer.
   */
  step(newIds: readonly number[], finish: FinishReason | null, noStopTrim: boolean): string {
    for (const id of newIds) this.ids.push(id);
    const trim = finish !== null && !noStopTrim && finish.type === 'stop' && 'matched' in finish;
    let readIds = this.ids.slice(this.surrOffset);
    // trim_matched_stop: a stop token (or EOS) is cut from the ids before decoding.
    if (trim && typeof finish.matched === 'number' && readIds.length > 0) readIds = readIds.slice(0, -1);
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
    if (trim && typeof finish.matched === 'string') {
      const at = out.indexOf(finish.matched);
      if (at >= 0) out = out.slice(0, at);
    }
    // Incrementally send text: output_str[sent_offset:], then sent_offset = len(output_str).
    const delta = sliceAfter(out, this.sent);
    this.sent = out;
    return delta;
  }
}
