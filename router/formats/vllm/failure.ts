// vLLM's in-band failure marks (serving.py `serve_tokens_stream_generator` at 00a80787, and
// vllm/v1/engine/__init__.py). After the 200, an error arrives as one `{"error": {...}}` frame
// then `[DONE]`: a GenerationError (finish_reason "error": "a retryable request-level internal
// error, e.g. KV load failure... always converted to 500") or any other exception (500). Its
// `code` says whose fault it is (a string in some versions): 5xx or none is the engine's; 4xx
// the request's. A finish_reason "abort" without our asking is the engine aborting the request
// (a pause or a shutdown): migrated. Never the wording of a message.
import type { Failure } from '../../core/failure.ts';

function codeOf(e: Record<string, unknown>): number | undefined {
  for (const key of ['code', 'status_code', 'status']) {
    const v = e[key];
    const n = typeof v === 'string' && /^\d{3}$/.test(v) ? Number(v) : v;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 100 && n <= 599) return n;
  }
  return undefined;
}

export function classifyVllmError(error: unknown): Failure {
  let message = 'worker reported an error';
  let status: number | undefined;
  if (typeof error === 'string') message = error;
  else if (typeof error === 'object' && error !== null) {
    const e = error as Record<string, unknown>;
    if (typeof e.message === 'string') message = e.message;
    status = codeOf(e);
  }
  const shown = status === undefined ? 'no code' : `code ${status}`;
  if (status === undefined || status >= 500) {
    return { kind: 'engine_abort', message, status: status ?? 500, evidence: `in-band error frame (${shown}): the engine's` };
  }
  return { kind: 'validation', message, status, evidence: `in-band error frame (${shown}): the request's refusal` };
}

/** A choice that finished with `error` or `abort`: the engine's, migrated. */
export function classifyVllmFinish(reason: string): Failure | null {
  if (reason === 'error') return { kind: 'engine_abort', message: 'vLLM finished the request with "error" (a retryable request-level internal error)', status: 500, evidence: 'finish_reason "error"' };
  if (reason === 'abort') return { kind: 'engine_abort', message: 'vLLM aborted the request (a pause or a shutdown)', status: 503, evidence: 'finish_reason "abort"' };
  return null;
}
