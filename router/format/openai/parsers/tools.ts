// Tool-call parsers over streamed text, one per format. Each reads every character once and holds
// back only what could still begin a marker. Content around the calls passes through; a call to a
// name the request's tools do not offer is dropped, as SGLang's parse_base_json and
// BaseFormatDetector.parse_streaming_increment drop it.
import { CallScanner, partialSuffix } from './scan.ts';
import type { CallIds, ParseOut, ToolNames, ToolParser } from './types.ts';

const isWs = (s: string): boolean => s.trim().length === 0;

/** The bookkeeping every format shares: call indices, ids, names, arguments, dropped calls. */
abstract class CallsBase implements ToolParser {
  /** Index the next accepted call gets (SGLang's current_tool_id, vLLM's current_tool_id). */
  protected next = 0;
  protected cur: CallScanner | null = null;
  /** The index of the call being read once its name is accepted; -1 before, -2 dropped. */
  private curIndex = -1;
  /** Whitespace after a call, held: shown only if more content follows it. */
  private ws = '';
  /** Calls whose JSON closed (a truncated call is streamed but not in a non-streaming answer). */
  readonly complete: boolean[] = [];
  protected held = '';
  private sawCall = false;
  /** The content before the first call (kept for a non-streaming answer only). */
  preCall = '';

  constructor(
    private readonly tools: ToolNames,
    private readonly ids: CallIds,
    private readonly keepPreCall = false,
  ) {}

  abstract push(text: string, out: ParseOut): void;

  finish(out: ParseOut): void {
    const rest = this.held;
    this.held = '';
    if (this.cur === null && rest.length > 0) this.content(rest, out);
  }

  /** Text outside calls: content (whitespace between or after calls is dropped). */
  protected content(s: string, out: ParseOut): void {
    if (s.length === 0) return;
    if (!this.sawCall) {
      out.content += s;
      if (this.keepPreCall) this.preCall += s;
      return;
    }
    if (isWs(s)) {
      this.ws += s;
      return;
    }
    out.content += this.ws + s;
    this.ws = '';
  }

  protected beginCall(valueOnly = false): void {
    this.sawCall = true;
    this.cur = new CallScanner(valueOnly);
    this.curIndex = -1;
  }

  /** A call whose name comes outside its JSON (DeepSeek's format). */
  protected nameCall(name: string, out: ParseOut): void {
    this.sawCall = true;
    this.accept(name, out);
  }

  private accept(name: string, out: ParseOut): void {
    if (this.tools.has(name)) {
      this.curIndex = this.next++;
      this.complete.push(false);
      out.startCall(this.curIndex, this.ids(this.curIndex), name);
    } else {
      this.curIndex = -2;
    }
  }

  /**
   * Feed the current call from `from`: returns the index just after its end, -1 if it needs
   * more text, or -2 if it is not valid JSON (the call is then given up).
   */
  protected feedCall(text: string, from: number, out: ParseOut): number {
    const sc = this.cur!;
    const end = sc.feed(text, from);
    if (this.curIndex === -1 && sc.name !== null) this.accept(sc.name, out);
    if (this.curIndex >= 0) out.args(this.curIndex, sc.takeArgs());
    if (sc.failed) {
      this.cur = null;
      return -2;
    }
    if (!sc.done) return -1;
    if (this.curIndex >= 0) {
      if (!sc.sawArgs) out.args(this.curIndex, '{}');
      this.complete[this.curIndex] = true;
    }
    this.cur = null;
    this.curIndex = -1;
    return end;
  }
}

const enum S {
  Text,
  Call,
  After,
  Skip,
}

/**
 * Qwen 2.5 / Qwen3 / Hermes: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
 * (SGLang qwen25_detector.py Qwen25Detector and hermes_detector.py HermesDetector; vLLM
 * tool_parsers/hermes_tool_parser.py Hermes2ProToolParser). The non-streaming content is the text
 * before the first call, stripped (HermesDetector.detect_and_parse).
 */
export class HermesToolParser extends CallsBase {
  private state = S.Text;
  static readonly START = '<tool_call>';
  static readonly END = '</tool_call>';

  push(text: string, out: ParseOut): void {
    const START = HermesToolParser.START;
    const END = HermesToolParser.END;
    const buf = this.held.length > 0 ? this.held + text : text;
    this.held = '';
    let i = 0;
    while (i < buf.length) {
      if (this.state === S.Text) {
        const s = buf.indexOf(START, i);
        if (s < 0) {
          const k = partialSuffix(buf, START, i);
          this.content(buf.slice(i, buf.length - k), out);
          this.held = buf.slice(buf.length - k);
          return;
        }
        this.content(buf.slice(i, s), out);
        i = s + START.length;
        this.state = S.Call;
        this.beginCall();
      } else if (this.state === S.Call) {
        const end = this.feedCall(buf, i, out);
        if (end === -1) return;
        if (end === -2) {
          this.state = S.Skip;
          continue;
        }
        i = end;
        this.state = S.After;
      } else if (this.state === S.After) {
        while (i < buf.length && buf.charCodeAt(i) <= 32) i++;
        if (i === buf.length) return;
        if (buf.startsWith(END, i)) {
          i += END.length;
          this.state = S.Text;
        } else if (END.startsWith(buf.slice(i))) {
          this.held = buf.slice(i);
          return;
        } else {
          this.state = S.Text;
        }
      } else {
        const e = buf.indexOf(END, i);
        if (e < 0) {
          const k = partialSuffix(buf, END, i);
          this.held = buf.slice(buf.length - k);
          return;
        }
        i = e + END.length;
        this.state = S.Text;
      }
    }
  }

  override finish(out: ParseOut): void {
    if (this.state === S.Text) super.finish(out);
    this.held = '';
  }
}
