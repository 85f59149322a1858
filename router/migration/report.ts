// The loop's reporting: every trace row of a request, and its events, are made here from what
// the loop saw and handed to telemetry (router/telemetry.ts fills in trace ids, counts metrics,
// emits events). A logical request reports through it (logical-request.ts), and so does a
// request served whole (pass-through.ts), so a row's shape is decided in one place. Never on the
// per-token path: when a request is admitted, an attempt starts or ends, a request ends.
import type { Admission, FormatRequest, FormatSession } from '../core/types.ts';
import type { ErrorKind, Failure } from '../core/failure.ts';
import type { Worker } from '../pool/worker.ts';
import type { ProgressSource, Telemetry } from '../telemetry.ts';
import type { AttemptOutcome, RequestOutcome } from '../trace/row.ts';
import type { RequestOutput } from '../trace/outputs.ts';
import type { AttemptState } from './attempt-state.ts';

/** How the attempt loop ended, for the request row. */
export interface LoopEnd {
  outcome: RequestOutcome;
  finishReason: string | null;
  lastFailure: Failure | null;
  exhausted: boolean;
}

/** What the client was told when the router answered with its own error: its status and `<type>: <message>`. */
export interface Told {
  status: number;
  text: string;
}

export class LoopReport {
  readonly startedAt = Date.now();
  private firstTokenSeen = false;
  /** When the request's first failure came (not a drain's move): how long its migration took. */
  private firstFailureAt: number | null = null;
  /** The error the client got, for the request row; null: none yet. */
  private toldClient: Told | null = null;
  /** Where each ended attempt's tokens start in the logical output (for the dashboard). */
  private readonly segments: { attempt: number; worker: string; from_token: number; tokens: number }[] = [];

  constructor(
    private readonly telemetry: Telemetry,
    private readonly src: ProgressSource,
    private readonly format: string,
  ) {}

  /** The request came in, admitted for migration or not (`reason`: why not). */
  admitted(admitted: boolean, reason: string | null, stream: boolean, promptTokens: number, maxNewTokens: number | null, front: string | null): void {
    this.telemetry.requestAdmitted(this.src, {
      request_id: this.src.id,
      admitted,
      reason,
      stream,
      prompt_tokens: promptTokens,
      max_new_tokens: maxNewTokens,
      format: this.format,
      ...(front ? { front } : {}),
    });
  }

  /** An attempt is about to be sent; returns the headers it carries upstream (its trace context), or null. */
  attemptStarted(attempt: number, rid: string, worker: Worker, replayed: number, budgetBefore: number | null, prefill: Worker | null): Record<string, string> | null {
    return this.telemetry.attemptStarted({ request_id: this.src.id, attempt, rid, worker: worker.url, replayed_tokens: replayed, budget_before: budgetBefore, ...(prefill !== null ? { prefill_worker: prefill.url } : {}) });
  }

  /** An attempt's first frame came `now`; the request's first token if none came before. */
  firstToken(a: AttemptState, now: number): void {
    const logical = this.firstTokenSeen ? null : now - this.startedAt;
    this.firstTokenSeen = true;
    this.telemetry.firstToken(this.src.id, a.index, now - a.startedAt, logical);
  }

  /** The request goes on at `attempt` on `to`, after a failure of `kind` on `from`. */
  migrated(from: string, to: string, replayed: number, attempt: number, kind: ErrorKind, ongoing: boolean): void {
    this.telemetry.migrated(this.src.id, from, to, replayed, attempt, kind, ongoing, replayed);
  }

  /** The client got an error: its status and `<type>: <message>`, as the request row says. */
  told(status: number, text: string): void {
    this.toldClient = { status, text };
  }

  /** An attempt failed (a drain's move is no failure): the first one starts the migration's clock. */
  failed(): void {
    this.firstFailureAt ??= Date.now();
  }

  maxSeqLenExceeded(): void {
    this.telemetry.maxSeqLenExceeded();
  }

  /** An attempt of the loop ended: its row. */
  attemptEnded(a: AttemptState, outcome: AttemptOutcome, failure: Failure | null): void {
    const tokens = a.reader.tokens;
    this.segments.push({ attempt: a.index, worker: a.worker.url, from_token: a.replayed, tokens });
    this.telemetry.attemptEnded({
      kind: 'attempt',
      request_id: this.src.id,
      attempt: a.index,
      rid: a.rid,
      worker: a.worker.url,
      started_at: a.startedAt,
      ended_at: Date.now(),
      ttft_ms: a.firstFrameAt === null ? null : a.firstFrameAt - a.startedAt,
      prompt_tokens_sent: a.promptSent,
      replayed_tokens: a.replayed,
      tokens,
      budget_before: a.budgetBefore,
      budget_after: a.budgetBefore === null ? null : Math.max(0, a.budgetBefore - tokens),
      cached_tokens: a.reader.cachedTokens,
      placement_prefix: a.placement.prefix,
      placement_reason: a.placement.reason,
      outcome,
      error_kind: failure?.kind ?? null,
      error: failure?.message ?? null,
      error_evidence: failure?.evidence ?? null,
      finish_reason: outcome === 'finished' ? a.reader.finishReason() : null,
      trace_id: null,
      format: this.format,
      ...a.dispatch.rowFacts(),
    });
  }

  /** The logical request ended: its row. `cut`: the router cut off a client that read nothing. */
  requestEnded(end: LoopEnd, attempts: number, admission: Admission, req: FormatRequest, out: FormatSession, cut: Failure | null): void {
    const { outcome, finishReason, lastFailure, exhausted } = end;
    const told = this.toldClient;
    const ended = Date.now();
    const cached = out.cachedTokens;
    this.telemetry.requestFinished(this.src, {
      kind: 'request',
      request_id: this.src.id,
      attempts,
      migrations: Math.max(0, attempts - 1),
      admitted: admission.admitted,
      admission_reason: admission.reason,
      prompt_tokens: req.promptLength ?? 0,
      completion_tokens: out.ids.length,
      cached_tokens: cached === null ? null : Math.min(cached, req.promptLength ?? 0),
      finish_reason: outcome === 'finished' ? finishReason : null,
      outcome,
      duration_ms: ended - this.startedAt,
      started_at: this.startedAt,
      ended_at: ended,
      stream: req.stream,
      max_new_tokens: out.budget,
      error: outcome === 'failed' && lastFailure ? lastFailure.message : outcome === 'cancelled' ? (cut?.message ?? null) : null,
      client_error: outcome === 'failed' ? (told?.text ?? null) : null,
      client_status: outcome === 'failed' ? (told?.status ?? null) : null,
      // Filled in by telemetry when the request is traced.
      trace_id: null,
      format: this.format,
    }, this.firstFailureAt, exhausted, this.keptOutput(out));
  }

  /**
   * What the outputs ring keeps of this request, in arrays of its own. Handing the ring the
   * request's own arrays (`out.ids`, `segments`) made the whole object graph of every W1 request
   * outlive its scavenges: a promotion rate of ~75 % against ~20 %, 3x the mark-compacts, 72 MiB
   * of survivors against 11 MiB (docs/benchmarks.md, "The outputs ring keeps copies").
   * Measured, not traced through V8; the likely path is allocation-site pretenuring:
   * arrays that outlive their request teach V8 to allocate that initializer's objects (folded
   * with the request's others) in the old generation, where a dead object keeps the young ones it
   * points to alive until the next mark-compact. The copies are allocated here, apart from the
   * request's own objects (the OpenAI session's token texts are its own array too).
   */
  private keptOutput(out: FormatSession): RequestOutput {
    const kept: RequestOutput = { request_id: this.src.id, output_ids: out.ids.slice(), attempts: this.segments.map((s) => ({ ...s })) };
    const texts = out.tokenTexts?.() ?? null;
    if (texts !== null) kept.token_text = texts.slice();
    const chat = out.chatView?.() ?? null;
    if (chat !== null) kept.chat = chat;
    return kept;
  }

  // --- A request served whole (pass-through.ts): one attempt, the worker's answer as it wrote it.
  // Its rows keep their own order of keys (`format` second): trace files are compared byte for byte.

  /** The attempt of a request served whole ended: its row (no tokens counted, never placed by prefix). */
  wholeAttemptEnded(worker: Worker, promptTokens: number, startedAt: number, endedAt: number, outcome: AttemptOutcome, failure: Failure | null): void {
    const id = this.src.id;
    this.telemetry.attemptEnded({ kind: 'attempt', format: this.format, request_id: id, attempt: 0, rid: id, worker: worker.url, started_at: startedAt, ended_at: endedAt, ttft_ms: null, prompt_tokens_sent: promptTokens, replayed_tokens: 0, tokens: 0, budget_before: null, budget_after: null, cached_tokens: null, placement_prefix: null, placement_reason: null, outcome, error_kind: failure?.kind ?? null, error: failure?.message ?? null, error_evidence: failure?.evidence ?? null, finish_reason: null });
  }

  /** A request served whole ended, after `attempts` (0: no worker served it): its row. */
  wholeRequestEnded(reason: string, req: FormatRequest, attempts: number, outcome: RequestOutcome, endedAt: number, error: string | null): void {
    const id = this.src.id;
    const started = this.startedAt;
    const told = this.toldClient;
    this.telemetry.requestFinished(this.src, { kind: 'request', format: this.format, request_id: id, attempts, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: req.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome, duration_ms: endedAt - started, started_at: started, ended_at: endedAt, stream: req.stream, max_new_tokens: null, error, client_error: told?.text ?? null, client_status: told?.status ?? null }, null, false);
  }
}
