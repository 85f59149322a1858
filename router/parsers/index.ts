// The chat output parsers of the OpenAI front (`--tool-call-parser`, `--reasoning-parser`): the
// detokenized output goes through the reasoning parser, then its content through the tool-call
// parser, as SGLang's serving_chat.py (_process_reasoning_stream, then _process_tool_call_stream)
// and vLLM's chat_completion/serving.py chain them. The state lives with the logical request and
// reads the text Baton detokenizes over every attempt, so a thought or a call cut by a migration
// parses as the uninterrupted output does.
import { randomUUID } from 'node:crypto';
import { REASONING_PARSER_NAMES, TOOL_PARSER_NAMES, type ReasoningFormat, type ToolFormat } from './names.ts';
import { ReasoningParser } from './reasoning.ts';
import { CALL_FORMATS, MarkedCallsParser, PythonicToolParser, Qwen3CoderToolParser } from './tools.ts';
import { ParseOut, type CallIds, type ToolCall, type ToolNames, type ToolParser } from './types.ts';

export { ParseOut, type ToolCall, type ToolCallDelta, type ToolNames } from './types.ts';
export { REASONING_PARSER_NAMES, TOOL_PARSER_NAMES, type ReasoningFormat, type ToolFormat } from './names.ts';

/** The router's parsers (resolved from the flags' names). */
export interface OutputParsers {
  tool: ToolFormat | null;
  reasoning: ReasoningFormat | null;
  /** The answer's reasoning fields (`--reasoning-field`): reasoningKeys. */
  reasoningField: ReasoningField;
}

/**
 * `--reasoning-field`: `both` (the default), `reasoning_content` (SGLang's and DeepSeek's name,
 * which SGLang's and LangChain's clients read) or `reasoning` (the name vLLM renamed it to, vLLM
 * docs/features/reasoning_outputs.md, which @openai/agents' chat model reads). `both` writes the
 * two, so every client finds its field (docs/openai.md lists which client reads which).
 */
export const REASONING_FIELDS = ['both', 'reasoning_content', 'reasoning'] as const;
export type ReasoningField = (typeof REASONING_FIELDS)[number];

const BOTH = ['reasoning_content', 'reasoning'] as const;

/** The keys a message or delta carries the reasoning under, in the order they are written. */
export function reasoningKeys(field: ReasoningField): readonly string[] {
  return field === 'both' ? BOTH : [field];
}

export class ParserNameError extends Error {}

/** The formats of the configured names ('' = none); an unknown name names the accepted ones. */
export function resolveParsers(toolCallParser: string | null, reasoningParser: string | null, reasoningField: ReasoningField = 'both'): OutputParsers {
  const tool = toolCallParser === null || toolCallParser === '' ? null : TOOL_PARSER_NAMES[toolCallParser];
  if (tool === undefined) throw new ParserNameError(`unknown --tool-call-parser '${toolCallParser}': one of ${Object.keys(TOOL_PARSER_NAMES).join(', ')}`);
  const reasoning = reasoningParser === null || reasoningParser === '' ? null : REASONING_PARSER_NAMES[reasoningParser];
  if (reasoning === undefined) throw new ParserNameError(`unknown --reasoning-parser '${reasoningParser}': one of ${Object.keys(REASONING_PARSER_NAMES).join(', ')}`);
  return { tool, reasoning, reasoningField };
}

/** What one chat request asks of the parsers (request.ts reads it from the body). */
export interface ChatParsing {
  /**
   * The tool-call format, the names the request offers, and (for formats that write arguments as
   * text, qwen3_coder) each tool's parameter schemas; null: tool calls stay text.
   */
  tool: { format: ToolFormat; names: ToolNames; schemas?: ReadonlyMap<string, Readonly<Record<string, unknown>>> } | null;
  /** The reasoning format; null: no thought is separated. */
  reasoning: ReasoningFormat | null;
  /** SGLang's `stream_reasoning` (default true): false sends a thought whole when it ends. */
  streamReasoning: boolean;
  reasoningField: ReasoningField;
  /**
   * `parallel_tool_calls` (default true). false keeps the first call (index 0) and drops the
   * deltas of later ones, streamed and not: vLLM serve/utils/tool_calls_utils.py
   * maybe_filter_parallel_tool_calls. (SGLang relies on its grammar's maxItems for forced calls.)
   * Absent: true.
   */
  parallelToolCalls?: boolean;
}

/** A chat body's parser fields that are not what the sources accept. */
export class ParsingInputError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function optBool(body: Record<string, unknown>, key: string, dflt: boolean): boolean {
  const v = body[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw new ParsingInputError(`${key} must be a boolean`, key);
  return v;
}

/**
 * What a chat request asks of the router's parsers. Tool calls are parsed only when the request
 * offers tools and tool_choice is not "none" (SGLang serving_chat.py: `request.tool_choice !=
 * "none" and request.tools`; vLLM: tool_choice "auto" with tools). Reasoning is separated unless
 * `separate_reasoning` is false (SGLang's field) or the chat template's `enable_thinking` (Qwen3)
 * or `thinking` (DeepSeek-V3.1) is false: then the model writes no thought to separate.
 */
export function chatParsing(body: Record<string, unknown>, parsers: OutputParsers): ChatParsing | null {
  let tool: ChatParsing['tool'] = null;
  if (parsers.tool !== null && Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== 'none') {
    const names = new Set<string>();
    const schemas = new Map<string, Record<string, unknown>>();
    body.tools.forEach((t, i) => {
      const f = isObj(t) ? t.function : undefined;
      if (!isObj(f) || typeof f.name !== 'string' || f.name.length === 0) throw new ParsingInputError(`tools[${i}].function.name must be a non-empty string`, 'tools');
      names.add(f.name);
      // Qwen3CoderDetector._get_arguments_config: the parameters' properties, or the parameters.
      if (isObj(f.parameters)) schemas.set(f.name, isObj(f.parameters.properties) ? f.parameters.properties : f.parameters);
    });
    tool = { format: parsers.tool, names, schemas };
  }
  const kwargs = isObj(body.chat_template_kwargs) ? body.chat_template_kwargs : {};
  const thinking = kwargs.enable_thinking === false || kwargs.thinking === false ? false : true;
  const reasoning = parsers.reasoning !== null && optBool(body, 'separate_reasoning', true) && thinking ? parsers.reasoning : null;
  const streamReasoning = optBool(body, 'stream_reasoning', true);
  const parallelToolCalls = optBool(body, 'parallel_tool_calls', true);
  if (tool === null && reasoning === null) return null;
  return { tool, reasoning, streamReasoning, reasoningField: parsers.reasoningField, parallelToolCalls };
}

export function toolParser(format: ToolFormat, names: ToolNames, ids: CallIds, keepPreCall: boolean, schemas: ReadonlyMap<string, Readonly<Record<string, unknown>>> = new Map()): ToolParser & { complete: boolean[]; preCall: string; contentBeforeCallsOnly: boolean } {
  switch (format) {
    case 'qwen25':
    case 'llama3':
    case 'mistral':
    case 'deepseekv3':
      return new MarkedCallsParser(CALL_FORMATS[format], names, ids, keepPreCall);
    case 'qwen3_coder':
      return new Qwen3CoderToolParser(names, ids, keepPreCall, schemas);
    case 'pythonic':
      return new PythonicToolParser(names, ids, keepPreCall);
  }
}

/** SGLang's tool call id (serving_chat.py: f"call_{uuid.uuid4().hex[:24]}"). */
export const callId = (): string => `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`;

/** A non-streaming answer's message fields. */
export interface ParsedMessage {
  reasoning: string | null;
  content: string | null;
  toolCalls: ToolCall[];
}

/** One request's parsers, chained: reasoning first, then tool calls over the content. */
export class ChatParser {
  readonly out = new ParseOut();
  private readonly reasoning: ReasoningParser | null;
  private readonly tools: (ToolParser & { complete: boolean[]; preCall: string; contentBeforeCallsOnly: boolean }) | null;
  /** Whether any tool call was streamed (finish_reason becomes "tool_calls"). */
  called = false;
  /** parallel_tool_calls false: only the first call's deltas pass. */
  private readonly firstCallOnly: boolean;

  constructor(p: ChatParsing, unary: boolean, ids: CallIds = callId) {
    this.reasoning = p.reasoning === null ? null : new ReasoningParser(p.reasoning, p.streamReasoning);
    this.tools = p.tool === null ? null : toolParser(p.tool.format, p.tool.names, ids, unary, p.tool.schemas);
    this.firstCallOnly = p.parallelToolCalls === false;
  }

  /** The calls of one push, after parallel_tool_calls (vLLM: deltas of index 0 only). */
  private noteCalls(out: ParseOut): void {
    if (this.firstCallOnly && out.calls.some((d) => d.index !== 0)) out.calls = out.calls.filter((d) => d.index === 0);
    if (out.calls.length > 0) this.called = true;
  }

  /** Takes the next text; the answer's deltas are in `out` (cleared by the next call). */
  push(text: string): ParseOut {
    const out = this.out;
    out.reset();
    const content = this.reasoning === null ? text : this.reasoning.push(text, out);
    if (this.tools === null) out.content += content;
    else if (content.length > 0) this.tools.push(content, out);
    if (out.calls.length > 0) this.noteCalls(out);
    return out;
  }

  /** The end of the output: what was held back. */
  finish(): ParseOut {
    const out = this.out;
    out.reset();
    const content = this.reasoning === null ? '' : this.reasoning.finish(out);
    if (this.tools === null) out.content += content;
    else {
      if (content.length > 0) this.tools.push(content, out);
      this.tools.finish(out);
    }
    if (out.calls.length > 0) this.noteCalls(out);
    return out;
  }

  /**
   * A whole output parsed at once, shaped as the non-streaming answer: SGLang's
   * _build_chat_response (reasoning split first, then HermesDetector.detect_and_parse: the content
   * before the first call, stripped, and the calls whose JSON is complete).
   */
  parseWhole(text: string): ParsedMessage {
    let reasoning = '';
    let content = '';
    const calls: { id: string; name: string; arguments: string }[] = [];
    const take = (o: ParseOut) => {
      reasoning += o.reasoning;
      content += o.content;
      for (const d of o.calls) {
        if (d.name !== null) calls[d.index] = { id: d.id!, name: d.name, arguments: d.arguments };
        else calls[d.index]!.arguments += d.arguments;
      }
    };
    take(this.push(text));
    take(this.finish());
    let toolCalls: ToolCall[] = [];
    if (this.tools !== null && this.called) {
      if (this.tools.contentBeforeCallsOnly) content = this.tools.preCall.trim();
      toolCalls = calls.filter((_, i) => this.tools!.complete[i] === true);
    }
    return { reasoning: reasoning.length > 0 ? reasoning : null, content: content.length > 0 ? content : null, toolCalls };
  }
}
