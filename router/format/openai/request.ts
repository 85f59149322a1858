// Reading an OpenAI-compatible request (`POST /v1/completions`, `POST /v1/chat/completions`) into
// what Baton needs: the prompt's token ids (Baton tokenizes and applies the chat template), the
// sampling values it sends explicitly, and what it renders itself (stop strings, logprobs, echo,
// usage). Field names and defaults follow OpenAI's API and vLLM's OpenAI server (the extensions
// top_k, min_tokens, stop_token_ids, ignore_eos, skip_special_tokens, include_stop_str_in_output,
// chat_template_kwargs: vllm/entrypoints/openai/protocol.py). Unknown fields are ignored.
import type { ChatMessage, Tokenizer } from '../../tokenizer/index.ts';
import { TemplateError } from '../../tokenizer/index.ts';
import { isObject } from '../json.ts';
import type { JsonObject, TokenConstraint, TokenSampling } from '../types.ts';
import { readConstraint, readToolChoice, type ToolChoice } from './constraints.ts';
import { chatParsing, ParsingInputError, type ChatParsing, type OutputParsers } from './parsers/index.ts';

export type OpenAiKind = 'completion' | 'chat';

/** A request Baton refuses itself, as OpenAI-style servers do: status, message, param. */
export class OpenAiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly type = status === 404 ? 'NotFoundError' : 'BadRequestError',
  ) {
    super(message);
  }
}

export interface OpenAiRequest {
  kind: OpenAiKind;
  model: string;
  tokenizer: Tokenizer;
  promptIds: number[];
  /** The prompt's text, for `echo` (completions; '' for a prompt of ids without echo). */
  promptText: string;
  /** null: no explicit budget (the rest of the context, when known). */
  maxTokens: number | null;
  minTokens: number;
  stream: boolean;
  includeUsage: boolean;
  sampling: TokenSampling;
  stops: string[];
  includeStopStr: boolean;
  /** Alternatives per token: completions' `logprobs` (int), chat's `top_logprobs`; null: none. */
  logprobs: number | null;
  echo: boolean;
  skipSpecialTokens: boolean;
  spacesBetweenSpecialTokens: boolean;
  /** The decoding constraint the worker enforces (constraints.ts); null: none. */
  constraint?: TokenConstraint | null;
  /** The constraint is tool_choice's ("required" or named): the answer is a JSON array of calls. */
  forcedTools?: boolean;
  /** Chat's tool_choice, read and checked (completions: none). */
  toolChoice?: ToolChoice;
  /** Chat: what the router's output parsers separate (tool calls, reasoning); null: none. */
  parsing?: ChatParsing | null;
}

/** The sampling defaults of a model's generation_config.json (vLLM's --generation-config auto). */
export interface GenerationDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  repetition_penalty?: number;
}

/** A model Baton serves through the front: its name, tokenizer and generation defaults. */
export interface ServedModel {
  name: string;
  tokenizer: Tokenizer;
  defaults: GenerationDefaults;
}

/** Model name → tokenizer, and the context length the workers serve it with. */
export interface ModelLookup {
  tokenizer(model: string | undefined): ServedModel;
  contextLength(model: string, tok: Tokenizer): number | null;
}

const bad = (message: string, param: string | null = null) => new OpenAiError(400, message, param);

function num(body: JsonObject, key: string, dflt: number, lo: number, hi: number): number {
  const v = body[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(`${key} must be a number`, key);
  if (v < lo || v > hi) throw bad(`${key} must be between ${lo} and ${hi}, got ${v}`, key);
  return v;
}

function int(body: JsonObject, key: string, lo: number, hi = Number.MAX_SAFE_INTEGER): number | null {
  const v = body[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(`${key} must be an integer`, key);
  if (v < lo || v > hi) throw bad(`${key} must be ${hi === Number.MAX_SAFE_INTEGER ? `at least ${lo}` : `between ${lo} and ${hi}`}, got ${v}`, key);
  return v;
}

function bool(body: JsonObject, key: string, dflt: boolean): boolean {
  const v = body[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw bad(`${key} must be a boolean`, key);
  return v;
}

function tokenIds(v: unknown, key: string, tok: Tokenizer): number[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isSafeInteger(x))) throw bad(`${key} must be a list of token ids`, key);
  for (const id of v as number[]) if (id < 0 || id >= tok.vocabSize) throw bad(`${key} holds token id ${id}, outside the vocabulary (0..${tok.vocabSize - 1})`, key);
  return v as number[];
}

function stops(body: JsonObject): string[] {
  const v = body.stop;
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) throw bad('stop must be a string or a list of strings', 'stop');
  return (list as string[]).filter((s) => s.length > 0);
}

/** Text of a message's content: a string, or a list of text parts (other parts are refused). */
function contentText(c: unknown, i: number): string | null {
  if (c === undefined || c === null || typeof c === 'string') return (c as string | null | undefined) ?? null;
  if (!Array.isArray(c)) throw bad(`messages[${i}].content must be a string or a list of content parts`, 'messages');
  return c.map((p, j) => {
    if (!isObject(p) || typeof p.type !== 'string') throw bad(`messages[${i}].content[${j}] is not a content part`, 'messages');
    if (p.type !== 'text' || typeof p.text !== 'string') throw bad(`messages[${i}].content[${j}]: content of type '${p.type}' is not supported (text only)`, 'messages');
    return p.text;
  }).join('');
}

function messages(body: JsonObject): ChatMessage[] {
  const v = body.messages;
  if (v === undefined || v === null) throw bad('messages: Field required', 'messages');
  if (!Array.isArray(v) || v.length === 0) throw bad('messages must be a non-empty list', 'messages');
  return v.map((m, i) => {
    if (!isObject(m) || typeof m.role !== 'string') throw bad(`messages[${i}] must be an object with a string role`, 'messages');
    return { ...m, role: m.role, content: contentText(m.content, i) } as ChatMessage;
  });
}

/**
 * The prompt of a completion: one string, or one list of token ids (a batch is refused). A list
 * of ids is decoded to text only for `echo`, its one reader.
 */
function completionPrompt(body: JsonObject, tok: Tokenizer, wantText: boolean): { ids: number[]; text: string } {
  let p: unknown = body.prompt;
  if (p === undefined || p === null) throw bad('prompt: Field required', 'prompt');
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === 'string' || Array.isArray(p[0]))) p = p[0];
  if (typeof p === 'string') {
    if (p.length === 0) throw bad('prompt must not be empty', 'prompt');
    return { ids: tok.encode(p), text: p };
  }
  if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number')) {
    const ids = tokenIds(p, 'prompt', tok);
    return { ids, text: wantText ? tok.decode(ids, { skipSpecialTokens: false, cleanUpTokenizationSpaces: false }) : '' };
  }
  if (Array.isArray(p) && p.length > 1) throw bad('a batch of prompts is not supported: send one prompt per request', 'prompt');
  throw bad('prompt must be a string or a list of token ids', 'prompt');
}

export function parseOpenAi(kind: OpenAiKind, raw: unknown, models: ModelLookup, parsers: OutputParsers | null = null): OpenAiRequest {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  const body = raw;
  if (body.model !== undefined && body.model !== null && typeof body.model !== 'string') throw bad('model must be a string', 'model');
  const { name: model, tokenizer: tok, defaults: gen } = models.tokenizer((body.model as string | null | undefined) ?? undefined);

  const n = int(body, 'n', 1);
  if (n !== null && n > 1) throw bad('n > 1 is not supported: Baton serves one choice per request (send n requests)', 'n');
  const bestOf = int(body, 'best_of', 1);
  if (bestOf !== null && bestOf > 1) throw bad('best_of > 1 is not supported', 'best_of');
  if (body.suffix !== undefined && body.suffix !== null) throw bad('suffix is not supported', 'suffix');

  let promptIds: number[];
  let promptText: string;
  let logprobs: number | null;
  let maxTokens: number | null;
  /** The field the budget came from, for vLLM's error param. */
  let budgetParam = 'max_tokens';
  let echo = false;
  let tools: JsonObject[] | null = null;
  let toolChoice: ToolChoice = { mode: 'none', name: null };
  let parsing: ChatParsing | null = null;
  if (kind === 'completion') {
    echo = bool(body, 'echo', false);
    ({ ids: promptIds, text: promptText } = completionPrompt(body, tok, echo));
    logprobs = int(body, 'logprobs', 0, 20);
    if (echo && logprobs !== null) throw bad('echo with logprobs is not supported (Baton does not ask workers for prompt logprobs)', 'echo');
    // OpenAI's and vLLM's default for completions.
    maxTokens = body.max_tokens === undefined ? 16 : int(body, 'max_tokens', 0);
  } else {
    const msgs = messages(body);
    ({ tools, choice: toolChoice } = readToolChoice(body));
    const kwargs = body.chat_template_kwargs;
    if (kwargs !== undefined && kwargs !== null && !isObject(kwargs)) throw bad('chat_template_kwargs must be an object', 'chat_template_kwargs');
    try {
      promptText = tok.applyChatTemplate(msgs, {
        addGenerationPrompt: bool(body, 'add_generation_prompt', true),
        tools: toolChoice.mode === 'none' ? null : tools,
        extra: (kwargs as Record<string, unknown> | undefined) ?? undefined,
      });
    } catch (err) {
      if (err instanceof TemplateError) throw bad(`the chat template failed: ${err.message}`, 'messages');
      throw err;
    }
    if (parsers !== null) {
      try {
        parsing = chatParsing(body, parsers);
      } catch (err) {
        if (err instanceof ParsingInputError) throw bad(err.message, err.param);
        throw err;
      }
    }
    // HF apply_chat_template(tokenize=True): the rendered text carries its own special tokens.
    promptIds = tok.encode(promptText, { addSpecialTokens: false });
    const want = bool(body, 'logprobs', false);
    const top = int(body, 'top_logprobs', 0, 20);
    if (top !== null && top > 0 && !want) throw bad('top_logprobs needs logprobs: true', 'top_logprobs');
    logprobs = want ? (top ?? 0) : null;
    if (body.max_completion_tokens !== undefined && body.max_completion_tokens !== null) budgetParam = 'max_completion_tokens';
    maxTokens = int(body, budgetParam, 0);
  }
  if (promptIds.length === 0) throw bad('the prompt has no tokens', kind === 'chat' ? 'messages' : 'prompt');

  const ctx = models.contextLength(model, tok);
  if (ctx !== null) {
    // vLLM's check, wording and param: vllm/renderers/params.py TokenizeParams._token_len_check
    // (the prompt may take the context less the requested output; no output asked: all of it).
    const out = maxTokens ?? 0;
    // TokenizeParams.__post_init__ first, in vLLM's words (the missing space is theirs).
    if (out > ctx) throw bad(`${budgetParam}=${out}cannot be greater than max_model_len=max_total_tokens=${ctx}. Please request fewer output tokens.`, budgetParam);
    if (promptIds.length > ctx - out) {
      throw bad(`You passed ${promptIds.length} input tokens and requested ${out} output tokens. However, the model's context length is only ${ctx} tokens, resulting in a maximum input length of ${ctx - out} tokens. Please reduce the length of the input prompt.`, 'input_tokens');
    }
    if (maxTokens === null) {
      // vllm/entrypoints/utils.py get_max_tokens: the rest of the context; a prompt that fills it
      // leaves 0, which SamplingParams._verify_args refuses.
      maxTokens = ctx - promptIds.length;
      if (maxTokens < 1) throw bad(`max_tokens must be at least 1, got ${maxTokens}.`, 'max_tokens');
    }
  }
  const minTokens = int(body, 'min_tokens', 0) ?? 0;
  if (maxTokens !== null && minTokens > maxTokens) throw bad(`min_tokens (${minTokens}) must not exceed max_tokens (${maxTokens})`, 'min_tokens');

  const so = body.stream_options;
  if (so !== undefined && so !== null && !isObject(so)) throw bad('stream_options must be an object', 'stream_options');
  const stream = bool(body, 'stream', false);
  if (isObject(so) && !stream) throw bad('stream_options is only allowed with stream: true', 'stream_options');

  const topK = int(body, 'top_k', -1);
  const lb = body.logit_bias;
  let logitBias: Record<string, number> | null = null;
  if (lb !== undefined && lb !== null) {
    if (!isObject(lb) || !Object.values(lb).every((x) => typeof x === 'number')) throw bad('logit_bias must map token ids to numbers', 'logit_bias');
    for (const k of Object.keys(lb)) if (!/^\d+$/.test(k) || Number(k) >= tok.vocabSize) throw bad(`logit_bias names '${k}', which is not a token id of this model`, 'logit_bias');
    logitBias = lb as Record<string, number>;
  }
  const seed = int(body, 'seed', Number.MIN_SAFE_INTEGER);
  const { constraint, forcedTools } = readConstraint(body, tools, toolChoice);
  return {
    constraint,
    forcedTools,
    toolChoice,
    kind,
    model,
    tokenizer: tok,
    promptIds,
    promptText,
    maxTokens,
    minTokens,
    stream,
    includeUsage: isObject(so) && so.include_usage === true,
    sampling: {
      // Unset values take the model's generation_config.json, then OpenAI's defaults, as vLLM's
      // server does (--generation-config auto); sent explicitly, so no worker default applies.
      temperature: num(body, 'temperature', gen.temperature ?? 1, 0, 2),
      top_p: num(body, 'top_p', gen.top_p ?? 1, 1e-9, 1),
      top_k: topK !== null && topK > 0 ? topK : topK === null && gen.top_k !== undefined && gen.top_k > 0 ? gen.top_k : null,
      seed,
      stop_token_ids: body.stop_token_ids === undefined || body.stop_token_ids === null ? [] : tokenIds(body.stop_token_ids, 'stop_token_ids', tok),
      ignore_eos: bool(body, 'ignore_eos', false),
      frequency_penalty: num(body, 'frequency_penalty', 0, -2, 2),
      presence_penalty: num(body, 'presence_penalty', 0, -2, 2),
      repetition_penalty: body.repetition_penalty === undefined || body.repetition_penalty === null ? (gen.repetition_penalty !== undefined && gen.repetition_penalty !== 1 ? gen.repetition_penalty : null) : num(body, 'repetition_penalty', 1, 1e-9, 1e9),
      logit_bias: logitBias,
    },
    stops: stops(body),
    includeStopStr: bool(body, 'include_stop_str_in_output', false),
    logprobs,
    echo,
    skipSpecialTokens: bool(body, 'skip_special_tokens', true),
    spacesBetweenSpecialTokens: bool(body, 'spaces_between_special_tokens', true),
    // A forced tool_choice's answer is a JSON array of calls (forced-tools.ts), not the model's own call format.
    parsing: forcedTools ? null : parsing,
  };
}
