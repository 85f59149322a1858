// Building the upstream request of an attempt. Attempt 0 is the client's body, made to stream
// (the router assembles unary answers itself so that a unary request can migrate mid-generation).
// A continuation appends the replayed tokens to the prompt and asks for the saturating remainder
// of the budget; every other field is the client's, untouched.
import type { GenerateRequest, JsonObject } from '../format/sglang/request.ts';

/** Remaining budget: original − replayed, never below 0. */
export function remainingBudget(original: number, replayed: number): number {
  return Math.max(0, original - replayed);
}

/** min_new_tokens shrinks with the replayed tokens, never below 0 nor above the remaining budget. */
export function remainingMinTokens(originalMin: number, replayed: number, remaining: number): number {
  return Math.min(remaining, Math.max(0, originalMin - replayed));
}

export function buildFirstAttempt(req: GenerateRequest, rid: string): JsonObject {
  return { ...req.body, rid, stream: true };
}

export function buildContinuation(
  req: GenerateRequest,
  promptIds: readonly number[],
  replayed: readonly number[],
  budget: number,
  rid: string,
  minNewTokens = req.minNewTokens,
): JsonObject {
  const remaining = remainingBudget(budget, replayed.length);
  // Always explicit, even where the client relied on a worker default: the worker's default would
  // grant the whole budget again. `budget` is already clamped to the context (admission.ts), so
  // SGLang's check of an explicit budget (prompt + max_new_tokens < context_len) passes.
  const sampling: JsonObject = { ...req.sampling, max_new_tokens: remaining };
  // min_new_tokens shrinks wherever it came from: the client, or a default the worker advertises
  // (which the worker would otherwise apply in full again).
  if (minNewTokens > 0 || (req.sampling.min_new_tokens !== undefined && req.sampling.min_new_tokens !== null)) {
    sampling.min_new_tokens = remainingMinTokens(minNewTokens, replayed.length, remaining);
  }
  const body: JsonObject = {
    ...req.body,
    input_ids: replayed.length === 0 ? (promptIds as number[]) : promptIds.concat(replayed),
    sampling_params: sampling,
    rid,
    stream: true,
  };
  // `text` beside `input_ids` is served from input_ids by SGLang (io_struct.py); a continuation's
  // prompt is the ids, so the text must not travel with them.
  delete body.text;
  // The client already holds the original prompt's input logprobs from attempt 0; ask for the
  // least prompt-logprob work SGLang allows (-1: none, or the last prompt position in older
  // versions). With nothing replayed the continuation *is* the original prompt, so keep what the
  // client asked for.
  if (req.returnLogprob && replayed.length > 0) body.logprob_start_len = -1;
  return body;
}
