// A chat request whole, as the Request view's "Chat" section draws it: the messages it was sent
// (with the gap where the router kept only a long conversation's head and tail), the tools it
// offered, and the answer the client got (reasoning, content, tool calls, finish). Pure: the
// `chat` of the router's `/requests/:id/output` answer in, plain rows out.
import type { RequestOutput } from '../../../host/contract.ts';

type ChatView = NonNullable<RequestOutput['chat']>;

export interface ChatCallLine {
  name: string;
  /** The arguments, pretty-printed when they are JSON (a migrated call is whole JSON again). */
  arguments: string;
}

export type ChatLine =
  | { kind: 'message'; index: number; role: string; content: string; reasoning: string | null; calls: ChatCallLine[]; toolCallId: string | null }
  | { kind: 'gap'; omitted: number };

export interface ChatLayout {
  lines: ChatLine[];
  tools: { name: string; description: string; parameters: string }[];
  /** "12 tools (first 32 shown)", "tool_choice required", or null with no tools. */
  toolsNote: string | null;
  answer: { reasoning: string | null; content: string | null; calls: ChatCallLine[]; finish: string };
  /** Shown when the router cut a text or left calls out (it keeps a bounded view). */
  clippedNote: string | null;
}

function pretty(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    // Not JSON: a call cut by the router's text limit, or a model's malformed arguments, as sent.
    return args;
  }
}

const callLines = (calls: readonly { name: string; arguments: string }[] | undefined): ChatCallLine[] =>
  (calls ?? []).map((c) => ({ name: c.name, arguments: pretty(c.arguments) }));

/** The head messages the router keeps before a gap (router/core/chat-view.ts). */
const HEAD_MESSAGES = 2;

export function chatLayout(chat: ChatView): ChatLayout {
  const lines: ChatLine[] = [];
  chat.messages.forEach((m, i) => {
    // Messages past the gap keep their place in the conversation.
    const index = chat.messages_omitted > 0 && i >= HEAD_MESSAGES ? i + chat.messages_omitted : i;
    if (chat.messages_omitted > 0 && i === HEAD_MESSAGES) lines.push({ kind: 'gap', omitted: chat.messages_omitted });
    lines.push({ kind: 'message', index, role: m.role, content: m.content, reasoning: m.reasoning ?? null, calls: callLines(m.tool_calls), toolCallId: m.tool_call_id ?? null });
  });
  const nTools = chat.tools.length + chat.tools_omitted;
  let toolsNote: string | null = null;
  if (nTools > 0) {
    toolsNote = `${nTools} tool${nTools > 1 ? 's' : ''}${chat.tools_omitted > 0 ? ` (first ${chat.tools.length} shown)` : ''}, tool_choice ${chat.tool_choice}`;
  }
  const a = chat.answer;
  return {
    lines,
    tools: chat.tools.map((t) => ({ ...t, parameters: t.parameters ? pretty(t.parameters) : '' })),
    toolsNote,
    answer: {
      reasoning: a.reasoning.length > 0 ? a.reasoning : null,
      content: a.content.length > 0 ? a.content : null,
      calls: callLines(a.tool_calls),
      finish: a.finish_reason ?? 'none (the request did not finish)',
    },
    clippedNote: chat.clipped ? 'Cut: the router keeps the first 4,000 characters of a text, 8,000 of the request and of the answer, and 16 tool calls.' : null,
  };
}
