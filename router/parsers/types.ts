// What the chat output parsers produce: for each piece of detokenized text pushed in, the
// reasoning, the content and the tool-call deltas it decides (some text may be held back while it
// could still start a marker). The parsers keep their state per logical request, over the text
// Baton detokenizes across every attempt, so a migration point is just another split of the text.

/**
 * One streamed tool-call delta, shaped as vLLM's DeltaToolCall and SGLang's ToolCall chunk: the
 * first delta of a call carries its id and name (with `arguments: ""` or more), the later ones only
 * `arguments` fragments, which concatenate to the call's arguments JSON.
 */
export interface ToolCallDelta {
  index: number;
  /** Set on the call's first delta. */
  id: string | null;
  name: string | null;
  arguments: string;
}

/** One complete tool call (the non-streaming answer's `message.tool_calls[i]`). */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** Where a push writes what it decided; the caller drains it after each push. */
export class ParseOut {
  reasoning = '';
  content = '';
  calls: ToolCallDelta[] = [];

  get empty(): boolean {
    return this.reasoning.length === 0 && this.content.length === 0 && this.calls.length === 0;
  }

  reset(): void {
    this.reasoning = '';
    this.content = '';
    if (this.calls.length > 0) this.calls = [];
  }

  /** A call's name (its first delta). */
  startCall(index: number, id: string, name: string): void {
    this.calls.push({ index, id, name, arguments: '' });
  }

  /** More of a call's arguments, merged into this push's last delta of the same call. */
  args(index: number, text: string): void {
    if (text.length === 0) return;
    const last = this.calls[this.calls.length - 1];
    if (last !== undefined && last.index === index) last.arguments += text;
    else this.calls.push({ index, id: null, name: null, arguments: text });
  }
}

/** A tool-call format's streaming parser: content passes through, calls become deltas. */
export interface ToolParser {
  push(text: string, out: ParseOut): void;
  /** The end of the output: release held-back text. */
  finish(out: ParseOut): void;
}

/** Names the request's tools offer (SGLang drops a call to any other name). */
export type ToolNames = ReadonlySet<string>;

/** The id of the request's i-th tool call. */
export type CallIds = (index: number) => string;
