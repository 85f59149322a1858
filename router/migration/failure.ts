// Which failures migrate: a short table of named kinds (after Dynamo's migration.rs), not
// scattered ifs. `phase` says whether the attempt had produced output tokens when it failed:
// a failure before the first token is a new-request migration, after it an ongoing one.
import type { ErrorKind } from '../trace/row.ts';

export interface Failure {
  kind: ErrorKind;
  message: string;
  /** HTTP status to show the client when this failure is passed through or exhausts migration. */
  status: number;
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
  engine_abort: true,
  protocol: true,
  http_4xx: false,
  validation: false,
  worker_abort: false,
  client_cancel: false,
  no_worker: false,
};

/** Whether the failure says something about the worker's health (bench it, count it in the breaker). */
export const BLAMES_WORKER: Record<ErrorKind, boolean> = {
  connect: true,
  http_5xx: true,
  stream_broken: true,
  stalled: true,
  engine_abort: true,
  protocol: false,
  http_4xx: false,
  validation: false,
  worker_abort: false,
  client_cancel: false,
  no_worker: false,
};

// In-band `{"error": ...}` frames carry no status in SGLang (a ValueError's message); treat the
// ones that read as a refusal of the request as validation errors and the rest as engine failures.
const VALIDATION_WORDS = /must be|invalid|exceed|longer than|too (long|many|large)|not supported|unsupported|expected|out of range|cannot be|is not allowed|should be/i;

export function classifyInBandError(error: unknown): Failure {
  let message = 'worker reported an error';
  let status: number | undefined;
  if (typeof error === 'string') message = error;
  else if (typeof error === 'object' && error !== null) {
    const e = error as Record<string, unknown>;
    if (typeof e.message === 'string') message = e.message;
    for (const key of ['status_code', 'code', 'status']) {
      if (typeof e[key] === 'number') status = e[key] as number;
    }
  }
  if (status !== undefined) {
    return status >= 500 ? { kind: 'engine_abort', message, status } : { kind: 'validation', message, status };
  }
  return VALIDATION_WORDS.test(message)
    ? { kind: 'validation', message, status: 400 }
    : { kind: 'engine_abort', message, status: 500 };
}

/**
 * A chunk whose finish_reason is an abort: 5xx is the engine's failure (migrate), 4xx the
 * request's. No status at all is what SGLang writes when someone called /abort_request on the
 * worker: a deliberate stop, passed to the client as written, not undone by a migration.
 */
export function classifyAbort(finishReason: Record<string, unknown>): Failure {
  const message = typeof finishReason.message === 'string' ? finishReason.message : 'request aborted by the engine';
  if (typeof finishReason.status_code !== 'number') return { kind: 'worker_abort', message, status: 499 };
  const status = finishReason.status_code;
  return status >= 500 ? { kind: 'engine_abort', message, status } : { kind: 'validation', message, status };
}

/** The worker could not be reached at all: nothing listens there (for now). */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * An error thrown by the upstream call (undici). Only an unreachable worker is `connect`; a
 * connection that closed after the request went out is a broken stream, even before the
 * headers (whether it counts as a new-request or an ongoing migration depends on the tokens
 * received, not on this kind).
 */
export function classifyTransportError(err: unknown, _responseStarted: boolean): Failure {
  const e = err as { code?: string; message?: string; name?: string };
  const message = `${e.code ?? e.name ?? 'Error'}: ${e.message ?? String(err)}`;
  if (e.code !== undefined && CONNECT_CODES.has(e.code)) return { kind: 'connect', message, status: 502 };
  return { kind: 'stream_broken', message, status: 502 };
}
