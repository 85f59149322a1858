// What the dashboard knows about one logical request and its attempts, built from events.
import type { AttemptOutcome, AttemptRow, ErrorKind, RequestRow } from '../../../router/trace/row.ts';

export type RequestStatus = 'running' | 'finished' | 'failed' | 'cancelled';

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
}

/** Migrations of a request: the router's count once finished, else what the page has seen. */
export function migrationCount(r: RequestView): number {
  return Math.max(r.summary?.migrations ?? 0, r.migrations.length, r.attempts.length - 1, 0);
}

export function workersOf(r: RequestView): string[] {
  return [...new Set(r.attempts.map((a) => a.worker))];
}
