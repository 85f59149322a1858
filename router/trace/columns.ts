// CSV columns: the union of both row kinds' fields, `kind` first. A row leaves blank the
// columns of the other kind. JSON Lines and CSV carry the same rows.
import type { AttemptRow, RequestRow } from './row.ts';

export const TRACE_COLUMNS = [
  'kind', 'request_id', 'attempt', 'rid', 'worker', 'started_at', 'ended_at', 'ttft_ms',
  'prompt_tokens_sent', 'replayed_tokens', 'tokens', 'budget_before', 'budget_after',
  'cached_tokens', 'outcome', 'error_kind', 'error', 'error_evidence', 'finish_reason',
  'attempts', 'migrations', 'admitted', 'admission_reason', 'prompt_tokens', 'completion_tokens',
  'duration_ms', 'stream', 'max_new_tokens', 'trace_id', 'format', 'placement_prefix', 'placement_reason',
  'prefill_worker', 'decode_worker', 'bootstrap_room', 'failed_leg',
  'client_error', 'client_status', 'prefill_ended_at',
] as const;

export type TraceColumn = (typeof TRACE_COLUMNS)[number];

// A field added to a row type but not to the columns would silently vanish from CSV exports:
// make that a type error here instead.
type Missing = Exclude<keyof AttemptRow | keyof RequestRow, TraceColumn>;
const _everyFieldHasAColumn: [Missing] extends [never] ? true : Missing = true;
