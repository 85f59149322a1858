// Tool-call parsers over streamed text. The formats whose calls are JSON between markers (qwen25,
// llama3, mistral, deepseekv3) are rows of one table (`CALL_FORMATS`) read by one scanner;
// qwen3_coder (XML-ish parameters) and pythonic (a Python list) have parsers of their own. Each
// reads every character once and holds back only what could still begin a marker. Content around the calls passes through; a call to a
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
  protected curIndex = -1;
  /** Whitespace after a call, held: shown only if more content follows it. */
  private ws = '';
  /** Calls whose JSON closed (a truncated call is streamed but not in a non-streaming answer). */
  readonly complete: boolean[] = [];
  protected held = '';
  private sawCall = false;
  /** The content before the first call (kept for a non-streaming answer only). */
  preCall = '';
  /** A non-streaming answer's content: the text before the first call, stripped (false: all of it). */
  readonly contentBeforeCallsOnly: boolean = true;

  constructor(
    protected readonly tools: ToolNames,
    private readonly ids: CallIds,
    private readonly keepPreCall = false,
  ) {}

  abstract push(text: string, out: ParseOut): void;

  /**
   * Content from `i` up to `marker`: returns the index just after the marker, or -1 if it is not
   * in `buf` (the end of `buf` that could still begin it is held).
   */
  protected seek(buf: string, i: number, marker: string, out: ParseOut): number {
    const s = buf.indexOf(marker, i);
    if (s < 0) {
      const k = partialSuffix(buf, marker, i);
      this.content(buf.slice(i, buf.length - k), out);
      this.held = buf.slice(buf.length - k);
      return -1;
    }
    this.content(buf.slice(i, s), out);
    return s + marker.length;
  }

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

  protected accept(name: string, out: ParseOut): void {
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

/**
 * A tool-call format whose calls are JSON between markers: what the one scanner below
 * (`MarkedCallsParser`) needs to know of it. Every format it reads is a row of `CALL_FORMATS`.
 */
export interface CallFormat {
  /** The marker that opens the calls; the text before it is content. */
  start: string;
  /** An output whose first character is `{` is a call without `start` (Llama 3). */
  bare: boolean;
  /** After `start`: whitespace, then this character (Mistral's `[`) is skipped if present; 0: none. */
  open: number;
  /**
   * Each call is `begin`, a header naming it (`header`'s group 1, trimmed) and its arguments as a
   * JSON value, then anything up to `end` (DeepSeek); null: each call is one JSON object with its
   * name inside (`{"name": ..., "arguments": ...}`).
   */
  each: { begin: string; header: RegExp; end: string } | null;
  /** The character between two calls (Llama 3's `;`, Mistral's `,`); 0: none. */
  separator: number;
  /** What closes the calls (Hermes' `</tool_call>`, Mistral's `]`, DeepSeek's calls end); '': nothing. */
  end: string;
  /** Whitespace after a call that no separator follows is content (Llama 3); otherwise it is dropped. */
  keepSpace: boolean;
  /** A call that is not valid JSON: skip to `end` and read on (Hermes); otherwise nothing more is read. */
  skipBadCall: boolean;
  /**
   * A non-streaming answer's content is all the text outside the calls (Llama 3); otherwise only
   * the text before the first call, stripped.
   */
  contentAfterCalls: boolean;
}

/** The formats of calls written as JSON, as SGLang's and vLLM's detectors read them. */
export const CALL_FORMATS = {
  /**
   * Qwen 2.5 / Qwen3 / Hermes: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
   * (SGLang qwen25_detector.py Qwen25Detector and hermes_detector.py HermesDetector; vLLM
   * tool_parsers/hermes_tool_parser.py Hermes2ProToolParser). The non-streaming content is the text
   * before the first call, stripped (HermesDetector.detect_and_parse).
   */
  qwen25: { start: '<tool_call>', bare: false, open: 0, each: null, separator: 0, end: '</tool_call>', keepSpace: false, skipBadCall: true, contentAfterCalls: false },
  /**
   * Llama 3.x JSON calls: `<|python_tag|>{"name": ..., "parameters": {...}}`, or an output that
   * starts with `{`; several separated by `;` (SGLang llama32_detector.py Llama32Detector, vLLM
   * tool_parsers/llama_tool_parser.py). The non-streaming content is the text before the tag and
   * after the calls, as Llama32Detector.detect_and_parse returns it.
   */
  llama3: { start: '<|python_tag|>', bare: true, open: 0, each: null, separator: 59, end: '', keepSpace: true, skipBadCall: false, contentAfterCalls: true },
  /**
   * Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` (SGLang mistral_detector.py
   * MistralDetector, vLLM tool_parsers/mistral_tool_parser.py). The non-streaming content is the
   * text before the calls, stripped.
   */
  mistral: { start: '[TOOL_CALLS]', bare: false, open: 91, each: null, separator: 44, end: ']', keepSpace: false, skipBadCall: false, contentAfterCalls: false },
  /**
   * DeepSeek-V3: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`
   * (SGLang deepseekv3_detector.py DeepSeekV3Detector, vLLM tool_parsers/deepseekv3_tool_parser.py).
   * The non-streaming content is the text before the calls, stripped.
   */
  deepseekv3: {
    start: '<｜tool▁calls▁begin｜>',
    bare: false,
    open: 0,
    each: { begin: '<｜tool▁call▁begin｜>', header: /^[^\n]*?<｜tool▁sep｜>([^\n]*)\n```(?:json)?\n/, end: '<｜tool▁call▁end｜>' },
    separator: 0,
    end: '<｜tool▁calls▁end｜>',
    keepSpace: false,
    skipBadCall: false,
    contentAfterCalls: false,
  },
} satisfies Record<string, CallFormat>;

/** A header not matched within this many characters is not one: the scanner reads no further. */
const HEADER_LIMIT = 512;

const enum S {
  /** The output's first character, for a format whose call may open it bare. */
  Start,
  Text,
  Open,
  Call,
  /** After `start` (DeepSeek) or a call: a separator, the next call, the end, or content. */
  Between,
  Header,
  /** After a call's arguments: up to its `each.end`. */
  Tail,
  /** A call that was not JSON: up to the `end`. */
  Skip,
  Done,
}

/**
 * The streaming scanner of every `CallFormat`: content up to `start`, then calls (each read once by
 * a `CallScanner`) until something that is neither a call nor between calls.
 */
export class MarkedCallsParser extends CallsBase {
  private state: S;
  override readonly contentBeforeCallsOnly: boolean;

  constructor(
    private readonly f: CallFormat,
    tools: ToolNames,
    ids: CallIds,
    keepPreCall: boolean,
  ) {
    super(tools, ids, keepPreCall);
    this.state = f.bare ? S.Start : S.Text;
    this.contentBeforeCallsOnly = !f.contentAfterCalls;
  }

  push(text: string, out: ParseOut): void {
    const f = this.f;
    const buf = this.held.length > 0 ? this.held + text : text;
    this.held = '';
    let i = 0;
    while (i < buf.length) {
      if (this.state === S.Text) {
        i = this.seek(buf, i, f.start, out);
        if (i < 0) return;
        if (f.each !== null) this.state = S.Between;
        else if (f.open !== 0) this.state = S.Open;
        else this.call();
      } else if (this.state === S.Call) {
        const end = this.feedCall(buf, i, out);
        if (end === -1) return;
        if (end === -2) {
          this.state = f.skipBadCall ? S.Skip : S.Done;
          continue;
        }
        i = end;
        this.state = f.each !== null ? S.Tail : S.Between;
      } else if (this.state === S.Between) {
        let j = i;
        while (j < buf.length && buf.charCodeAt(j) <= 32) j++;
        if (j === buf.length) {
          if (f.keepSpace) this.held = buf.slice(i);
          return;
        }
        if (!f.keepSpace) i = j;
        if (f.separator !== 0 && buf.charCodeAt(j) === f.separator) {
          i = j + 1;
          this.call();
        } else if (f.each !== null && buf.startsWith(f.each.begin, j)) {
          i = j + f.each.begin.length;
          this.state = S.Header;
        } else if (f.end.length > 0 && buf.startsWith(f.end, j)) {
          i = j + f.end.length;
          this.state = S.Text;
        } else if (this.couldBegin(buf.slice(j))) {
          this.held = buf.slice(j);
          return;
        } else this.state = S.Text;
      } else if (this.state === S.Start) {
        if (buf.charCodeAt(0) === 123) this.call();
        else this.state = S.Text;
      } else if (this.state === S.Open) {
        while (i < buf.length && buf.charCodeAt(i) <= 32) i++;
        if (i === buf.length) return;
        if (buf.charCodeAt(i) === f.open) i++;
        this.call();
      } else if (this.state === S.Header) {
        const m = f.each!.header.exec(buf.slice(i));
        if (m === null) {
          // The header is short: hold it until it is complete.
          if (buf.length - i > HEADER_LIMIT) this.state = S.Done;
          else this.held = buf.slice(i);
          return;
        }
        i += m[0].length;
        this.beginCall(true);
        this.nameCall(m[1]!.trim(), out);
        this.state = S.Call;
      } else if (this.state === S.Tail) {
        const e = f.each!.end;
        const at = buf.indexOf(e, i);
        if (at < 0) {
          this.held = buf.slice(i + Math.max(0, buf.length - i - e.length));
          return;
        }
        i = at + e.length;
        this.state = S.Between;
      } else if (this.state === S.Skip) {
        const at = buf.indexOf(f.end, i);
        if (at < 0) {
          const k = partialSuffix(buf, f.end, i);
          this.held = buf.slice(buf.length - k);
          return;
        }
        i = at + f.end.length;
        this.state = S.Text;
      } else return;
    }
  }

  private call(): void {
    this.state = S.Call;
    this.beginCall();
  }

  /** Whether `rest`, the end of the text, could still grow into the end or the next call. */
  private couldBegin(rest: string): boolean {
    return (this.f.end.length > 0 && this.f.end.startsWith(rest)) || (this.f.each !== null && this.f.each.begin.startsWith(rest));
  }

  override finish(out: ParseOut): void {
    if (this.state === S.Text || this.state === S.Start) super.finish(out);
    this.held = '';
  }
}

const enum Q {
  Text,
  Call,
  Function,
  Param,
  Done,
}

/** Python's json.dumps(v, ensure_ascii=False) of a parsed value. */
export function pyJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`).join(', ')}}`;
}

/**
 * A parameter's text as the type its schema gives (SGLang qwen3_coder_detector.py
 * Qwen3CoderDetector._convert_param_value): strings stay text, integers, numbers and booleans are
 * read, objects and arrays are JSON; what does not read as its type stays a string.
 */
export function convertParam(value: string, type: string | null): unknown {
  if (value.toLowerCase() === 'null') return null;
  if (type === null) return value;
  const t = type.trim().toLowerCase();
  if (['string', 'str', 'text', 'varchar', 'char', 'enum'].includes(t)) return value;
  if (/^(int|uint|long|short|unsigned)/.test(t)) return /^\s*[-+]?\d+\s*$/.test(value) ? Number.parseInt(value, 10) : value;
  if (t.startsWith('num') || t.startsWith('float')) {
    const n = Number(value);
    return value.trim() === '' || Number.isNaN(n) ? value : n;
  }
  if (t === 'boolean' || t === 'bool' || t === 'binary') return value.toLowerCase() === 'true';
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}

/**
 * Qwen3-Coder's XML-ish calls: `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>`
 * (SGLang qwen3_coder_detector.py Qwen3CoderDetector, vLLM tool_parsers/qwen3coder_tool_parser.py).
 * Arguments stream as SGLang builds them: `{`, then `"key": value` per parameter (typed by the
 * tool's schema), then `}`.
 */
export class Qwen3CoderToolParser extends CallsBase {
  private state = Q.Text;
  private params = 0;
  private name = '';
  /** Where the search for a parameter's end resumes in the held text. */
  private scanFrom = 0;

  constructor(
    tools: ToolNames,
    ids: CallIds,
    keepPreCall: boolean,
    private readonly schemas: ReadonlyMap<string, Readonly<Record<string, unknown>>>,
  ) {
    super(tools, ids, keepPreCall);
  }

  push(text: string, out: ParseOut): void {
    const buf = this.held.length > 0 ? this.held + text : text;
    this.held = '';
    let i = 0;
    while (i < buf.length) {
      if (this.state === Q.Text) {
        i = this.seek(buf, i, '<tool_call>', out);
        if (i < 0) return;
        this.state = Q.Call;
      } else if (this.state === Q.Call || this.state === Q.Function) {
        while (i < buf.length && buf.charCodeAt(i) <= 32) i++;
        if (i === buf.length) return;
        const rest = buf.slice(i, i + 16);
        const tag = this.state === Q.Call ? ['<function=', '</tool_call>'] : ['<parameter=', '</function>'];
        if (tag.some((t) => t.startsWith(rest) && rest.length < t.length)) {
          this.held = buf.slice(i);
          return;
        }
        if (this.state === Q.Call && buf.startsWith('<function=', i)) {
          const gt = buf.indexOf('>', i);
          if (gt < 0) {
            this.held = buf.slice(i);
            return;
          }
          this.name = buf.slice(i + '<function='.length, gt);
          this.params = 0;
          this.curIndex = -1;
          this.nameCall(this.name, out);
          i = gt + 1;
          this.state = Q.Function;
        } else if (this.state === Q.Call && buf.startsWith('</tool_call>', i)) {
          i += '</tool_call>'.length;
          this.state = Q.Text;
        } else if (this.state === Q.Function && buf.startsWith('<parameter=', i)) {
          this.state = Q.Param;
          this.scanFrom = 0;
          const sliced = buf.slice(i);
          i = buf.length;
          this.param(sliced, out);
        } else if (this.state === Q.Function && buf.startsWith('</function>', i)) {
          i += '</function>'.length;
          if (this.curIndex >= 0) {
            out.args(this.curIndex, this.params === 0 ? '{}' : '}');
            this.complete[this.curIndex] = true;
          }
          this.curIndex = -1;
          this.state = Q.Call;
        } else {
          this.state = Q.Done;
        }
      } else if (this.state === Q.Param) {
        const sliced = buf.slice(i);
        i = buf.length;
        this.param(sliced, out);
      } else return;
    }
  }

  /** `text` starts at `<parameter=`: emit the parameter once its end is in sight, else hold it. */
  private param(text: string, out: ParseOut): void {
    const gt = text.indexOf('>');
    if (gt < 0) {
      this.held = text;
      return;
    }
    const from = Math.max(gt + 1, this.scanFrom);
    const ends = [text.indexOf('</parameter>', from), text.indexOf('<parameter=', from), text.indexOf('</function>', from)].filter((x) => x >= 0);
    if (ends.length === 0) {
      this.held = text;
      this.scanFrom = Math.max(gt + 1, text.length - 12);
      return;
    }
    const end = Math.min(...ends);
    const key = text.slice('<parameter='.length, gt);
    let value = text.slice(gt + 1, end);
    if (value.startsWith('\n')) value = value.slice(1);
    if (value.endsWith('\n')) value = value.slice(0, -1);
    if (this.curIndex >= 0) {
      const props = this.schemas.get(this.name);
      const spec = props?.[key];
      const type = typeof spec === 'object' && spec !== null && typeof (spec as { type?: unknown }).type === 'string' ? (spec as { type: string }).type : props !== undefined && key in props ? 'string' : null;
      const kv = `${JSON.stringify(key)}: ${pyJson(convertParam(value, type))}`;
      out.args(this.curIndex, this.params === 0 ? `{${kv}` : `, ${kv}`);
    }
    this.params++;
    this.state = Q.Function;
    const after = text.startsWith('</parameter>', end) ? end + '</parameter>'.length : end;
    this.push(text.slice(after), out);
  }

  override finish(out: ParseOut): void {
    if (this.state === Q.Text) super.finish(out);
    this.held = '';
  }
}

/** A Python literal (ast.literal_eval's subset SGLang reads: constants, lists, dicts) at `s[i]`. */
class PyLiteral {
  i = 0;
  constructor(private readonly s: string) {}

  private ws(): void {
    while (this.i < this.s.length && /\s/.test(this.s[this.i]!)) this.i++;
  }

  private fail(): never {
    throw new Error(`not a Python literal at ${this.i}`);
  }

  ident(): string {
    this.ws();
    const m = /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*/.exec(this.s.slice(this.i));
    if (!m) this.fail();
    this.i += m[0].length;
    return m[0];
  }

  expect(c: string): void {
    this.ws();
    if (this.s[this.i] !== c) this.fail();
    this.i++;
  }

  peek(): string {
    this.ws();
    return this.s[this.i] ?? '';
  }

  value(): unknown {
    const c = this.peek();
    if (c === '"' || c === "'") return this.str(c);
    if (c === '[') return this.seq(']');
    if (c === '(') return this.seq(')');
    if (c === '{') {
      this.i++;
      const o: Record<string, unknown> = {};
      while (this.peek() !== '}') {
        const k = this.value();
        this.expect(':');
        o[String(k)] = this.value();
        if (this.peek() === ',') this.i++;
        else if (this.peek() !== '}') this.fail();
      }
      this.i++;
      return o;
    }
    const m = /^(True|False|None|-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)/.exec(this.s.slice(this.i));
    if (!m) this.fail();
    this.i += m[0].length;
    return m[0] === 'True' ? true : m[0] === 'False' ? false : m[0] === 'None' ? null : Number(m[0]);
  }

  private seq(close: string): unknown[] {
    this.i++;
    const out: unknown[] = [];
    while (this.peek() !== close) {
      out.push(this.value());
      if (this.peek() === ',') this.i++;
      else if (this.peek() !== close) this.fail();
    }
    this.i++;
    return out;
  }

  private str(q: string): string {
    this.i++;
    let out = '';
    const ESC: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '0': '\0' };
    while (this.i < this.s.length && this.s[this.i] !== q) {
      const ch = this.s[this.i++]!;
      if (ch !== '\\') {
        out += ch;
        continue;
      }
      const e = this.s[this.i++] ?? '';
      if (e === 'u' || e === 'x') {
        const n = e === 'u' ? 4 : 2;
        out += String.fromCharCode(Number.parseInt(this.s.slice(this.i, this.i + n), 16));
        this.i += n;
      } else out += ESC[e] ?? `\\${e}`;
    }
    if (this.s[this.i] !== q) this.fail();
    this.i++;
    return out;
  }
}

/** `[f(a=1, b="x"), g()]` read as calls; null if it is not a list of calls with literal arguments. */
export function pythonicCalls(text: string): { name: string; args: Record<string, unknown> }[] | null {
  const p = new PyLiteral(text);
  try {
    p.expect('[');
    const calls: { name: string; args: Record<string, unknown> }[] = [];
    while (p.peek() !== ']') {
      const name = p.ident();
      p.expect('(');
      const args: Record<string, unknown> = {};
      while (p.peek() !== ')') {
        const key = p.ident();
        p.expect('=');
        args[key] = p.value();
        if (p.peek() === ',') p.i++;
        else if (p.peek() !== ')') return null;
      }
      p.i++;
      calls.push({ name, args });
      if (p.peek() === ',') p.i++;
      else if (p.peek() !== ']') return null;
    }
    p.i++;
    return p.peek() === '' ? calls : null;
  } catch {
    return null;
  }
}

const enum Y {
  Start,
  List,
  Text,
}

/**
 * Pythonic calls, Llama 3.2 / Llama 4's other format: the whole output is
 * `[get_weather(city="Paris"), search(q='x', n=3)]`, Python literals as arguments (SGLang
 * pythonic_detector.py PythonicDetector, vLLM tool_parsers/pythonic_tool_parser.py). The list is
 * held until its closing `]` (read once, bracket and string aware) and its calls come out whole,
 * as PythonicDetector.parse_streaming_increment sends them; an output that is not such a list is
 * content.
 */
export class PythonicToolParser extends CallsBase {
  private state = Y.Start;
  private list = '';
  private depth = 0;
  private quote = '';
  private esc = false;

  push(text: string, out: ParseOut): void {
    let t = this.held.length > 0 ? this.held + text : text;
    this.held = '';
    if (this.state === Y.Start) {
      const j = t.search(/\S/);
      if (j < 0) {
        this.held = t;
        return;
      }
      if (t[j] !== '[') {
        this.state = Y.Text;
        this.content(t, out);
        return;
      }
      this.state = Y.List;
      t = t.slice(j);
    }
    if (this.state === Y.Text) {
      this.content(t, out);
      return;
    }
    // Find the list's closing bracket, reading each character once.
    let end = -1;
    for (let i = 0; i < t.length && end < 0; i++) {
      const c = t[i]!;
      if (this.quote !== '') {
        if (this.esc) this.esc = false;
        else if (c === '\\') this.esc = true;
        else if (c === this.quote) this.quote = '';
      } else if (c === '"' || c === "'") this.quote = c;
      else if (c === '[' || c === '(' || c === '{') this.depth++;
      else if (c === ']' || c === ')' || c === '}') {
        this.depth--;
        if (this.depth === 0) end = i;
      }
    }
    if (end < 0) {
      this.list += t;
      return;
    }
    const listText = this.list + t.slice(0, end + 1);
    this.list = '';
    this.state = Y.Text;
    const calls = pythonicCalls(listText);
    if (calls === null) this.content(listText, out);
    else {
      for (const c of calls) {
        this.nameCall(c.name, out);
        if (this.curIndex >= 0) {
          out.args(this.curIndex, pyJson(c.args));
          this.complete[this.curIndex] = true;
        }
      }
    }
    this.content(t.slice(end + 1), out);
  }

  override finish(out: ParseOut): void {
    // A list never closed (max_tokens): its text is content, as detect_and_parse leaves it.
    if (this.state === Y.List) this.content(this.list, out);
    else if (this.held.length > 0) this.content(this.held, out);
    this.list = '';
    this.held = '';
  }
}
