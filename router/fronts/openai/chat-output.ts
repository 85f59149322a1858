// The chat output parsers' plumbing for the chat/completions session (session.ts): what the tool
// and reasoning parsers separate from the text as it streams, a forced tool_choice's held content
// and its calls (forced-tools.ts), the finish reason the calls decide, and the answer as the
// client got it, for the dashboard.
import { ChatAnswerLog, type ChatView } from '../../core/chat-view.ts';
import { ChatParser, type ChatParsing, type ParseOut } from '../../parsers/index.ts';
import type { Ended } from './finish.ts';
import { forcedToolCalls, type ForcedCall } from './forced-tools.ts';
import type { OpenAiRequest } from './request.ts';

export class ChatOutput {
  /** What the chat output parsers separate (the request's, or a forced tool_choice's); null: nothing. */
  readonly parsing: ChatParsing | null;
  /** The chat output parsers (tool calls, reasoning), when the router has them and the request asks. */
  readonly parser: ChatParser | null;
  /** The answer as the client got it, for the dashboard (chat only; bounded). */
  readonly answer: ChatAnswerLog | null;
  /** A forced tool_choice's calls read from its JSON array at the end (forced-tools.ts). */
  toolCalls: ForcedCall[] | null = null;
  /** A forced tool_choice's content, held until the end decides whether it is a call array (forced-tools.ts). */
  private forcedText = '';

  constructor(
    private readonly req: OpenAiRequest,
    streaming: boolean,
  ) {
    this.parsing = req.kind !== 'chat' ? null : req.forcedTools ? (req.forcedParsing ?? null) : (req.parsing ?? null);
    this.parser = this.parsing ? new ChatParser(this.parsing, !streaming) : null;
    this.answer = req.chatView ? new ChatAnswerLog() : null;
  }

  chatView(): ChatView | null {
    return this.answer !== null && this.req.chatView ? this.answer.view(this.req.chatView) : null;
  }

  /**
   * The parsers' output for `text` (and, at the `end`, whatever they held back, merged in); a
   * forced tool_choice's content held; the answer log told. Only with parsers.
   */
  parse(text: string, end: boolean): ParseOut {
    const parser = this.parser!;
    let o: ParseOut = parser.push(text);
    if (end) {
      // The end: what the parsers held back is decided now, merged into this last chunk.
      const reasoning = o.reasoning;
      const content = o.content;
      const calls = o.calls;
      o = parser.finish();
      o.reasoning = reasoning + o.reasoning;
      o.content = content + o.content;
      if (calls.length > 0) o.calls = [...calls, ...o.calls];
    }
    if (this.req.forcedTools) this.holdForced(o, end);
    if (this.answer !== null) {
      this.answer.addReasoning(o.reasoning);
      this.answer.addContent(o.content);
      for (const d of o.calls) this.answer.callDelta(d.index, d.name, d.arguments);
      if (this.toolCalls !== null) this.answer.setCalls(this.toolCalls);
    }
    return o;
  }

  /**
   * A forced tool_choice's content, held (nothing of it streams): at the end it is the JSON
   * array's calls, or, when the model answered in its own call format (the parser's calls) or
   * wrote no array, content again.
   */
  private holdForced(o: ParseOut, last: boolean): void {
    this.forcedText += o.content;
    o.content = '';
    if (!last) return;
    if (!this.parser!.called) this.toolCalls = this.forcedCalls(this.forcedText);
    // Beside calls in the model's own format, only text that is more than the blank lines around
    // them (the non-streamed answer strips it: ChatParser.parseWhole).
    if (this.toolCalls === null && (!this.parser!.called || /\S/.test(this.forcedText))) o.content = this.forcedText;
    this.forcedText = '';
  }

  /** A forced answer's JSON array of calls (forced-tools.ts), the first only with parallel_tool_calls false. */
  forcedCalls(text: string): ForcedCall[] | null {
    const calls = forcedToolCalls(text);
    return calls !== null && this.req.parallelToolCalls === false ? calls.slice(0, 1) : calls;
  }

  /** Whether the answer holds tool calls (the parsers', or a forced JSON array's). */
  private get called(): boolean {
    return this.toolCalls !== null || (this.parser !== null && this.parser.called);
  }

  /** SGLang's and vLLM's finish_reason "tool_calls": a call was made and the model stopped. */
  finishReason(end: Ended): string {
    const reason = end.reason === 'stop' && this.called ? 'tool_calls' : end.reason;
    this.answer?.setFinish(reason);
    return reason;
  }
}
