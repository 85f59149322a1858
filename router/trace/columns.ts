// CSV columns: the union of both row kinds' fields, `kind` first. A row leaves blank the
// columns of the other kind. JSON Lines and CSV carry the same rows.
export const TRACE_COLUMNS = [
  'kind', 'request_id', 'attempt', 'rid', 'worker', 'started_at', 'ended_at', 'ttft_ms',
  'prompt_tokens_sent', 'replayed_tokens', 'tokens', 'budget_before', 'budget_after',
  'cached_tokens', 'outcome', 'error_kind', 'error', 'finish_reason',
  'attempts', 'migrations', 'admitted', 'admission_reason', 'prompt_tokens', 'completion_tokens',
  'duration_ms', 'stream', 'max_new_tokens',
] as const;
