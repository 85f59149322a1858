// Which failures migrate: a short table of named kinds (after Dynamo's migration.rs), not
// scattered ifs. A failure is classified by what the worker *marks*, never by the wording of a
// message (each format reads its in-band marks: formats/<name>/failure.ts). `evidence` records
// what the decision was read from, for the attempt's trace row. What is classified here is the
// same for every format: the HTTP status before the body, and transport errors.
/** Why an attempt failed, as a short table of named kinds (MIGRATES below says which migrate). */
export type ErrorKind =
  | 'connect'          // worker unreachable: refused, DNS, connect timeout
  | 'http_5xx'         // 5xx before any body (503 overloaded, 529, ...)
  | 'http_4xx'         // client error from the worker: passed through, never migrated
  | 'stream_broken'    // socket closed or reset mid-body, or ended without a finished chunk
  | 'stalled'          // no chunk within the inter-token timeout
  | 'first_token_timeout' // no first byte within the first-token timeout (queue + prefill): migrated, worker not blamed
  | 'engine_abort'     // in-band abort with a 5xx status_code, or an in-band error frame with a 5xx code / retryable
  | 'validation'       // the request's refusal (in-band error frame, 4xx abort): passed through, never migrated
  | 'worker_abort'     // aborted at the worker without an error status (/abort_request): passed through
  | 'weights_changed'  // a continuation's worker reported other weights than the request started on
  | 'client_cancel'    // the client went away
  | 'protocol'         // the worker answered something Baton cannot stitch (text mode, bad JSON)
  | 'no_worker'        // no eligible worker was left to try
  | 'drain'            // the worker is draining (deadline near): continued elsewhere, the worker not blamed
  | 'prefill_failed';  // P/D: the prefill leg failed or hung before the KV transfer: a new pair, the decode worker not blamed

/**
 * A classified failure (this file makes them): what an attempt's row records
 * of it (error_kind, error, error_evidence) and what the client is shown. It lives in the core,
 * the bottom of the layers, so that the transport can carry one it is handed without importing the loop.
 */
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

/** What the transport saw go wrong, unclassified. */
export type TransportFact =
  /** The worker answered `status` (not 200) before any body; `body` is its answer (capped). */
  | { kind: 'status'; status: number; body: Buffer; contentType: string }
  /** A transport error (its `code`: refused, reset, DNS, connect timeout), before or after the head. */
  | { kind: 'error'; err: unknown; responseStarted: boolean }
  /** Nothing for `idleMs`: before the first byte (`firstToken`) or after `reads` reads. */
  | { kind: 'stall'; idleMs: number; firstToken: boolean; reads: number; spacing: number; deadlineMs: number }
  /** The answer ended (an SSE stream, or a `unary` body) and its owner had not ended the attempt. */
  | { kind: 'ended'; reads: number; unary: boolean };


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
  drain: true,
  prefill_failed: true,
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
  drain: false,
  // The attempt's worker is the decode leg, which is innocent: the loop blames the prefill leg's
  // worker itself (migration/pd.ts).
  prefill_failed: false,
};

/** The message of an error body: `{"error": {"message"}}`, `{"message"}`, `{"detail"}`, else its start. */
function bodyMessage(body: Buffer): string {
  const text = body.toString('utf8', 0, 300);
  try {
    const j = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    const e = j.error;
    if (typeof e === 'object' && e !== null && typeof (e as Record<string, unknown>).message === 'string') return (e as Record<string, string>).message!;
    if (typeof e === 'string') return e;
    if (typeof j.message === 'string') return j.message;
    if (typeof j.detail === 'string') return j.detail;
  } catch {
    // not JSON: the text itself
  }
  return text;
}

/** An HTTP answer other than 200 before any body. */
export function classifyHttpStatus(status: number, body: Buffer, contentType: string): Failure {
  const text = bodyMessage(body);
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

/**
 * The failure a transport fact is (upstream/attempt.ts reports facts; this table names them): a
 * non-200 head, a transport error, a stall, or a stream that ended without the loop's finish.
 */
export function classifyTransportFact(f: TransportFact): Failure {
  switch (f.kind) {
    case 'status':
      return classifyHttpStatus(f.status, f.body, f.contentType);
    case 'error':
      return classifyTransportError(f.err, f.responseStarted);
    case 'stall':
      return f.firstToken
        ? { kind: 'first_token_timeout', message: `no first token from worker within ${f.idleMs} ms (queue + prefill)`, status: 504, evidence: `first-token deadline: nothing for ${f.idleMs} ms since the request was sent` }
        : { kind: 'stalled', message: `no data from worker for ${f.idleMs} ms`, status: 504, evidence: `inter-token deadline: nothing for ${f.idleMs} ms after ${f.reads} reads${f.spacing > 1 ? ` (deadline ${f.deadlineMs} ms: frames up to ${f.spacing} tokens apart)` : ''}` };
    case 'ended':
      return f.unary
        ? { kind: 'stream_broken', message: 'worker answered without a finished chunk', status: 502, evidence: 'a unary body without a finished chunk' }
        : { kind: 'stream_broken', message: 'stream ended without a finished chunk', status: 502, evidence: `stream ended after ${f.reads} reads without a finished chunk` };
  }
}

// --- Blame needs evidence (migration.md) ------------------------------------------------------
// A request can make a healthy worker look dead: SGLang answers 200 and then closes the
// connection when its handler raises something other than ValueError (an unknown sampling key:
// http_server.py `generate_request` catches only ValueError, and uvicorn closes a connection whose
// response had started), and answers 500 before the body when a unary request does. So a failure
// before the request's first token is the request's until the worker shows it is its own.

/**
 * Whether this failure counts against its worker only with evidence: a broken stream or a 500
 * (Starlette's answer to any unhandled exception) while the request has no output token yet.
 * Everything else carries its own evidence: a refused connection, a 502/503/504/529 (the worker's
 * or its proxy's state), an engine's in-band abort (it marks itself), a stall after tokens.
 */
export function needsEvidence(f: Failure, requestTokens: number): boolean {
  if (requestTokens > 0) return false;
  return f.kind === 'stream_broken' || (f.kind === 'http_5xx' && f.status === 500);
}

/** What the router could find out about a worker right after a failure that needs evidence. */
export interface WorkerEvidence {
  /** A health probe on a fresh connection, run right then (null: not needed). */
  probe: { ok: boolean; refused: boolean; detail: string } | null;
  /**
   * Another attempt on the same worker, one whose request had output tokens, that failed in a way
   * that blames the worker since this attempt started (null: none). Only such failures are
   * recorded: a request without tokens leaves no evidence, so a client that repeats a bad
   * request cannot manufacture any.
   */
  corroboration: { kind: ErrorKind; tokens: number; afterMs: number } | null;
}

export interface Verdict {
  /** The failure is the worker's: bench it and count it in the breaker. */
  blame: boolean;
  /** The worker refused a connection: out until a health check answers. */
  dead: boolean;
  /** What was read, for the attempt's trace row and the client's error. */
  evidence: string;
}

/** The decision over the evidence found; pure. */
export function judge(e: WorkerEvidence): Verdict {
  const c = e.corroboration;
  if (c) return { blame: true, dead: false, evidence: `a stream with ${c.tokens} tokens failed on the same worker too (${c.kind}, ${c.afterMs} ms after this attempt started): the worker's fault` };
  const p = e.probe;
  if (p && !p.ok) return { blame: true, dead: p.refused, evidence: `a health probe right after failed (${p.detail}): the worker's fault` };
  return { blame: false, dead: false, evidence: `no evidence against the worker${p ? ` (a health probe right after: ${p.detail})` : ''}, and no stream with tokens failed on it meanwhile: not counted against it` };
}
