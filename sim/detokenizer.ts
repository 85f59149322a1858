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

// The detokenizer manager's DecodeStatus lives with the router, which renders a migrated
// answer's text with it too: one implementation of SGLang's algorithm for both.
export { SglangDetokenizer, findPrintableText } from '../router/formats/sglang/detokenize.ts';
