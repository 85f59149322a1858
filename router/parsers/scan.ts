// Small pieces the streaming parsers share: how much of a text's end could still begin a marker,
// and an incremental scanner of one tool call's JSON that reads each character once (no re-parse
// of the call per token, unlike the sources' partial_json_parser diffs).

/** Length of the longest end of `text` (from `start` on) that is a proper prefix of `tag` (0: none). */
export function partialSuffix(text: string, tag: string, start = 0): number {
  const first = tag.charCodeAt(0);
  const from = Math.max(start, text.length - tag.length + 1);
  for (let i = from; i < text.length; i++) {
    if (text.charCodeAt(i) !== first) continue;
    if (tag.startsWith(text.slice(i))) return text.length - i;
  }
  return 0;
}

const WS = (c: number) => c === 32 || c === 10 || c === 13 || c === 9;

const enum Phase {
  /** Before the object's `{` (or the value's first character). */
  Open,
  Key,
  Colon,
  Value,
  /** Inside a value that is not a string at depth 1 (a container or a primitive). */
  InValue,
  After,
  Done,
  Error,
}

const enum Kind {
  Skip,
  Name,
  Args,
}

/**
 * One tool call written as JSON: `{"name": ..., "arguments": {...}}` (`parameters` too, as
 * SGLang's parse_base_json reads it), or (`valueOnly`) the arguments value alone. The arguments
 * come out as they are read, re-spaced as Python's json.dumps writes them (`", "`, `": "`, no other
 * whitespace outside strings), which is what SGLang's and vLLM's non-streaming parsers return
 * (json.dumps(arguments, ensure_ascii=False)); so streamed fragments concatenate to exactly the
 * non-streaming arguments.
 */
export class CallScanner {
  phase = Phase.Open;
  private depth = 0;
  private inStr = false;
  private esc = false;
  private key = '';
  private kind = Kind.Skip;
  /** A primitive value (number, true, ...) at depth 1. */
  private primitive = false;
  private nameRaw = '';
  /** The call's name once read (null: not yet, or absent). */
  name: string | null = null;
  /** Arguments read and not yet taken (taken by the owner once the name is known). */
  args = '';
  /** Whether any arguments were read. */
  sawArgs = false;

  constructor(private readonly valueOnly = false) {
    if (valueOnly) {
      this.phase = Phase.Value;
      this.kind = Kind.Args;
    }
  }

  get done(): boolean {
    return this.phase === Phase.Done;
  }

  get failed(): boolean {
    return this.phase === Phase.Error;
  }

  takeArgs(): string {
    const a = this.args;
    this.args = '';
    return a;
  }

  /** Reads `text` from `from`; returns the index just after the call's end, or -1 (not yet). */
  feed(text: string, from = 0): number {
    for (let i = from; i < text.length; i++) {
      if (this.phase === Phase.Done || this.phase === Phase.Error) return i;
      const c = text.charCodeAt(i);
      if (this.inStr) {
        // A run of plain string characters at once.
        let j = i;
        while (j < text.length) {
          const d = text.charCodeAt(j);
          if (this.esc) this.esc = false;
          else if (d === 92) this.esc = true;
          else if (d === 34) break;
          j++;
        }
        const run = text.slice(i, j);
        this.strChars(run);
        if (j < text.length) {
          // The closing quote.
          this.inStr = false;
          this.strChars('"');
          this.endString();
        }
        i = j;
        continue;
      }
      this.char(c, text[i]!);
      if ((this.phase as Phase) === Phase.Done) return i + 1;
    }
    return this.phase === Phase.Done ? text.length : -1;
  }

  private strChars(s: string): void {
    if (this.depth === 1 && this.phase === Phase.Key) this.key += s;
    else if (this.kind === Kind.Name && this.depth === 1) this.nameRaw += s;
    else if (this.kind === Kind.Args) this.emit(s);
  }

  private endString(): void {
    if (this.depth !== 1 && !(this.valueOnly && this.depth === 0)) return;
    if (this.phase === Phase.Key) {
      this.phase = Phase.Colon;
      return;
    }
    if (this.phase === Phase.Value) {
      // A string value at depth 1 (or a bare string of arguments) ended.
      if (this.kind === Kind.Name) {
        try {
          this.name = JSON.parse(this.nameRaw) as string;
        } catch {
          this.phase = Phase.Error;
          return;
        }
      }
      this.valueEnd();
    }
  }

  private emit(s: string): void {
    this.args += s;
    this.sawArgs = true;
  }

  private valueEnd(): void {
    this.kind = Kind.Skip;
    this.primitive = false;
    this.phase = this.valueOnly ? Phase.Done : Phase.After;
  }

  private char(c: number, ch: string): void {
    const phase = this.phase;
    if (phase === Phase.InValue) {
      if (!this.primitive) this.container(c, ch);
      else if (c === 44 || c === 125 || WS(c)) {
        this.valueEnd();
        if (!WS(c)) this.char(c, ch);
      } else if (this.kind === Kind.Args) this.emit(ch);
      return;
    }
    // Between the tokens of the call's object, whitespace is nothing; any unexpected token is an error.
    if (WS(c)) return;
    if (phase === Phase.Open) {
      if (c === 123) {
        this.depth = 1;
        this.phase = Phase.Key;
      } else this.phase = Phase.Error;
    } else if (phase === Phase.Key) {
      if (c === 34) {
        this.key = '"';
        this.inStr = true;
      } else this.phase = c === 125 ? Phase.Done : Phase.Error;
    } else if (phase === Phase.Colon) {
      if (c === 58) {
        this.phase = Phase.Value;
        const k = this.key;
        this.kind = k === '"name"' ? Kind.Name : k === '"arguments"' || k === '"parameters"' ? Kind.Args : Kind.Skip;
      } else this.phase = Phase.Error;
    } else if (phase === Phase.Value) {
      if (c === 34) {
        this.inStr = true;
        if (this.kind === Kind.Name) this.nameRaw = '"';
        else if (this.kind === Kind.Args) this.emit('"');
        return;
      }
      if (this.kind === Kind.Name) this.kind = Kind.Skip; // a name that is not a string
      if (c === 123 || c === 91) this.depth++;
      else this.primitive = true;
      this.phase = Phase.InValue;
      if (this.kind === Kind.Args) this.emit(ch);
    } else if (phase === Phase.After) {
      this.phase = c === 44 ? Phase.Key : c === 125 ? Phase.Done : Phase.Error;
    }
  }

  /** A character inside a container value (depth ≥ 2, outside strings). */
  private container(c: number, ch: string): void {
    const args = this.kind === Kind.Args;
    if (c === 34) {
      this.inStr = true;
      if (args) this.emit('"');
      return;
    }
    if (c === 123 || c === 91) {
      this.depth++;
      if (args) this.emit(ch);
      return;
    }
    if (c === 125 || c === 93) {
      this.depth--;
      if (args) this.emit(ch);
      if (this.depth === (this.valueOnly ? 0 : 1)) this.valueEnd();
      return;
    }
    if (WS(c)) return;
    if (!args) return;
    if (c === 44) this.emit(', ');
    else if (c === 58) this.emit(': ');
    else this.emit(ch);
  }
}
