// Trace rows: the debugging record of Baton. Field names are part of the product (exports,
// docs/trace-rows.md, the dashboard), so they are snake_case like SGLang's own meta_info.

/** `drained`: moved off a draining worker before its deadline (error_kind `drain`): not a failure. */
export type AttemptOutcome = 'finished' | 'failed' | 'cancelled' | 'budget_exhausted' | 'drained';
export type RequestOutcome = 'finished' | 'failed' | 'cancelled';

/** Why an attempt failed, as a short table of named kinds (see router/migration/failure.ts). */
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
 * A classified failure (router/migration/failure.ts makes them): what an attempt's row records
 * of it (error_kind, error, error_evidence) and what the client is shown. It lives here, at the
 * bottom of the layers, so that the transport can carry one it is handed without importing the loop.
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

export interface AttemptRow {
  kind: 'attempt';
  request_id: string;
  attempt: number;
  rid: string;
  worker: string;
  started_at: number;
  ended_at: number;
  ttft_ms: number | null;
  prompt_tokens_sent: number;
  replayed_tokens: number;
  tokens: number;
  budget_before: number | null;
  budget_after: number | null;
  cached_tokens: number | null;
  /**
   * Tokens of the prefix the policy believed the chosen worker held when it chose it (cache_aware:
   * of the prompt, and for a continuation of prompt + replayed tokens); null: not placed by prefix.
   */
  placement_prefix?: number | null;
  /** Why the policy chose this worker (cache_aware: `cache_hit 480/512`, `below_threshold ...`, `imbalanced: load ...`); null: not said. */
  placement_reason?: string | null;
  outcome: AttemptOutcome;
  error_kind: ErrorKind | null;
  error: string | null;
  /** What the failure's classification was read from (a status, a frame's code, a timeout). */
  error_evidence: string | null;
  finish_reason: string | null;
  /** The OpenTelemetry trace this attempt's span is in (docs/tracing.md); null when not traced. */
  trace_id: string | null;
  /**
   * The wire format of the request: `sglang` (POST /generate), `vllm` (POST /inference/v1/generate)
   * or `openai` (POST /v1/completions, /v1/chat/completions: Baton's tokenizing front).
   */
  format: 'sglang' | 'vllm' | 'openai';
  /** P/D (docs/pd.md): the prefill leg's worker; null or absent: not a P/D attempt. */
  prefill_worker?: string | null;
  /** P/D: the decode leg's worker (the one that streamed; also `worker`). */
  decode_worker?: string | null;
  /** P/D: the attempt's bootstrap_room, decimal (a 63-bit integer, beyond JSON's exact numbers). */
  bootstrap_room?: string | null;
  /** P/D: the leg the failure was attributed to; null: none failed. */
  failed_leg?: 'prefill' | 'decode' | null;
  /**
   * P/D: when the prefill leg ended on its own (epoch ms): it answered after the KV transfer, or
   * failed; null: it was still waiting when the attempt ended, which closed it.
   */
  prefill_ended_at?: number | null;
}

export interface RequestRow {
  kind: 'request';
  request_id: string;
  attempts: number;
  migrations: number;
  admitted: boolean;
  admission_reason: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number | null;
  finish_reason: string | null;
  outcome: RequestOutcome;
  duration_ms: number;
  started_at: number;
  ended_at: number;
  stream: boolean;
  max_new_tokens: number | null;
  error: string | null;
  /**
   * When `outcome` is `failed`: the error the client got, as `<type>: <message>` (the router's own:
   * `no_worker`, `migration_exhausted`, `not_migratable`, ...; a failure passed through from the
   * worker: its error kind); null otherwise. Optional for rows written before it existed.
   */
  client_error?: string | null;
  /** The HTTP status of that error (in band when the stream had started); null when `client_error` is. */
  client_status?: number | null;
  /** The OpenTelemetry trace of this request (docs/tracing.md); null when not traced. */
  trace_id: string | null;
  /**
   * The wire format of the request: `sglang` (POST /generate), `vllm` (POST /inference/v1/generate)
   * or `openai` (POST /v1/completions, /v1/chat/completions: Baton's tokenizing front).
   */
  format: 'sglang' | 'vllm' | 'openai';
}

export type TraceRow = AttemptRow | RequestRow;
