// Reading an OpenAI-compatible request (`POST /v1/completions`, `POST /v1/chat/completions`) into
// what Baton needs: the prompt's token ids (Baton tokenizes and applies the chat template), the
// sampling values it sends explicitly, and what it renders itself (stop strings, logprobs, echo,
// usage). Field names and defaults follow OpenAI's API and vLLM's OpenAI server (the extensions
// top_k, min_tokens, stop_token_ids, ignore_eos, skip_special_tokens, include_stop_str_in_output,
// chat_template_kwargs: vllm/entrypoints/openai/protocol.py). Unknown fields are ignored.
import type { Tokenizer } from '../../tokenizer/index.ts';
import { TemplateError } from '../../tokenizer/index.ts';
import { isObject } from '../../core/json.ts';
import type { JsonObject, TokenConstraint, TokenSampling } from '../../core/types.ts';
import { readConstraint, readToolChoice, type ToolChoice } from './constraints.ts';
import { chatParsing, ParsingInputError, type ChatParsing, type OutputParsers } from '../../parsers/index.ts';
import { chatMessages, contentString } from './messages.ts';
import { chatViewOf, type ChatView } from '../../core/chat-view.ts';

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
  /** The constraint is tool_choice's ("required" or named): the answer holds calls (forced-tools.ts). */
  forcedTools?: boolean;
  /** Chat's tool_choice, read and checked (completions: none). */
  toolChoice?: ToolChoice;
  /** Chat: what the router's output parsers separate (tool calls, reasoning); null: none (and for a forced tool_choice). */
  parsing?: ChatParsing | null;
  /**
   * A forced tool_choice's parsers (the reasoning parser, and the tool-call parser the model's
   * native call format is read with before the JSON array the constraint asks for:
   * forced-tools.ts); null: none configured.
   */
  forcedParsing?: ChatParsing | null;
  /** `parallel_tool_calls` (default true): false keeps the first call only (vLLM maybe_filter_parallel_tool_calls). */
  parallelToolCalls?: boolean;
  // --- Fan-out (fanout.ts): n > 1 and lists of prompts. Optional: absent on a one-choice request.
  /** Choices per prompt (`n`), 1 by default. */
  n?: number;
  /** Every prompt of a completions batch (`prompt` as a list), each with its own budget. */
  prompts?: PromptItem[];
  /** This choice's `index` in the answer (vLLM: prompt_idx * n + i). */
  index?: number;
  /** The answer's id and `created` when one answer joins several logical requests. */
  responseId?: string;
  created?: number;
  // --- What the answer carries beyond text (vLLM's extensions). ---
  /** Alternatives per prompt position (vLLM `prompt_logprobs`, or `logprobs` with `echo`); null: none. */
  promptLogprobs?: number | null;
  /** vLLM `return_token_ids`: prompt_token_ids and each choice's token_ids. */
  returnTokenIds?: boolean;
  /** vLLM `return_tokens_as_token_ids`: logprob tokens as "token_id:N". */
  tokensAsIds?: boolean;
  /** vLLM `stream_options.continuous_usage_stats`: usage in every chunk. */
  continuousUsage?: boolean;
  /** `echo` with `max_tokens: 0` (lm-eval's loglikelihood): the prompt alone is the answer. */
  echoOnly?: boolean;
  /** Chat `echo` (vLLM): the text that leads each choice's content (the last message's, when its role is the answer's). */
  chatEcho?: string;
  /** Chat: the answer's role (vLLM get_chat_request_role: the last message's without a generation prompt). */
  role?: string;
  /** SGLang's `stop_regex`: patterns searched in the output's tail text after each token. */
  stopRegex?: { source: string; re: RegExp }[];
  /** A chat request's messages and tools as the dashboard shows them (bounded: core/chat-view.ts). */
  chatView?: ChatView;
}

/** One prompt of a completions request: its ids, its text (for echo) and its output budget. */
export interface PromptItem {
  ids: number[];
  text: string;
  maxTokens: number | null;
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

/**
 * SGLang's `stop_regex` (a string or a list): each compiled once; a pattern JavaScript cannot
 * compile is a 400. (SGLang compiles Python's `re`; the common syntax is shared.)
 */
function stopRegex(body: JsonObject): { source: string; re: RegExp }[] | undefined {
  const v = body.stop_regex;
  if (v === undefined || v === null) return undefined;
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) throw bad('stop_regex must be a string or a list of strings', 'stop_regex');
  const out = (list as string[]).filter((s) => s.length > 0).map((source) => {
    try {
      return { source, re: new RegExp(source, 'u') };
    } catch (err) {
      throw bad(`stop_regex ${JSON.stringify(source)} is not a valid regular expression: ${(err as Error).message}`, 'stop_regex');
    }
  });
  return out.length > 0 ? out : undefined;
}

function stops(body: JsonObject): string[] {
  const v = body.stop;
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) throw bad('stop must be a string or a list of strings', 'stop');
  return (list as string[]).filter((s) => s.length > 0);
}

/**
 * The prompts of a completion, as vLLM's CompletionRequest.prompt takes them: one string, one
 * list of token ids, or a list of either (a batch, served as one logical request each:
 * fanout.ts). A list of ids is decoded to text only for `echo`, its one reader.
 */
function completionPrompts(body: JsonObject, tok: Tokenizer, wantText: boolean): { ids: number[]; text: string }[] {
  const p: unknown = body.prompt;
  if (p === undefined || p === null) throw bad('prompt: Field required', 'prompt');
  const one = (x: unknown, key: string): { ids: number[]; text: string } => {
    if (typeof x === 'string') {
      if (x.length === 0) throw bad('prompt must not be empty', 'prompt');
      return { ids: tok.encode(x), text: x };
    }
    if (Array.isArray(x) && x.length > 0 && x.every((y) => typeof y === 'number')) {
      const ids = tokenIds(x, key, tok);
      return { ids, text: wantText ? tok.decode(ids, { skipSpecialTokens: false, cleanUpTokenizationSpaces: false }) : '' };
    }
    throw bad('prompt must be a string, a list of token ids, or a list of either', 'prompt');
  };
  if (typeof p === 'string') return [one(p, 'prompt')];
  if (!Array.isArray(p) || p.length === 0) throw bad('prompt must be a string, a list of token ids, or a list of either', 'prompt');
  if (p.every((x) => typeof x === 'number')) return [one(p, 'prompt')];
  return p.map((x, i) => one(x, `prompt[${i}]`));
}

/**
 * A prompt's output budget, checked against the context as vLLM checks it: its wording and param
 * (vllm/renderers/params.py TokenizeParams: the prompt may take the context less the requested
 * output; no output asked, all of it), and without an explicit budget the rest of the context
 * (vllm/entrypoints/utils.py get_max_tokens; a prompt that fills it leaves 0, refused).
 */
function budgetFor(promptLen: number, maxTokens: number | null, ctx: number | null, budgetParam: string): number | null {
  if (ctx === null) return maxTokens;
  const out = maxTokens ?? 0;
  // TokenizeParams.__post_init__ first, in vLLM's words (the missing space is theirs).
  if (out > ctx) throw bad(`${budgetParam}=${out}cannot be greater than max_model_len=max_total_tokens=${ctx}. Please request fewer output tokens.`, budgetParam);
  if (promptLen > ctx - out) {
    throw bad(`You passed ${promptLen} input tokens and requested ${out} output tokens. However, the model's context length is only ${ctx} tokens, resulting in a maximum input length of ${ctx - out} tokens. Please reduce the length of the input prompt.`, 'input_tokens');
  }
  if (maxTokens !== null) return maxTokens;
  const rest = ctx - promptLen;
  if (rest < 1) throw bad(`max_tokens must be at least 1, got ${rest}.`, 'max_tokens');
  return rest;
}

/**
 * The rendered prompt cut after the final message's content, as HF apply_chat_template does with
 * continue_final_message (transformers: the text up to the last occurrence of that content,
 * stripped), so the model continues the message instead of closing it.
 */
function continueFinal(rendered: string, content: string): string {
  const text = content.trim();
  const at = text.length > 0 ? rendered.lastIndexOf(text) : -1;
  if (at < 0) throw new TemplateError('continue_final_message: the final message is not in the rendered prompt');
  return rendered.slice(0, at + text.length);
}

/**
 * The tools the chat template renders: none for tool_choice "none", the named one alone for a
 * named choice (SGLang serving_chat.py _process_messages: `item.function.name ==
 * request.tool_choice.function.name`), else all.
 */
function templateTools(tools: JsonObject[] | null, choice: ToolChoice): JsonObject[] | null {
  if (tools === null || choice.mode === 'none') return null;
  if (choice.mode !== 'named') return tools;
  return tools.filter((t) => isObject(t.function) && t.function.name === choice.name);
}

/** What the completions prompt or the chat messages give: the prompts and the fields read with them. */
interface PromptInput {
  prompts: { ids: number[]; text: string }[];
  logprobs: number | null;
  maxTokens: number | null;
  /** The field the budget came from, for vLLM's error param. */
  budgetParam: string;
  echo: boolean;
  tools: JsonObject[] | null;
  toolChoice: ToolChoice;
  parsing: ChatParsing | null;
  chatEcho: string | undefined;
  role: string | undefined;
}

/**
 * n > 1: one logical request per choice (fanout.ts), as vLLM's ParentRequest makes n child
 * requests (vllm/v1/engine/parallel_sampling.py). vLLM's CompletionRequest/ChatCompletionRequest
 * no longer have best_of (an unknown field there); Baton accepts the values that ask for no
 * more than n and refuses the rest rather than serve n samples as if they were the best of more.
 */
function choicesOf(body: JsonObject): number {
  const n = int(body, 'n', 1, 128) ?? 1;
  const bestOf = int(body, 'best_of', 1);
  if (bestOf !== null && bestOf !== 1 && bestOf !== n) throw bad(`best_of=${bestOf} is not supported (vLLM serves none; Baton serves best_of only when it equals n=${n})`, 'best_of');
  if (body.suffix !== undefined && body.suffix !== null) throw bad('suffix is not supported', 'suffix');
  return n;
}

/** A completions request's prompts, echo, logprobs and budget. */
function completionInput(body: JsonObject, tok: Tokenizer): PromptInput {
  const echo = bool(body, 'echo', false);
  const prompts = completionPrompts(body, tok, echo);
  const logprobs = int(body, 'logprobs', 0, 20);
  // OpenAI's and vLLM's default for completions.
  const maxTokens = body.max_tokens === undefined ? 16 : int(body, 'max_tokens', 0);
  return { prompts, logprobs, maxTokens, budgetParam: 'max_tokens', echo, tools: null, toolChoice: { mode: 'none', name: null }, parsing: null, chatEcho: undefined, role: undefined };
}

/** A chat request's prompt (its messages through the chat template), tools, parsers, logprobs, budget and echo. */
function chatInput(body: JsonObject, tok: Tokenizer, parsers: OutputParsers | null): PromptInput {
  const msgs = chatMessages(body.messages);
  const { tools, choice: toolChoice } = readToolChoice(body);
  const kwargs = body.chat_template_kwargs;
  if (kwargs !== undefined && kwargs !== null && !isObject(kwargs)) throw bad('chat_template_kwargs must be an object', 'chat_template_kwargs');
  // vLLM ChatCompletionRequest.check_generation_prompt: continue_final_message renders the last
  // (assistant) message open, to be continued, so it cannot take a generation prompt too.
  const cont = bool(body, 'continue_final_message', false);
  const addGen = bool(body, 'add_generation_prompt', !cont);
  if (cont && addGen) throw bad('Cannot set both `continue_final_message` and `add_generation_prompt` to True.', 'continue_final_message');
  const last = msgs[msgs.length - 1]!;
  if (cont && last.role !== 'assistant') throw bad('continue_final_message needs the last message to be an assistant message to continue', 'continue_final_message');
  // vLLM get_chat_request_role: the generation prompt's role, else the last message's.
  const role = addGen ? 'assistant' : last.role;
  let promptText: string;
  try {
    promptText = tok.applyChatTemplate(msgs, {
      addGenerationPrompt: addGen,
      tools: templateTools(tools, toolChoice),
      extra: (kwargs as Record<string, unknown> | undefined) ?? undefined,
    });
    if (cont) promptText = continueFinal(promptText, contentString(last.content));
  } catch (err) {
    if (err instanceof TemplateError) throw bad(`the chat template failed: ${err.message}`, 'messages');
    throw err;
  }
  let parsing: ChatParsing | null = null;
  if (parsers !== null) {
    try {
      parsing = chatParsing(body, parsers);
    } catch (err) {
      if (err instanceof ParsingInputError) throw bad(err.message, err.param);
      throw err;
    }
  }
  // HF apply_chat_template(tokenize=True): the rendered text carries its own special tokens.
  const prompts = [{ ids: tok.encode(promptText, { addSpecialTokens: false }), text: promptText }];
  const want = bool(body, 'logprobs', false);
  const top = int(body, 'top_logprobs', 0, 20);
  if (top !== null && top > 0 && !want) throw bad('top_logprobs needs logprobs: true', 'top_logprobs');
  const logprobs = want ? (top ?? 0) : null;
  const budgetParam = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = int(body, budgetParam, 0);
  // vLLM chat_completion_full_generator / stream generator: with `echo`, the last message's
  // content leads each choice when its role is the answer's role.
  const chatEcho = bool(body, 'echo', false) && last.role === role ? contentString(last.content) : undefined;
  return { prompts, logprobs, maxTokens, budgetParam, echo: false, tools, toolChoice, parsing, chatEcho, role };
}

/** logit_bias: token ids of this model to numbers; null when not given. */
function logitBiasOf(body: JsonObject, tok: Tokenizer): Record<string, number> | null {
  const lb = body.logit_bias;
  if (lb === undefined || lb === null) return null;
  if (!isObject(lb) || !Object.values(lb).every((x) => typeof x === 'number')) throw bad('logit_bias must map token ids to numbers', 'logit_bias');
  for (const k of Object.keys(lb)) if (!/^\d+$/.test(k) || Number(k) >= tok.vocabSize) throw bad(`logit_bias names '${k}', which is not a token id of this model`, 'logit_bias');
  return lb as Record<string, number>;
}

export function parseOpenAi(kind: OpenAiKind, raw: unknown, models: ModelLookup, parsers: OutputParsers | null = null): OpenAiRequest {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  const body = raw;
  if (body.model !== undefined && body.model !== null && typeof body.model !== 'string') throw bad('model must be a string', 'model');
  const { name: model, tokenizer: tok, defaults: gen } = models.tokenizer((body.model as string | null | undefined) ?? undefined);
  const n = choicesOf(body);
  const input = kind === 'completion' ? completionInput(body, tok) : chatInput(body, tok, parsers);
  const { prompts, logprobs, budgetParam, echo, tools, toolChoice, parsing, chatEcho, role } = input;
  let maxTokens = input.maxTokens;
  // vLLM CompletionRequest.to_sampling_params: prompt_logprobs, else `logprobs` with `echo`.
  const promptLogprobsField = int(body, 'prompt_logprobs', 0, 20);
  const promptLogprobs = promptLogprobsField ?? (echo && logprobs !== null ? logprobs : null);
  // vLLM: echo with max_tokens 0 returns the prompt alone (the engine is asked for one token).
  const echoOnly = echo && maxTokens === 0;
  if (echoOnly) maxTokens = 1;

  const ctx = models.contextLength(model, tok);
  const items: PromptItem[] = prompts.map((p) => {
    if (p.ids.length === 0) throw bad('the prompt has no tokens', kind === 'chat' ? 'messages' : 'prompt');
    return { ids: p.ids, text: p.text, maxTokens: budgetFor(p.ids.length, maxTokens, ctx, budgetParam) };
  });
  const promptIds = items[0]!.ids;
  const promptText = items[0]!.text;
  maxTokens = items[0]!.maxTokens;
  const minTokens = int(body, 'min_tokens', 0) ?? 0;
  if (maxTokens !== null && minTokens > maxTokens) throw bad(`min_tokens (${minTokens}) must not exceed max_tokens (${maxTokens})`, 'min_tokens');

  const so = body.stream_options;
  if (so !== undefined && so !== null && !isObject(so)) throw bad('stream_options must be an object', 'stream_options');
  const stream = bool(body, 'stream', false);
  if (isObject(so) && !stream) throw bad('stream_options is only allowed with stream: true', 'stream_options');

  const topK = int(body, 'top_k', -1);
  const logitBias = logitBiasOf(body, tok);
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
    // A forced tool_choice's answer is read by forced-tools.ts: the model's own call format
    // through the configured parser, else the JSON array of calls its constraint asks for.
    parsing: forcedTools ? null : parsing,
    forcedParsing: forcedTools ? parsing : null,
    parallelToolCalls: kind === 'chat' ? bool(body, 'parallel_tool_calls', true) : undefined,
    n,
    prompts: items,
    promptLogprobs,
    returnTokenIds: bool(body, 'return_token_ids', false),
    tokensAsIds: bool(body, 'return_tokens_as_token_ids', false),
    // vLLM serve/utils/api_utils.py should_include_usage: continuous stats ride on include_usage.
    continuousUsage: isObject(so) && so.include_usage === true && so.continuous_usage_stats === true,
    echoOnly,
    chatEcho,
    role,
    stopRegex: stopRegex(body),
    chatView: kind === 'chat' ? chatViewOf(body) : undefined,
  };
}
