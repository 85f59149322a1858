// Stop strings for the OpenAI front, with vLLM's min_tokens gate (vllm/v1/engine/detokenizer.py,
// BaseIncrementalDetokenizer.update and check_stop_strings): the text of the first min_tokens
// output tokens is never searched on its own, but it is the window's reach for the tokens after
// them, so a stop string that starts within it and ends after it matches (the output is then cut
// where it starts, inside that text). Each new piece is searched from len(stop) - 1 characters
// before it, so a match ends in the new piece; as in StopMatcher (router/tokenizer/stop.ts), the
// match that ends first wins, ties to the first listed, and only the longest tail that could still
// begin a stop string is held back, so the result does not depend on how the text was cut.
// Without a gate (min_tokens 0) it is StopMatcher (test/openai/stops.test.ts holds the two equal).
import type { StopResult } from '../../tokenizer/index.ts';

export class GatedStopMatcher {
  private readonly stops: readonly string[];
  private held = '';
  private done = false;

  /** `includeStop`: keep the stop string in the output (vLLM's include_stop_str_in_output). Empty stop strings are ignored. */
  constructor(stops: readonly string[], private readonly includeStop = false) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  /**
   * The next text. `search` false (it belongs to the first min_tokens tokens): no stop string may
   * end in it, though one may start in it. True: a stop string that ends in it ends the output.
   */
  push(text: string, search: boolean): StopResult {
    if (this.done) return { emit: '', stop: null };
    if (this.stops.length === 0) return { emit: text, stop: null };
    const buf = this.held + text;
    if (search && text.length > 0) {
      let best = -1;
      let bestEnd = Infinity;
      let bestStop: string | null = null;
      for (const stop of this.stops) {
        // The held text may hold a whole stop string that min_tokens kept from matching: only a
        // match that ends in the new text counts (vLLM's window).
        const at = buf.indexOf(stop, Math.max(0, this.held.length - stop.length + 1));
        if (at >= 0 && at + stop.length < bestEnd) {
          best = at;
          bestEnd = at + stop.length;
          bestStop = stop;
        }
      }
      if (bestStop !== null) {
        this.done = true;
        this.held = '';
        return { emit: buf.slice(0, this.includeStop ? bestEnd : best), stop: bestStop };
      }
    }
    const keep = this.openTail(buf);
    this.held = buf.slice(buf.length - keep);
    return { emit: buf.slice(0, buf.length - keep), stop: null };
  }

  /** Held-back text at the end of the output (no match). */
  flush(): string {
    if (this.done) return '';
    this.done = true;
    const out = this.held;
    this.held = '';
    return out;
  }

  /** The length of the longest tail of `buf` that is a proper prefix of some stop string. */
  private openTail(buf: string): number {
    let keep = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, buf.length); n > keep; n--) {
        if (buf.endsWith(stop.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    return keep;
  }
}
