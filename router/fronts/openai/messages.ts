// A chat request's `messages`, checked and normalized as SGLang hands them to the chat template
// (python/sglang/srt/entrypoints/openai/protocol.py ChatCompletionMessageParam for the roles;
// serving_chat.py _apply_jinja_template for the rest). Agent clients send back the assistant
// message they were answered with (`content: null` beside `tool_calls`, `arguments` a JSON
// string, `reasoning_content: null`), and templates index, iterate and `tojson` those fields:
// SGLang renders that turn, so Baton must too.
import type { ChatMessage } from '../../tokenizer/index.ts';
import { isObject } from '../../core/json.ts';
import { OpenAiError } from './request.ts';

const bad = (message: string) => new OpenAiError(400, message, 'messages');

/**
 * The roles SGLang takes: ChatCompletionMessageGenericParam's (lowered, so "Assistant" is
 * "assistant") and ChatCompletionMessageUserParam's "user" (exactly: "User" matches neither).
 */
const GENERIC_ROLES: ReadonlySet<string> = new Set(['system', 'assistant', 'tool', 'function', 'developer', 'latest_reminder']);
const ROLE_WORDS = "'role' must be one of 'system', 'assistant', 'tool', 'function', 'developer', 'latest_reminder' (case-insensitive), or 'user'";

/** A text part as the template sees it (SGLang keeps `{"type": "text", "text"}` for templates that iterate content). */
export interface TextPart {
  type: 'text';
  text: string;
}

/**
 * A message's content: a string, or its text parts (`text`, and `input_text` as SGLang's
 * process_content_for_template_format reads it). Other parts (images, audio) are refused: Baton
 * serves text models. null and absent are "" (serving_chat.py _apply_jinja_template: `if
 * msg_dict.get("content") is None: msg_dict["content"] = ""`).
 */
function content(c: unknown, i: number): string | TextPart[] {
  if (c === undefined || c === null) return '';
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw bad(`messages[${i}].content must be a string or a list of content parts`);
  return c.map((p, j): TextPart => {
    if (!isObject(p) || typeof p.type !== 'string') throw bad(`messages[${i}].content[${j}] is not a content part`);
    if ((p.type !== 'text' && p.type !== 'input_text') || typeof p.text !== 'string') throw bad(`messages[${i}].content[${j}]: content of type '${p.type}' is not supported (text only)`);
    return { type: 'text', text: p.text };
  });
}

/**
 * An assistant turn's tool calls with their `arguments` as objects: OpenAI's wire has them as a
 * JSON string, chat templates expect a mapping (`tool_call.arguments | tojson`, `.items()`).
 * SGLang serving_chat.py normalize_assistant_tool_call_arguments / parse_tool_call_arguments, in
 * their words; vLLM's chat_utils parses them too.
 */
function toolCalls(calls: unknown[]): unknown[] {
  return calls.map((call) => {
    if (!isObject(call) || !isObject(call.function) || typeof call.function.arguments !== 'string') return call;
    let args: unknown;
    try {
      args = JSON.parse(call.function.arguments);
    } catch {
      throw bad('Assistant tool call function.arguments must be valid JSON.');
    }
    if (!isObject(args)) throw bad('Assistant tool call function.arguments must be a JSON object.');
    return { ...call, function: { ...call.function, arguments: args } };
  });
}

/** The body's `messages`: a non-empty list of messages, each checked and normalized (above). */
export function chatMessages(v: unknown): ChatMessage[] {
  if (v === undefined || v === null) throw bad('messages: Field required');
  if (!Array.isArray(v) || v.length === 0) throw bad('messages must be a non-empty list');
  return v.map((m, i): ChatMessage => {
    if (!isObject(m) || typeof m.role !== 'string') throw bad(`messages[${i}] must be an object with a string role`);
    const lowered = m.role.toLowerCase();
    const role = m.role === 'user' ? 'user' : GENERIC_ROLES.has(lowered) ? lowered : null;
    if (role === null) throw bad(`messages[${i}]: ${ROLE_WORDS}, got ${JSON.stringify(m.role)}`);
    // ChatCompletionMessageUserParam: a user message's content is required, never null.
    if (role === 'user' && (m.content === undefined || m.content === null)) throw bad(`messages[${i}].content: Field required (a user message's content is a string or a list of content parts)`);
    // process_content_for_template_format: keys whose value is None are dropped, so a template's
    // `is defined` sees no `name: null`, `tool_calls: null` or `reasoning_content: null`.
    const out: ChatMessage = { role, content: content(m.content, i) };
    for (const [k, x] of Object.entries(m)) {
      if (k === 'role' || k === 'content' || x === null || x === undefined) continue;
      out[k] = k === 'tool_calls' && role === 'assistant' && Array.isArray(x) ? toolCalls(x) : x;
    }
    // A thought sent back under vLLM's name (@openai/agents does) reaches templates that read
    // reasoning_content (Qwen3's), as vLLM's chat_utils.py _parse_chat_message_content copies it.
    if (role === 'assistant' && typeof out.reasoning === 'string' && out.reasoning_content === undefined) out.reasoning_content = out.reasoning;
    return out;
  });
}

/** A content's text (text parts joined as a string-content template gets them: chat-template.ts). */
export function contentString(c: ChatMessage['content']): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return (c as TextPart[]).map((p) => p.text).join(' ');
  return '';
}
