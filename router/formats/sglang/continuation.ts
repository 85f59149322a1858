// Building SGLang's upstream request of an attempt. Attempt 0 is the client's body, made to
// stream (the router assembles unary answers itself so that a unary request can migrate
// mid-generation), under the attempt's rid: the client's bytes with both keys appended. A continuation appends the replayed tokens to the prompt and asks for the
// saturating remainder of the budget; every other field is the client's, untouched.
import { remainingBudget, remainingMinTokens } from '../../core/continuation.ts';
import type { AttemptSpec, JsonObject } from '../../core/types.ts';
import type { GenerateRequest } from './request.ts';

export function buildFirstAttempt(req: GenerateRequest, rid: string): JsonObject {
  return { ...req.body, rid, stream: true };
}

/** A continuation's body from the whole budget (tests and tools); the loop uses attemptBody. */
export function buildContinuation(
  req: GenerateRequest,
  promptIds: readonly number[],
  replayed: readonly number[],
  budget: number,
  rid: string,
  minNewTokens = req.minNewTokens,
): JsonObject {
  const remaining = remainingBudget(budget, replayed.length);
  return continuationBody(req, promptIds, { index: 1, rid, replayed, remaining, minTokens: remainingMinTokens(minNewTokens, replayed.length, remaining) }, minNewTokens > 0);
}

function continuationBody(req: GenerateRequest, promptIds: readonly number[], spec: AttemptSpec, hasMinimum: boolean): JsonObject {
  const replayed = spec.replayed;
  // Always explicit, even where the client relied on a worker default: the worker's default would
  // grant the whole budget again. The budget is already clamped to the context (admission), so
  // SGLang's check of an explicit budget (prompt + max_new_tokens < context_len) passes.
  const sampling: JsonObject = { ...req.sampling, max_new_tokens: spec.remaining };
  // min_new_tokens shrinks wherever it came from: the client, or a default the worker advertises
  // (which the worker would otherwise apply in full again).
  if (hasMinimum || (req.sampling.min_new_tokens !== undefined && req.sampling.min_new_tokens !== null)) {
    sampling.min_new_tokens = spec.minTokens;
  }
  const body: JsonObject = {
    ...req.body,
    input_ids: replayed.length === 0 ? (promptIds as number[]) : promptIds.concat(replayed),
    sampling_params: sampling,
    rid: spec.rid,
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

const isJsonSpace = (c: number | undefined) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * Attempt 0's body from the client's own bytes: `"rid"` and `"stream":true` appended as the
 * object's last keys. SGLang reads a body with Python's json (FastAPI), which keeps the LAST of
 * duplicate keys, as JSON.parse does: a rid or stream the client sent is overridden exactly as
 * the spread in buildFirstAttempt overrides it, every other field reaches the worker as the
 * client wrote it (numbers in their own spelling too), and the body is neither re-serialised nor
 * encoded again. Null when the bytes do not end with the object's `}` (not what was parsed).
 */
export function spliceFirstAttempt(raw: Buffer, rid: string): Buffer | null {
  let end = raw.length - 1;
  while (end >= 0 && isJsonSpace(raw[end])) end--;
  if (end < 0 || raw[end] !== 0x7d /* } */) return null;
  let last = end - 1;
  while (last >= 0 && isJsonSpace(raw[last])) last--;
  // `{}`: nothing to separate from. (No value ends with `{`, so this is the object's own.)
  const tail = `${raw[last] === 0x7b ? '' : ','}"rid":${JSON.stringify(rid)},"stream":true}`;
  const out = Buffer.allocUnsafe(end + Buffer.byteLength(tail));
  raw.copy(out, 0, 0, end);
  out.write(tail, end);
  return out;
}

/** Attempt k's body: the client's for attempt 0 (or a request that may not migrate), else a continuation. */
export function attemptBody(req: GenerateRequest, promptIds: readonly number[], spec: AttemptSpec, minNewTokens: number): string | Buffer {
  if (spec.remaining === null) return (req.raw && spliceFirstAttempt(req.raw, spec.rid)) ?? JSON.stringify(buildFirstAttempt(req, spec.rid));
  return JSON.stringify(continuationBody(req, promptIds, spec, minNewTokens > 0));
}
