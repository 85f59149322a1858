// The unary (non-streamed) chat/completions answer (session.ts): one body with the whole text,
// its message (parsed into reasoning, content and tool calls when the request asks), logprobs,
// finish and usage.
import type { JsonObject } from '../../core/types.ts';
import { reasoningKeys } from '../../parsers/index.ts';
import type { ChatOutput } from './chat-output.ts';
import { matchedStop, type Ended } from './finish.ts';
import type { LogprobRow, OpenAiLogprobs } from './logprobs.ts';
import type { OpenAiRequest } from './request.ts';

/** What the unary answer is made of, as the session holds it at the end. */
export interface UnaryParts {
  req: OpenAiRequest;
  responseId: string;
  created: number;
  index: number;
  /** The text that leads the answer (an echo), unparsed. */
  lead: string;
  /** The lead and the model's text. */
  text: string;
  rows: LogprobRow[];
  chat: ChatOutput;
  logprobs: OpenAiLogprobs;
  /** return_token_ids: the output's ids; null when not asked. */
  tokenIds: number[] | null;
  usage: JsonObject;
}

/** A message's tool call. */
const toolCallJson = (t: { id: string; name: string; arguments: string }): JsonObject => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } });

/** The answer's body, as JSON. */
export function unaryAnswer(p: UnaryParts, end: Ended): string {
  const { req, chat, lead, text } = p;
  const choice: JsonObject = { index: p.index };
  if (req.kind === 'chat' && chat.toolCalls) {
    choice.message = { role: 'assistant', content: null, tool_calls: chat.toolCalls.map(toolCallJson) };
    chat.answer?.setCalls(chat.toolCalls);
  } else if (chat.parser !== null) {
    choice.message = parsedMessage(p);
  } else if (req.kind === 'chat') {
    choice.message = { role: req.role ?? 'assistant', content: text };
    chat.answer?.addContent(text.slice(lead.length));
  }
  else choice.text = text;
  choice.logprobs = p.logprobs.of(p.rows, req.kind === 'completion' && req.echo);
  choice.finish_reason = chat.finishReason(end);
  choice.stop_reason = end.stopReason;
  // SGLang's non-streaming _process_tool_calls sets finish_reason["matched"] = None where it
  // turns a stop into "tool_calls"; its stream keeps the matched token (_generate_chat_stream:
  // finish_reason_data.get("matched")), as the session's chunks do.
  choice.matched_stop = choice.finish_reason === 'tool_calls' ? null : matchedStop(end);
  const promptLps = p.logprobs.promptJson();
  if (req.kind === 'completion' && promptLps !== null) choice.prompt_logprobs = promptLps;
  if (p.tokenIds !== null) {
    if (req.kind === 'completion') choice.prompt_token_ids = req.promptIds;
    choice.token_ids = p.tokenIds;
  }
  const body: JsonObject = {
    id: p.responseId,
    object: req.kind === 'chat' ? 'chat.completion' : 'text_completion',
    created: p.created,
    model: req.model,
    choices: [choice],
    usage: p.usage,
  };
  if (req.kind === 'chat' && promptLps !== null) body.prompt_logprobs = promptLps;
  if (req.kind === 'chat' && p.tokenIds !== null) body.prompt_token_ids = req.promptIds;
  return JSON.stringify(body);
}

/**
 * The chat message with the parsers: SGLang's _build_chat_response, reasoning split first, then
 * the tool calls. A chat echo leads the content unparsed: it is the client's own text, not the model's.
 */
function parsedMessage(p: UnaryParts): JsonObject {
  const { req, chat, lead } = p;
  const m = chat.parser!.parseWhole(p.text.slice(lead.length));
  let calls: { id: string; name: string; arguments: string }[] = m.toolCalls;
  let content = m.content;
  if (req.forcedTools && calls.length === 0) {
    // Not in the model's own call format: the JSON array the forced choice's constraint asks for.
    chat.toolCalls = chat.forcedCalls(content ?? '');
    if (chat.toolCalls !== null) {
      calls = chat.toolCalls;
      content = null;
    }
  }
  const message: JsonObject = { role: req.role ?? 'assistant', content: lead.length > 0 ? lead + (content ?? '') : content };
  if (chat.parsing!.reasoning !== null) for (const k of reasoningKeys(chat.parsing!.reasoningField)) message[k] = m.reasoning;
  if (calls.length > 0) message.tool_calls = calls.map(toolCallJson);
  chat.answer?.addReasoning(m.reasoning ?? '');
  chat.answer?.addContent(content ?? '');
  chat.answer?.setCalls(calls);
  return message;
}
