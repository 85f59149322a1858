// SGLang's streamed text, computed from token ids: the detokenizer manager's DecodeStatus
// (python/sglang/srt/managers/detokenizer_manager.py `handle_batch_token_id_out`,
// `trim_matched_stop`; schedule_batch.py `Req.init_incremental_detokenize`, whose surrogate is the
// prompt's last INIT_INCREMENTAL_DETOKENIZATION_OFFSET = 5 ids; utils.py `find_printable_text`).
// The router renders a migrated text answer with it, as the uninterrupted worker would have, and
// the simulated text-mode worker writes its `text` with it, so both follow SGLang's one algorithm.
import type { DecodeOptions, Tokenizer } from '../../tokenizer/types.ts';

const SURROGATE = 5;
const REPLACEMENT = '\uFFFD';

/** transformers' TextStreamer._is_chinese_char ranges. */
function isCjk(cp: number): boolean {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df)
    || (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b820 && cp <= 0x2ceaf)
    || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

/** The last code point of `s` and its length in UTF-16 units. */
function lastCodePoint(s: string, end = s.length): { cp: number; units: number } {
  const cp = s.codePointAt(end - 1)!;
  if (cp >= 0xdc00 && cp <= 0xdfff && end >= 2) {
    const full = s.codePointAt(end - 2)!;
    if (full > 0xffff) return { cp: full, units: 2 };
  }
  return { cp, units: 1 };
}

/** SGLang's find_printable_text: the longest prefix made of whole words (or CJK characters). */
export function findPrintableText(text: string): string {
  if (text.endsWith('\n')) return text;
  if (text.length === 0) return text;
  const last = lastCodePoint(text);
  if (isCjk(last.cp)) return text;
  const before = text.length - last.units;
  if (before > 0 && isCjk(lastCodePoint(text, before).cp)) return text.slice(0, before);
  return text.slice(0, text.lastIndexOf(' ') + 1);
}

/** How a request finished, as far as its text is concerned. */
export interface TextFinish {
  /** finish_reason.matched: a stop string, a stop token id, or none. */
  matched: string | number | null;
  noStopTrim: boolean;
}

export function trimMatchedStop(text: string, finish: TextFinish): string {
  if (finish.noStopTrim || typeof finish.matched !== 'string' || finish.matched === '') return text;
  const pos = text.indexOf(finish.matched);
  return pos === -1 ? text : text.slice(0, pos);
}

/** One request's DecodeStatus: token ids in, SGLang's cumulative output text out. */
export class SglangDetokenizer {
  private readonly decodeIds: number[];
  private surrOffset = 0;
  private readOffset: number;
  private decodedText = '';
  /** The output text after the last step (what the client holds, cumulatively). */
  text = '';

  constructor(
    private readonly tok: Tokenizer,
    promptIds: readonly number[],
    private readonly opts: DecodeOptions,
  ) {
    this.decodeIds = promptIds.slice(Math.max(0, promptIds.length - SURROGATE));
    this.readOffset = this.decodeIds.length;
  }

  /**
   * One scheduler output: the new ids of this step, and the finish when it is the last. Returns the
   * cumulative text (SGLang's output_str): everything decided so far, held back where a character
   * or a word may still change.
   */
  step(ids: readonly number[], finish: TextFinish | null): string {
    for (const id of ids) this.decodeIds.push(id);
    let readIds = this.decodeIds.slice(this.surrOffset);
    // trim_matched_stop on ids: a matched stop token is not part of the text.
    if (finish && !finish.noStopTrim && typeof finish.matched === 'number' && readIds.length > 0) readIds = readIds.slice(0, -1);
    const surrText = this.tok.decode(this.decodeIds.slice(this.surrOffset, this.readOffset), this.opts);
    const readText = this.tok.decode(readIds, this.opts);
    let newText = readText.slice(surrText.length);
    if (finish === null) {
      if (newText.length > 0 && !newText.endsWith(REPLACEMENT)) {
        this.decodedText += newText;
        this.surrOffset = this.readOffset;
        this.readOffset = this.decodeIds.length;
        newText = '';
      } else {
        newText = findPrintableText(newText);
      }
    }
    this.text = finish ? trimMatchedStop(this.decodedText + newText, finish) : this.decodedText + newText;
    return this.text;
  }
}
