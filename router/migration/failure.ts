// Which failures migrate: a short table of named kinds (after Dynamo's migration.rs), not
// scattered ifs. A failure is classified by what SGLang *marks*, never by the wording of a
// message: an in-band `{"error": ...}` frame is the request's own refusal (SGLang writes one for
// any ValueError: ids beyond the vocabulary, a duplicate rid, an option the server lacks, ...)
// unless it says itself that it is the engine's (a 5xx code, or `retryable: true`); an abort
// finish is the engine's only with a 5xx status_code. `evidence` records what the decision was
// read from, for the attempt's trace row.
import type { ErrorKind } from '../trace/row.ts';

export interface Failure {
  kind: ErrorKind;
  message: string;
  /** HTTP status to show the client when this failure is passed through or exhausts migration. */
  status: number;
  /** What the classification was read from (trace rows: `error_evidence`). */
  evidence?: string;
  /** For pass-through failures: the worker's own body, forwarded as SGLang wrote it. */
  body?: Buffer;
  contentType?: string;
}

/** true: the attempt may be continued elsewhere (if admitted and within the limit). */
export const MIGRATES: Record<ErrorKind, boolean> = {
  connect: true,
  http_5xx: true,
  stream_broken: true,
  stalled: true,
  first_token_timeout: true,
  engine_abort: true,
  protocol: true,
  weights_changed: true,
  http_4xx: false,
  validation: false,
  worker_abort: false,
  client_cancel: false,
  no_worker: false,
};

/**
 * Whether the failure says something about the worker's health (bench it, count it in the
 * breaker). A request's own refusal never does: one bad client must not take workers out. A
 * slow first token is load, not a fault; new weights are an update, not a failure.
 */
export const BLAMES_WORKER: Record<ErrorKind, boolean> = {
  connect: true,
  http_5xx: true,
  stream_broken: true,
  stalled: true,
  engine_abort: true,
  first_token_timeout: false,
  protocol: false,
  weights_changed: false,
  http_4xx: false,
  validation: false,
  worker_abort: false,
  client_cancel: false,
  no_worker: false,
};

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

/** An HTTP answer other than 200 before any body. */
export function classifyHttpStatus(status: number, body: Buffer, contentType: string): Failure {
  const text = body.toString('utf8', 0, 300);
  if (status >= 500) return { kind: 'http_5xx', message: `worker answered ${status}: ${text}`, status, evidence: `HTTP ${status} before the body` };
  return {
    kind: status >= 400 ? 'http_4xx' : 'protocol',
    message: `worker answered ${status}: ${text}`,
    status,
    body,
    contentType,
    evidence: `HTTP ${status} before the body${status >= 400 ? ': the request\'s refusal' : ''}`,
  };
}

/** The worker could not be reached at all: nothing listens there (for now). */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * An error thrown by the upstream call (undici). Only an unreachable worker is `connect`; a
 * connection that closed after the request went out is a broken stream, even before the
 * headers (whether it counts as a new-request or an ongoing migration depends on the tokens
 * received, not on this kind).
 */
export function classifyTransportError(err: unknown, responseStarted: boolean): Failure {
  const e = err as { code?: string; message?: string; name?: string };
  const message = `${e.code ?? e.name ?? 'Error'}: ${e.message ?? String(err)}`;
  if (e.code !== undefined && CONNECT_CODES.has(e.code)) return { kind: 'connect', message, status: 502, evidence: `transport error ${e.code}: worker unreachable` };
  return { kind: 'stream_broken', message, status: 502, evidence: `transport error ${e.code ?? e.name ?? 'Error'} ${responseStarted ? 'after' : 'before'} the response started` };
}
