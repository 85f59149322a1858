// What the dashboard's request view shows of a chat request beyond its tokens: the messages and
// tools it was sent, and the answer as the client got it (reasoning, content, tool calls, finish).
// Kept in the outputs ring beside the token ids, so every field is bounded: a debugging view of
// the request, not a copy of it (a long conversation keeps its first and last messages, each text
// is cut at TEXT_LIMIT characters and the whole at VIEW_BUDGET, with `clipped` saying so).
import { isObject } from './json.ts';
import type { JsonObject } from './types.ts';

/** Characters kept of one text (a message's content, a tool's schema, the answer's reasoning). */
export const TEXT_LIMIT = 4000;
/** Messages kept: the first HEAD_MESSAGES and the last MESSAGE_LIMIT - HEAD_MESSAGES. */
export const MESSAGE_LIMIT = 16;
const HEAD_MESSAGES = 2;
export const TOOL_LIMIT = 32;
export const CALL_LIMIT = 16;

export interface ChatViewCall {
  name: string;
  arguments: string;
}

export interface ChatViewMessage {
  role: string;
  content: string;
  reasoning?: string;
  tool_calls?: ChatViewCall[];
  /** A tool message's answer to this call. */
  tool_call_id?: string;
}

export interface ChatViewTool {
  name: string;
  description: string;
  /** The parameters' JSON schema, serialized (and clipped). */
  parameters: string;
}

export interface ChatViewAnswer {
  reasoning: string;
  content: string;
  tool_calls: ChatViewCall[];
  finish_reason: string | null;
}

export interface ChatView {
  messages: ChatViewMessage[];
  /** Messages left out between the kept head and tail (at index HEAD_MESSAGES). */
  messages_omitted: number;
  tools: ChatViewTool[];
  tools_omitted: number;
  /** "auto", "none", "required", or the named function. */
  tool_choice: string;
  answer: ChatViewAnswer;
  /** Some text was cut at TEXT_LIMIT characters, or calls past CALL_LIMIT left out. */
  clipped: boolean;
}

/**
 * Characters kept of a request's side (its messages and tools) and, apart, of its answer: the
 * outputs ring holds up to 1,024 requests, so a view is at most ~2 x 8,000 characters however
 * long the conversation (texts past the budget are kept empty, `clipped` set).
 */
export const VIEW_BUDGET = 8000;

interface Budget {
  clipped: boolean;
  /** Characters still to keep. */
  left: number;
}

/** Clips a text to the limit and what is left of the budget, noting a cut in `b`. */
export function clip(text: string, b: Budget, limit = TEXT_LIMIT): string {
  const n = Math.min(limit, b.left);
  if (text.length <= n) {
    b.left -= text.length;
    return text;
  }
  b.clipped = true;
  b.left -= n;
  return text.slice(0, n);
}

function textOf(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

function callsOf(v: unknown, flag: Budget): ChatViewCall[] | undefined {
  if (!Array.isArray(v) || v.length === 0) return undefined;
  if (v.length > CALL_LIMIT) flag.clipped = true;
  return v.slice(0, CALL_LIMIT).map((c) => {
    const f = isObject(c) && isObject(c.function) ? c.function : {};
    const args = typeof f.arguments === 'string' ? f.arguments : f.arguments === undefined ? '' : JSON.stringify(f.arguments);
    return { name: typeof f.name === 'string' ? f.name : '?', arguments: clip(args, flag) };
  });
}

/**
 * The request side of a chat request's view, from its (already validated) body: messages, tools,
 * tool_choice. The answer starts empty; the session fills it in.
 */
export function chatViewOf(body: JsonObject): ChatView {
  const flag: Budget = { clipped: false, left: VIEW_BUDGET };
  const all = Array.isArray(body.messages) ? body.messages : [];
  const kept = all.length <= MESSAGE_LIMIT ? all : [...all.slice(0, HEAD_MESSAGES), ...all.slice(all.length - (MESSAGE_LIMIT - HEAD_MESSAGES))];
  const messages = kept.map((m): ChatViewMessage => {
    const o = isObject(m) ? m : {};
    const msg: ChatViewMessage = { role: typeof o.role === 'string' ? o.role : '?', content: clip(textOf(o.content), flag) };
    const reasoning = typeof o.reasoning_content === 'string' ? o.reasoning_content : typeof o.reasoning === 'string' ? o.reasoning : '';
    if (reasoning.length > 0) msg.reasoning = clip(reasoning, flag);
    const calls = callsOf(o.tool_calls, flag);
    if (calls) msg.tool_calls = calls;
    if (typeof o.tool_call_id === 'string') msg.tool_call_id = o.tool_call_id;
    return msg;
  });
  const tools = Array.isArray(body.tools) ? body.tools : [];
  const tc = body.tool_choice;
  const toolChoice = typeof tc === 'string' ? tc
    : isObject(tc) && isObject(tc.function) && typeof tc.function.name === 'string' ? tc.function.name
    : tools.length > 0 ? 'auto' : 'none';
  return {
    messages,
    messages_omitted: all.length - kept.length,
    tools: tools.slice(0, TOOL_LIMIT).map((t): ChatViewTool => {
      const f = isObject(t) && isObject(t.function) ? t.function : {};
      return {
        name: typeof f.name === 'string' ? f.name : '?',
        description: clip(typeof f.description === 'string' ? f.description : '', flag, 500),
        parameters: clip(f.parameters === undefined ? '' : JSON.stringify(f.parameters), flag, 1000),
      };
    }),
    tools_omitted: Math.max(0, tools.length - TOOL_LIMIT),
    tool_choice: toolChoice,
    answer: { reasoning: '', content: '', tool_calls: [], finish_reason: null },
    clipped: flag.clipped,
  };
}

/** Appends to the answer as the session writes it, within the limits. */
export class ChatAnswerLog {
  readonly flag: Budget = { clipped: false, left: VIEW_BUDGET };
  private reasoning = '';
  private content = '';
  private calls: ChatViewCall[] = [];
  private finish: string | null = null;

  addReasoning(t: string): void {
    if (t.length > 0) this.reasoning += clip(t, this.flag, TEXT_LIMIT - this.reasoning.length);
  }

  addContent(t: string): void {
    if (t.length > 0) this.content += clip(t, this.flag, TEXT_LIMIT - this.content.length);
  }

  /** A streamed call delta: a name starts call `index`, arguments add to it. */
  callDelta(index: number, name: string | null, args: string): void {
    if (index >= CALL_LIMIT) {
      this.flag.clipped = true;
      return;
    }
    if (name !== null) this.calls[index] = { name, arguments: '' };
    const c = this.calls[index];
    if (c && args.length > 0) c.arguments += clip(args, this.flag, TEXT_LIMIT - c.arguments.length);
  }

  /** The whole answer's calls (non-streamed, or a forced tool_choice's array), replacing any. */
  setCalls(calls: readonly { name: string; arguments: string }[]): void {
    for (const c of this.calls) if (c !== undefined) this.flag.left += c.arguments.length;
    if (calls.length > CALL_LIMIT) this.flag.clipped = true;
    this.calls = calls.slice(0, CALL_LIMIT).map((c) => ({ name: c.name, arguments: clip(c.arguments, this.flag) }));
  }

  setFinish(reason: string): void {
    this.finish = reason;
  }

  /** The view with this answer, in objects of its own (the ring outlives the session). */
  view(request: ChatView): ChatView {
    return {
      ...request,
      answer: { reasoning: this.reasoning, content: this.content, tool_calls: this.calls.filter((c) => c !== undefined).map((c) => ({ ...c })), finish_reason: this.finish },
      clipped: request.clipped || this.flag.clipped,
    };
  }
}
