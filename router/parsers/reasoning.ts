// Reasoning parsers: the text of a `<think>…</think>` block goes to `reasoning_content`, the rest
// to content, as SGLang's BaseReasoningFormatDetector (python/sglang/srt/parser/reasoning_parser.py)
// splits it: with `force` (DeepSeek-R1, Qwen3-thinking) the output starts inside the thought and an
// opening `<think>` is stripped if the model writes one; without (Qwen3), a thought is one the
// output opens with `<think>`; a thought never closed (max_tokens) is reasoning to the end; Qwen3's
// detector also ends a thought at `<tool_call>`, which stays in the text for the tool parser.
import { partialSuffix } from './scan.ts';
import type { ReasoningFormat } from './names.ts';

const START = '<think>';
const END = '</think>';

const enum S {
  /** The output's start: does it open a thought? */
  Start,
  Thinking,
  /** Past the thought (or none): everything is content, unscanned. */
  Done,
}

export class ReasoningParser {
  private state: S;
  private held = '';
  /** SGLang's stream_reasoning false: the thought comes out whole when it ends. */
  private acc = '';
  private readonly toolStart: string | null;

  constructor(
    format: ReasoningFormat,
    private readonly streamReasoning = true,
  ) {
    this.state = S.Start;
    this.force = format !== 'qwen3';
    this.toolStart = format === 'qwen3' || format === 'qwen3-thinking' ? '<tool_call>' : null;
  }

  private readonly force: boolean;

  /** Takes text; adds reasoning to `out.reasoning` and returns the content part. */
  push(text: string, out: { reasoning: string }): string {
    if (this.state === S.Done) return text;
    let buf = this.held.length > 0 ? this.held + text : text;
    this.held = '';
    if (this.state === S.Start) {
      if (buf.length < START.length && START.startsWith(buf)) {
        this.held = buf;
        return '';
      }
      if (buf.startsWith(START)) {
        buf = buf.slice(START.length);
        this.state = S.Thinking;
      } else if (this.force) {
        this.state = S.Thinking;
      } else {
        this.state = S.Done;
        return buf;
      }
    }
    const e = buf.indexOf(END);
    const t = this.toolStart === null ? -1 : buf.indexOf(this.toolStart);
    if (e >= 0 && (t < 0 || e < t)) {
      this.think(buf.slice(0, e), out, true);
      this.state = S.Done;
      return buf.slice(e + END.length);
    }
    if (t >= 0) {
      this.think(buf.slice(0, t), out, true);
      this.state = S.Done;
      return buf.slice(t);
    }
    const k = Math.max(partialSuffix(buf, END), this.toolStart === null ? 0 : partialSuffix(buf, this.toolStart));
    this.think(k > 0 ? buf.slice(0, buf.length - k) : buf, out, false);
    if (k > 0) this.held = buf.slice(buf.length - k);
    return '';
  }

  private think(s: string, out: { reasoning: string }, last: boolean): void {
    if (this.streamReasoning) {
      out.reasoning += s;
      return;
    }
    this.acc += s;
    if (last) {
      out.reasoning += this.acc;
      this.acc = '';
    }
  }

  /** The end of the output: a thought never closed is reasoning to the end. Returns content. */
  finish(out: { reasoning: string }): string {
    const rest = this.held;
    this.held = '';
    if (this.state === S.Start) {
      // Shorter than `<think>` and a prefix of it: a thought only if forced.
      if (!this.force) return rest;
    }
    if (this.state === S.Done) return rest;
    this.think(rest, out, true);
    return '';
  }
}
