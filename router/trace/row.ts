// Trace rows: the debugging record of Baton. Field names are part of the product (exports,
// docs/trace-rows.md, the dashboard), so they are snake_case like SGLang's own meta_info.

import type { ErrorKind } from '../core/failure.ts';

export type { ErrorKind, Failure } from '../core/failure.ts';

/** `drained`: moved off a draining worker before its deadline (error_kind `drain`): not a failure. */
export type AttemptOutcome = 'finished' | 'failed' | 'cancelled' | 'budget_exhausted' | 'drained';
export type RequestOutcome = 'finished' | 'failed' | 'cancelled';

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
   * The format the client spoke (its WireFormat's `name`): a worker format's name
   * (router/formats/registry.ts), or `openai` (POST /v1/completions, /v1/chat/completions,
   * /v1/responses: Baton's tokenizing front over one).
   */
  format: string;
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
   * The format the client spoke (its WireFormat's `name`): a worker format's name
   * (router/formats/registry.ts), or `openai` (POST /v1/completions, /v1/chat/completions,
   * /v1/responses: Baton's tokenizing front over one).
   */
  format: string;
}

export type TraceRow = AttemptRow | RequestRow;
