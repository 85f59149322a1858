// Reading a `POST /v1/responses` body, the stateless subset, into the chat request it is served
// as: vLLM's OpenAIServingResponses renders a Responses request through the chat template like a
// chat completion (vllm/entrypoints/openai/responses/utils.py construct_input_messages,
// protocol.py ResponsesRequest.build_chat_params / to_sampling_params), and so does SGLang's
// (serving_responses.py _make_request). So does Baton: the input items become chat messages, the
// function tools chat tools, and the chat reader (../openai/request.ts) tokenizes and checks them;
// the answer is rendered as Responses output items (session.ts).
import { isObject } from '../../json.ts';
import type { JsonObject } from '../../types.ts';
import { OpenAiError, parseOpenAi, type ModelLookup, type OpenAiRequest } from '../request.ts';
import type { OutputParsers } from '../parsers/index.ts';

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

/**
 * The chat messages of `instructions` and `input`, as vLLM's construct_input_messages builds them:
 * instructions as the system message; a string input as the user message; message items by role
 * (`developer` as `system`); function_call items as the assistant's tool_calls (consecutive ones on
 * one assistant message); function_call_output items as tool messages; a reasoning item's text as
 * the following assistant message's `reasoning_content` (what Qwen3's template reads).
 */
function messagesOf(body: JsonObject): JsonObject[] {
  const out: JsonObject[] = [];
  if (body.instructions !== undefined && body.instructions !== null) {
    if (typeof body.instructions !== 'string') throw bad('instructions must be a string', 'instructions');
    out.push({ role: 'system', content: body.instructions });
  }
  const input = body.input;
  if (input === undefined || input === null) throw bad('input: Field required', 'input');
  if (typeof input === 'string') {
    out.push({ role: 'user', content: input });
    return out;
  }
  if (!Array.isArray(input) || input.length === 0) throw bad('input must be a string or a non-empty list of input items', 'input');
  /** The assistant message the next function_call or reasoning joins (reset by any other item). */
  let assistant: JsonObject | null = null;
  const assistantMsg = (): JsonObject => {
    if (assistant === null) {
      assistant = { role: 'assistant', content: '' };
      out.push(assistant);
    }
    return assistant;
  };
  input.forEach((item, i) => {
    const where = `input[${i}]`;
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
      const parts = Array.isArray(item.content) ? item.content : [];
      const text = parts.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('');
      const a = assistantMsg();
      a.reasoning_content = `${(a.reasoning_content as string | undefined) ?? ''}${text}`;
    } else {
      throw bad(`${where}: input items of type '${String(type)}' are not supported (message, function_call, function_call_output, reasoning)`, 'input');
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
 * `previous_response_id` and `background` need stored responses, which Baton does not keep: 400.
 * `store` is accepted and ignored, as vLLM does without its response store
 * (serving.py create_responses: "store" silently disabled).
 */
export function parseResponses(raw: unknown, models: ModelLookup, parsers: OutputParsers | null): ResponsesRequest {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  const body = raw;
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    throw bad('previous_response_id is not supported: Baton keeps no responses (store is not implemented); send the conversation so far in `input` (its output items are valid input items)', 'previous_response_id');
  }
  if (body.background === true) throw bad('background is not supported: it needs stored responses, which Baton does not keep', 'background');
  if (body.prompt !== undefined && body.prompt !== null) throw bad('prompt template is not supported', 'prompt');
  if (body.conversation !== undefined && body.conversation !== null) throw bad('conversation is not supported: Baton keeps no conversations; send them in `input`', 'conversation');
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null && !(typeof body.max_output_tokens === 'number' && Number.isSafeInteger(body.max_output_tokens))) throw bad('max_output_tokens must be an integer', 'max_output_tokens');

  const chat: JsonObject = { messages: messagesOf(body) };
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
  };
}
