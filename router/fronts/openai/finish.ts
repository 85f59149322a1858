// How a chat/completions answer ends (session.ts): the finish it records and the usage it reports.
import type { ClientSink } from '../../core/client-sink.ts';
import type { JsonObject } from '../../core/types.ts';
import type { OpenAiRequest } from './request.ts';

export interface Ended {
  /** The worker's (or Baton's stop string's) finish; "tool_calls" is decided when rendering (ChatOutput.finishReason). */
  reason: 'stop' | 'length' | 'abort';
  /** vLLM's `stop_reason`: the matched stop string or stop token id (null: EOS or length). */
  stopReason: string | number | null;
  /**
   * SGLang's `matched_stop` (serving_chat.py / serving_completions.py: finish_reason["matched"]):
   * the stop string, or the token id that stopped it, EOS included; absent: null.
   */
  matched?: string | number | null;
}

export const matchedStop = (end: Ended): string | number | null => (end.reason !== 'stop' ? null : end.matched !== undefined ? end.matched : end.stopReason);

/** The answer's usage: its prompt, its output tokens over every attempt, the cache hits when known. */
export function usageOf(req: OpenAiRequest, produced: number, cachedTokens: number | null): JsonObject {
  const prompt = req.promptIds.length;
  const u: JsonObject = { prompt_tokens: prompt, total_tokens: prompt + produced, completion_tokens: produced };
  if (cachedTokens !== null) u.prompt_tokens_details = { cached_tokens: Math.min(cachedTokens, prompt) };
  return u;
}

/**
 * Write a streamed chunk with the usage it carries. OpenAI: with include_usage every chunk but
 * the last carries `usage: null`; vLLM's continuous_usage_stats: this choice's usage so far in every one.
 */
export function writeWithUsage(sink: ClientSink, req: OpenAiRequest, produced: number, chunk: JsonObject): void {
  if (req.continuousUsage) {
    const prompt = req.promptIds.length;
    chunk.usage = { prompt_tokens: prompt, completion_tokens: produced, total_tokens: prompt + produced };
  } else if (req.includeUsage) chunk.usage = null;
  sink.writeChunk(chunk);
}

/**
 * vLLM's `stop_reason` for a finish on token `id` (v1 check_stop): null on the tokenizer's own
 * EOS, which vLLM checks apart from stop_token_ids (unless ignore_eos), else the id; the other
 * generation_config EOS ids are stop_token_ids there (SamplingParams.update_from_generation_config).
 * SGLang names the EOS it stopped on; vLLM's worker reports null for it already.
 */
export function stopTokenReason(req: OpenAiRequest, id: number | null): number | null {
  if (id === null) return null;
  return id === req.tokenizer.eosTokenId && !req.sampling.ignore_eos ? null : id;
}
