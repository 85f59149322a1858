// SGLang's in-band failure marks. An in-band `{"error": ...}` frame is the request's own refusal
// (SGLang writes one for any ValueError: ids beyond the vocabulary, a duplicate rid, an option
// the server lacks, ...) unless it says itself that it is the engine's (a 5xx code, or
// `retryable: true`); an abort finish is the engine's only with a 5xx status_code. Never the
// wording of a message.
import type { Failure } from '../../core/failure.ts';

function statusOf(e: Record<string, unknown>): number | undefined {
  for (const key of ['code', 'status_code', 'status']) {
    const v = e[key];
    if (typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 599) return v;
  }
  return undefined;
}

/**
 * An in-band `{"error": ...}` frame. Current SGLang writes `{"message","type","code":400,
 * "retryable":false}` for a request's ValueError; versions before 2026-06-06 write only
 * `{"message"}`. Either is the request's error, whatever it says. Only a frame that marks itself
 * as the engine's (a 5xx code, or `retryable: true`) is a failure to migrate.
 */
export function classifyInBandError(error: unknown): Failure {
  let message = 'worker reported an error';
  let status: number | undefined;
  let retryable = false;
  if (typeof error === 'string') message = error;
  else if (typeof error === 'object' && error !== null) {
    const e = error as Record<string, unknown>;
    if (typeof e.message === 'string') message = e.message;
    status = statusOf(e);
    retryable = e.retryable === true;
  }
  const shown = status === undefined ? 'no code' : `code ${status}`;
  if ((status !== undefined && status >= 500) || retryable) {
    return { kind: 'engine_abort', message, status: status !== undefined && status >= 500 ? status : 503, evidence: `in-band error frame (${shown}, retryable ${retryable})` };
  }
  return { kind: 'validation', message, status: status ?? 400, evidence: `in-band error frame (${shown}, retryable ${retryable}): the request's refusal` };
}

/**
 * A chunk whose finish_reason is an abort: 5xx is the engine's failure (migrate), 4xx the
 * request's. No status at all is what SGLang writes when someone called /abort_request on the
 * worker: a deliberate stop, passed to the client as written, not undone by a migration.
 */
export function classifyAbort(finishReason: Record<string, unknown>): Failure {
  const message = typeof finishReason.message === 'string' ? finishReason.message : 'request aborted by the engine';
  const status = finishReason.status_code;
  if (typeof status !== 'number') return { kind: 'worker_abort', message, status: 499, evidence: 'abort finish without status_code: a deliberate abort' };
  const evidence = `abort finish, status_code ${status}`;
  return status >= 500 ? { kind: 'engine_abort', message, status, evidence } : { kind: 'validation', message, status, evidence };
}
