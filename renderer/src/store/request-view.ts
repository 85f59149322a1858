// What the dashboard knows about one logical request and its attempts, built from events.
import type { AttemptOutcome, AttemptRow, ErrorKind, RequestRow } from '../../../router/trace/row.ts';

/**
 * `lost`: the page saw it running, then lost the connection (or another router answered), and
 * never learnt how it ended; its rows, if the router wrote them, are in Traces.
 */
export type RequestStatus = 'running' | 'finished' | 'failed' | 'cancelled' | 'lost';

export interface AttemptView {
  attempt: number;
  rid: string;
  worker: string;
  startedAt: number;
  endedAt: number | null;
  ttftMs: number | null;
  /** Output tokens this attempt sent back as prompt (its continuation point). */
  replayed: number;
  /** Output tokens this attempt produced itself. */
  tokens: number;
  budgetBefore: number | null;
  budgetAfter: number | null;
  outcome: AttemptOutcome | 'running';
  errorKind: ErrorKind | null;
  error: string | null;
  finishReason: string | null;
  /** When this page last saw the attempt's token count grow (live only; null from rows). */
  lastTokenAt: number | null;
  /** P/D: the prefill server of the attempt's pair, known from its start (`worker` is the decode worker); null: aggregated. */
  prefillWorker?: string | null;
  row: AttemptRow | null;
}

export interface MigrationMark {
  /** The attempt index the router reported with the migration. */
  attempt: number;
  fromWorker: string;
  toWorker: string | null;
  atToken: number;
  errorKind: ErrorKind;
  t: number;
}

export interface RequestView {
  id: string;
  /** Arrival order in this page, for newest-first lists. */
  seq: number;
  startedAt: number;
  endedAt: number | null;
  status: RequestStatus;
  admitted: boolean | null;
  admissionReason: string | null;
  stream: boolean | null;
  promptTokens: number | null;
  maxNewTokens: number | null;
  attempts: AttemptView[];
  migrations: MigrationMark[];
  completionTokens: number;
  error: string | null;
  summary: RequestRow | null;
  /** The wire format it came in (sglang, vllm), once a row said; null from older routers' rows. */
  format: string | null;
  /** The router path it came on (/generate, /v1/chat/completions, ...), from its first event; null when not said. */
  front: string | null;
  /** Its OpenTelemetry trace id when the router traced it, else null. */
  traceId: string | null;
}

/** Migrations of a request: the router's count once finished, else what the page has seen. */
export function migrationCount(r: RequestView): number {
  return Math.max(r.summary?.migrations ?? 0, r.migrations.length, r.attempts.length - 1, 0);
}

export function workersOf(r: RequestView): string[] {
  return [...new Set(r.attempts.map((a) => a.worker))];
}

/** Migrated or failed: an incident is about these, so they are kept longer than the others. */
export function isNotable(r: RequestView): boolean {
  return r.status === 'failed' || migrationCount(r) > 0 || r.attempts.some((a) => a.outcome === 'failed');
}

/** A gap without tokens longer than this is drawn as a stall (hatched), not as generation. */
export const STALL_MS = 1000;

/** `nothing for 30000 ms` in a deadline's evidence, or `no data from worker for 30000 ms` in its error. */
function deadlineMs(a: AttemptView): number | null {
  const text = `${a.row?.error_evidence ?? ''} ${a.error ?? ''}`;
  const m = /nothing for (\d+) ms|for (\d+) ms/.exec(text);
  return m ? Number(m[1] ?? m[2]) : null;
}

/**
 * Where an attempt stopped producing: the part of its bar after its last token (or, with none,
 * after it started) that is a wait rather than generation. From the router's deadline when the
 * attempt ended on one (stalled, first_token_timeout), else from when this page last saw its
 * tokens grow. Null when there is no such stretch (a finished attempt never has one).
 */
export function stalledFrom(a: AttemptView, now: number): number | null {
  if (a.outcome === 'finished' || a.outcome === 'budget_exhausted') return null;
  const end = a.endedAt ?? now;
  if (a.errorKind === 'stalled' || a.errorKind === 'first_token_timeout') {
    const ms = deadlineMs(a);
    if (a.errorKind === 'first_token_timeout' || a.tokens === 0) return a.startedAt;
    if (ms !== null) return Math.max(a.startedAt, end - ms);
  }
  const since = a.lastTokenAt ?? (a.tokens === 0 && a.ttftMs === null ? a.startedAt : null);
  if (since === null || end - since < STALL_MS) return null;
  return since;
}
