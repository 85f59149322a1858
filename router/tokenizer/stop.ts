// OpenAI stop strings over streamed text, as vLLM matches them (vllm/v1/engine/detokenizer.py,
// check_stop_strings: each new piece of text is searched from len(stop) - 1 characters before it,
// a match ends the output, and the output is cut where the stop string starts unless
// include_stop_str_in_output). Two refinements, both so that the result is a pure function of the
// text however it was cut into pieces (token boundaries, frames, a migration):
// - the match that ends first wins, and among matches ending at the same character the one listed
//   first. vLLM checks once per token and takes the first in list order among those the token
//   completed; that is the same whenever one token completes at most one stop string.
// - only the longest tail that could still begin a stop string is held back (vLLM holds a fixed
//   max(len(stop)) - 1 characters while streaming); the text handed out is the same.
// vLLM's min_tokens gate (BaseIncrementalDetokenizer.update: no search until min_tokens output
// tokens exist) is `push(text, false)`: that text is never searched on its own, but a stop string
// that starts in it and ends in later text matches (the output is then cut where it starts).

export interface StopResult {
  /** Text that is now safe to send: no stop string can start inside it. */
  emit: string;
  /** The stop string that matched (then `emit` ends where it starts), or null. */
  stop: string | null;
}

export class StopMatcher {
  private readonly stops: readonly string[];
  private held = '';
  private done = false;
  private hit: string | null = null;

  /** `includeStop`: keep the stop string in the output (vLLM's include_stop_str_in_output). Empty stop strings are ignored. */
  constructor(stops: readonly string[], private readonly opts: { includeStop?: boolean } = {}) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  /** The stop string that ended the output, once one has. */
  get matched(): string | null {
    return this.hit;
  }

  /**
   * The next text. `search` false (min_tokens not reached yet): no stop string may end in it,
   * though one may start in it.
   */
  push(text: string, search = true): StopResult {
    if (this.done) return { emit: '', stop: null };
    if (this.stops.length === 0) return { emit: text, stop: null };
    const buf = this.held + text;
    let best = -1;
    let bestEnd = Infinity;
    let bestStop: string | null = null;
    if (search && text.length > 0) {
      for (const stop of this.stops) {
        // Only a match that ends in the new text counts: the held text may hold a whole stop
        // string that the gate kept from matching.
        const at = buf.indexOf(stop, Math.max(0, this.held.length - stop.length + 1));
        if (at >= 0 && at + stop.length < bestEnd) {
          best = at;
          bestEnd = at + stop.length;
          bestStop = stop;
        }
      }
    }
    if (bestStop !== null) {
      this.done = true;
      this.hit = bestStop;
      this.held = '';
      return { emit: buf.slice(0, this.opts.includeStop ? bestEnd : best), stop: bestStop };
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
