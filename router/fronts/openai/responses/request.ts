// Reading a `POST /v1/responses` body into the chat request it is served as: vLLM's
// OpenAIServingResponses renders a Responses request through the chat template like a chat
// completion (vllm/entrypoints/openai/responses/utils.py construct_input_messages,
// protocol.py ResponsesRequest.build_chat_params / to_sampling_params), and so does SGLang's
// (serving_responses.py _make_request). So does Baton: the input items become chat messages, the
// function tools chat tools, and the chat reader (../request.ts) tokenizes and checks them;
// the answer is rendered as Responses output items (session.ts). Stored responses and items
// (store.ts) a request names are looked up by the front first and arrive here resolved.
import { isObject } from '../../../core/json.ts';
import type { JsonObject } from '../../../core/types.ts';
import { OpenAiError, parseOpenAi, type ModelLookup, type OpenAiRequest } from '../request.ts';
import type { OutputParsers } from '../../../parsers/index.ts';

const bad = (message: string, param: string | null = null) => new OpenAiError(400, message, param);

/** The request's fields a Response echoes (vLLM's ResponsesResponse.from_request). */
export interface ResponsesEcho {
  instructions: string | null;
  metadata: JsonObject | null;
  parallel_tool_calls: boolean;
  tool_choice: unknown;
  tools: unknown[];
  reasoning: JsonObject | null;
  text: JsonObject | null;
  truncation: string;
  user: string | null;
  max_output_tokens: number | null;
}

export interface ResponsesRequest {
  /** The chat request it is served as. */
  chat: OpenAiRequest;
  echo: ResponsesEcho;
  /** The response's key (store.ts): its id is `resp_<key>`, its items' ids carry it. */
  key: string;
  previousResponseId: string | null;
  /** Whether the answer is stored (the request's `store`, default true, and a store to keep it). */
  store: boolean;
  /** The input items to store with it (null when it is not stored). */
  input: JsonObject[] | null;
}

/** How a request is read: the response's key, what its references resolved to, whether a store keeps it. */
export interface ResponsesContext {
  key: string;
  resolved: Resolved;
  /** A store is on: `store` (default true) keeps the answer. */
  storing: boolean;
}

/** The text of a message's content: a string, or text parts (input_text, output_text, text). */
function contentText(c: unknown, where: string): string {
  if (typeof c === 'string') return c;
  if (c === undefined || c === null) return '';
  if (!Array.isArray(c)) throw bad(`${where}.content must be a string or a list of content parts`, 'input');
  return c.map((p, j) => {
    if (!isObject(p) || typeof p.type !== 'string') throw bad(`${where}.content[${j}] is not a content part`, 'input');
    if ((p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') && typeof p.text === 'string') return p.text;
    throw bad(`${where}.content[${j}]: content of type '${p.type}' is not supported (text only)`, 'input');
  }).join('');
}

/** What a request names in the store: its previous response, and the items it references. */
export interface ResponsesRefs {
  previous: string | null;
  items: string[];
}

/**
 * The stored responses and items a request names (`previous_response_id`, `item_reference`
 * items), checked for shape; the front looks them up (fronts/openai/responses-api.ts) before the request is read.
 */
export function referencesOf(raw: unknown): ResponsesRefs {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  const prev = raw.previous_response_id;
  if (prev !== undefined && prev !== null && typeof prev !== 'string') throw bad('previous_response_id must be a string', 'previous_response_id');
  const items: string[] = [];
  if (Array.isArray(raw.input)) {
    raw.input.forEach((item, i) => {
      if (!isObject(item) || item.type !== 'item_reference') return;
      if (typeof item.id !== 'string' || item.id.length === 0) throw bad(`input[${i}]: an item_reference needs a string id`, 'input');
      items.push(item.id);
    });
  }
  return { previous: typeof prev === 'string' ? prev : null, items };
}

/** What the front found for a request's references (every one of them: a missing one is its 404). */
export interface Resolved {
  /** The previous response's items: the input it was generated from, then its output. */
  previous: JsonObject[] | null;
  /** The referenced items, by id. */
  items: ReadonlyMap<string, JsonObject>;
}

export const NOTHING_RESOLVED: Resolved = { previous: null, items: new Map() };

/** The id prefix of a stored input item of each type (an item the client sent without an id). */
const ITEM_PREFIX: Record<string, string> = { message: 'msg', function_call: 'fc', function_call_output: 'fco', reasoning: 'rs' };

/**
 * The items the answer is generated from: the previous response's (its input, then its output),
 * then this request's input, each item_reference replaced by the item it names. With `key` (the
 * response is stored), each of this request's items without an id, or with one an earlier item
 * has, gets one (`<kind>_<key>_i<n>`): GET .../input_items pages by id, and a later item_reference
 * can name any of them, as OpenAI's can.
 */
function inputItems(body: JsonObject, resolved: Resolved, key: string | null): JsonObject[] {
  const input = body.input;
  if (input === undefined || input === null) throw bad('input: Field required', 'input');
  const out: JsonObject[] = resolved.previous ? [...resolved.previous] : [];
  if (typeof input === 'string') {
    out.push(key === null ? { type: 'message', role: 'user', content: input } : { id: `msg_${key}_i0`, type: 'message', role: 'user', content: input });
    return out;
  }
  if (!Array.isArray(input) || input.length === 0) throw bad('input must be a string or a non-empty list of input items', 'input');
  const ids = key === null ? null : new Set(out.map((o) => o.id));
  input.forEach((raw, i) => {
    let item = isObject(raw) && raw.type === 'item_reference' ? resolved.items.get(raw.id as string)! : raw as JsonObject;
    if (ids === null || !isObject(item)) {
      out.push(item);
      return;
    }
    // Stored as OpenAI lists input items: each with its type (a bare {role, content} is a message).
    if (item.type === undefined && typeof item.role === 'string') item = { type: 'message', ...item };
    if (typeof item.id !== 'string' || ids.has(item.id)) item = { ...item, id: `${ITEM_PREFIX[String(item.type)] ?? 'item'}_${key}_i${i}` };
    ids.add(item.id as string);
    out.push(item);
  });
  return out;
}

/** A reasoning item's text: its `content` (reasoning_text parts), else its `summary` (summary_text parts). */
function reasoningText(item: JsonObject, where: string): string {
  if (typeof item.encrypted_content === 'string' && item.encrypted_content.length > 0) {
    // vLLM refuses it too (responses/utils.py _construct_message_from_response_item); Baton issues none.
    throw bad(`${where}: reasoning items with encrypted_content are not supported (this server issues none): send the item's content or summary instead`, 'input');
  }
  const text = (parts: unknown) => (Array.isArray(parts) ? parts.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('') : '');
  const content = text(item.content);
  return content.length > 0 ? content : text(item.summary);
}

/**
 * The chat messages of `instructions` and the input items, as vLLM's construct_input_messages
 * builds them: instructions as the system message (never carried over from a previous response);
 * message items by role (`developer` as `system`); function_call items as the assistant's
 * tool_calls (consecutive ones on one assistant message); function_call_output items as tool
 * messages; a reasoning item's text (its content, else its summary, as vLLM reads it) as the
 * following assistant message's `reasoning_content` (what Qwen3's template reads).
 */
function messagesOf(body: JsonObject, items: JsonObject[], ownFrom: number): JsonObject[] {
  const out: JsonObject[] = [];
  if (body.instructions !== undefined && body.instructions !== null) {
    if (typeof body.instructions !== 'string') throw bad('instructions must be a string', 'instructions');
    out.push({ role: 'system', content: body.instructions });
  }
  /** The assistant message the next function_call or reasoning joins (reset by any other item). */
  let assistant: JsonObject | null = null;
  const assistantMsg = (): JsonObject => {
    if (assistant === null) {
      assistant = { role: 'assistant', content: '' };
      out.push(assistant);
    }
    return assistant;
  };
  items.forEach((item, n) => {
    const where = n < ownFrom ? `the previous response's item ${n}` : `input[${n - ownFrom}]`;
    if (!isObject(item)) throw bad(`${where} must be an object`, 'input');
    const type = item.type ?? (typeof item.role === 'string' ? 'message' : undefined);
    if (type === 'message') {
      if (typeof item.role !== 'string') throw bad(`${where}.role must be a string`, 'input');
      const role = item.role === 'developer' ? 'system' : item.role;
      const text = contentText(item.content, where);
      if (role === 'assistant') {
        const a = assistantMsg();
        a.content = `${a.content as string}${text}`;
        return;
      }
      assistant = null;
      out.push({ role, content: text });
    } else if (type === 'function_call') {
      if (typeof item.name !== 'string' || typeof item.arguments !== 'string' || typeof item.call_id !== 'string') throw bad(`${where}: a function_call needs string call_id, name and arguments`, 'input');
      const a = assistantMsg();
      const calls = (a.tool_calls as JsonObject[] | undefined) ?? [];
      calls.push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } });
      a.tool_calls = calls;
    } else if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string') throw bad(`${where}: a function_call_output needs a string call_id`, 'input');
      assistant = null;
      out.push({ role: 'tool', tool_call_id: item.call_id, content: contentText(item.output, where) });
    } else if (type === 'reasoning') {
      const a = assistantMsg();
      a.reasoning_content = `${(a.reasoning_content as string | undefined) ?? ''}${reasoningText(item, where)}`;
    } else {
      throw bad(`${where}: input items of type '${String(type)}' are not supported (message, function_call, function_call_output, reasoning, item_reference)`, 'input');
    }
  });
  return out;
}

/** Function tools as chat tools; other tool types (web search, MCP, ...) are refused. */
function toolsOf(v: unknown): JsonObject[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw bad('tools must be a list', 'tools');
  if (v.length === 0) return null;
  return v.map((t, i) => {
    if (!isObject(t)) throw bad(`tools[${i}] must be an object`, 'tools');
    if (t.type !== 'function') throw bad(`tools[${i}]: tools of type '${String(t.type)}' are not supported (function tools only)`, 'tools');
    if (typeof t.name !== 'string' || t.name.length === 0) throw bad(`tools[${i}].name must be a non-empty string`, 'tools');
    const fn: JsonObject = { name: t.name };
    if (typeof t.description === 'string') fn.description = t.description;
    if (t.parameters !== undefined && t.parameters !== null) fn.parameters = t.parameters;
    return { type: 'function', function: fn };
  });
}

/** The Responses tool_choice as chat's: `{type: "function", name}` becomes a named choice. */
function toolChoiceOf(v: unknown): unknown {
  if (isObject(v) && v.type === 'function' && typeof v.name === 'string') return { type: 'function', function: { name: v.name } };
  return v;
}

/** `text.format` as chat's response_format (vLLM's to_sampling_params reads text.format's schema). */
function responseFormatOf(text: unknown): JsonObject | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isObject(text)) throw bad('text must be an object', 'text');
  const f = text.format;
  if (f === undefined || f === null) return undefined;
  if (!isObject(f)) throw bad('text.format must be an object', 'text');
  if (f.type === 'json_schema') return { type: 'json_schema', json_schema: { name: f.name ?? 'response', schema: f.schema ?? null, strict: f.strict ?? null } };
  return f;
}

/** vLLM's ResponsesRequest extras Baton passes on to the chat reader as they are. */
const PASSED = ['model', 'temperature', 'top_p', 'top_k', 'seed', 'stop', 'ignore_eos', 'logit_bias', 'repetition_penalty', 'structured_outputs', 'skip_special_tokens', 'include_stop_str_in_output', 'parallel_tool_calls', 'stream'];

/**
 * The Responses request as the chat request it is served as, with the fields its Response echoes.
 * Its references (`previous_response_id`, `item_reference` items) come resolved in `ctx`: the
 * previous response's items lead the input, as vLLM's construct_input_messages prepends the stored
 * messages and output (serving.py _make_request). `store` defaults to true, as OpenAI's; without a
 * store (--responses-store-max-responses 0) it is silently off, as vLLM's is without
 * VLLM_ENABLE_RESPONSES_API_STORE (serving.py create_responses). `background` and `conversation`
 * are refused: Baton runs no background responses and keeps no conversations.
 */
export function parseResponses(raw: unknown, models: ModelLookup, parsers: OutputParsers | null, ctx: ResponsesContext): ResponsesRequest {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  const body = raw;
  if (body.background === true) throw bad('background is not supported: Baton runs no background responses', 'background');
  if (body.prompt !== undefined && body.prompt !== null) throw bad('prompt template is not supported', 'prompt');
  if (body.conversation !== undefined && body.conversation !== null) throw bad('conversation is not supported: Baton keeps no conversations; chain responses with previous_response_id, or send the conversation in `input`', 'conversation');
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null && !(typeof body.max_output_tokens === 'number' && Number.isSafeInteger(body.max_output_tokens))) throw bad('max_output_tokens must be an integer', 'max_output_tokens');
  if (body.store !== undefined && body.store !== null && typeof body.store !== 'boolean') throw bad('store must be a boolean', 'store');
  const store = ctx.storing && body.store !== false;

  const items = inputItems(body, ctx.resolved, store ? ctx.key : null);
  const chat: JsonObject = { messages: messagesOf(body, items, ctx.resolved.previous?.length ?? 0) };
  for (const k of PASSED) if (body[k] !== undefined) chat[k] = body[k];
  const tools = toolsOf(body.tools);
  if (tools) chat.tools = tools;
  if (body.tool_choice !== undefined && body.tool_choice !== null) chat.tool_choice = toolChoiceOf(body.tool_choice) as JsonObject;
  // No tools: vLLM's Responses default "auto" has nothing to choose from.
  if (!tools && (chat.tool_choice === 'auto' || chat.tool_choice === 'none')) delete chat.tool_choice;
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null) chat.max_completion_tokens = body.max_output_tokens;
  const rf = responseFormatOf(body.text);
  if (rf) chat.response_format = rf;
  const reasoning = body.reasoning;
  if (reasoning !== undefined && reasoning !== null) {
    if (!isObject(reasoning)) throw bad('reasoning must be an object', 'reasoning');
    const effort = reasoning.effort;
    if (effort !== undefined && effort !== null) {
      if (typeof effort !== 'string') throw bad('reasoning.effort must be a string', 'reasoning');
      // vLLM hands the template reasoning_effort (ResponsesRequest.build_chat_params) and, for
      // templates that opt in with enable_thinking (Qwen3), thinking on unless the effort is
      // "none" (ChatCompletionRequest.build_chat_params).
      chat.chat_template_kwargs = { reasoning_effort: effort, enable_thinking: effort !== 'none' };
    }
  }
  let oreq: OpenAiRequest;
  try {
    oreq = parseOpenAi('chat', chat, models, parsers);
  } catch (err) {
    // The chat reader's words, in the Responses request's field names.
    if (err instanceof OpenAiError) {
      const rename = (s: string) => s.replace(/max_completion_tokens/g, 'max_output_tokens').replace(/\bmessages\b/g, 'input');
      throw new OpenAiError(err.status, rename(err.message), err.param === null ? null : rename(err.param), err.type);
    }
    throw err;
  }
  return {
    chat: oreq,
    echo: {
      instructions: typeof body.instructions === 'string' ? body.instructions : null,
      metadata: isObject(body.metadata) ? body.metadata : null,
      parallel_tool_calls: body.parallel_tool_calls !== false,
      tool_choice: body.tool_choice ?? 'auto',
      tools: Array.isArray(body.tools) ? body.tools : [],
      reasoning: isObject(reasoning) ? reasoning : null,
      text: isObject(body.text) ? body.text : { format: { type: 'text' } },
      truncation: typeof body.truncation === 'string' ? body.truncation : 'disabled',
      user: typeof body.user === 'string' ? body.user : null,
      max_output_tokens: typeof body.max_output_tokens === 'number' ? body.max_output_tokens : null,
    },
    key: ctx.key,
    previousResponseId: typeof body.previous_response_id === 'string' ? body.previous_response_id : null,
    store,
    input: store ? items : null,
  };
}
