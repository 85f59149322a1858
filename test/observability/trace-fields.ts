// The trace-row fields as docs/trace-rows.md lists them, written out here rather than
// imported, so that a renamed or dropped field fails the tests. Also the documented way to read
// a CSV export back into rows.
import { parse } from 'csv-parse/sync';
import type { TraceRow } from '../../router/trace/row.ts';

export const ATTEMPT_FIELDS = [
  'kind', 'request_id', 'attempt', 'rid', 'worker', 'started_at', 'ended_at', 'ttft_ms', 'prompt_tokens_sent',
  'replayed_tokens', 'tokens', 'budget_before', 'budget_after', 'cached_tokens', 'outcome', 'error_kind', 'error',
  'error_evidence', 'finish_reason',
  // the OpenTelemetry trace (docs/tracing.md), null when not traced
  'trace_id', 'format',
  // what placed the attempt (docs/routing.md), null unless cache_aware placed it
  'placement_prefix', 'placement_reason',
] as const;

export const REQUEST_FIELDS = [
  'kind', 'request_id', 'attempts', 'migrations', 'admitted', 'admission_reason', 'prompt_tokens',
  'completion_tokens', 'cached_tokens', 'finish_reason', 'outcome', 'duration_ms',
  // documented in docs/trace-rows.md
  'started_at', 'ended_at', 'stream', 'max_new_tokens', 'error',
  // the OpenTelemetry trace (docs/tracing.md), null when not traced
  'trace_id', 'format',
  // the error the client got (docs/trace-rows.md)
  'client_error', 'client_status',
] as const;

const NUMBERS = new Set([
  'attempt', 'started_at', 'ended_at', 'ttft_ms', 'prompt_tokens_sent', 'replayed_tokens', 'tokens', 'budget_before',
  'budget_after', 'cached_tokens', 'attempts', 'migrations', 'prompt_tokens', 'completion_tokens', 'duration_ms',
  'max_new_tokens', 'placement_prefix', 'client_status', 'prefill_ended_at',
]);
const BOOLEANS = new Set(['admitted', 'stream']);

const EMPTY = Symbol('unquoted empty');

/**
 * A CSV export read back into rows, by the rules of docs/trace-rows.md: the header names the
 * columns; a row keeps the columns of its kind; an unquoted empty cell is null, a quoted one
 * the empty string; number columns are decimal numbers, `admitted` and `stream` are true/false.
 * Throws if a row has a value in a column of the other kind.
 */
export function parseTraceCsv(text: string): TraceRow[] {
  const records = parse(text, {
    columns: true,
    // Keep the distinction between "" and an empty cell, which csv-parse otherwise erases.
    cast: (value, ctx) => (value === '' && !ctx.quoting && !ctx.header ? EMPTY : value),
  }) as Record<string, string | typeof EMPTY>[];
  return records.map((rec, i) => {
    const fields: readonly string[] = rec.kind === 'attempt' ? ATTEMPT_FIELDS : rec.kind === 'request' ? REQUEST_FIELDS : [];
    if (fields.length === 0) throw new Error(`record ${i}: unknown kind ${String(rec.kind)}`);
    const row: Record<string, unknown> = {};
    for (const [col, cell] of Object.entries(rec)) {
      if (!fields.includes(col)) {
        if (cell !== EMPTY) throw new Error(`record ${i} (${String(rec.kind)}): column ${col} of the other kind holds '${String(cell)}'`);
        continue;
      }
      if (cell === EMPTY) row[col] = null;
      else if (NUMBERS.has(col)) {
        const n = Number(cell);
        if (cell.trim() === '' || !Number.isFinite(n)) throw new Error(`record ${i}: ${col} is not a number: '${cell}'`);
        row[col] = n;
      } else if (BOOLEANS.has(col)) {
        if (cell !== 'true' && cell !== 'false') throw new Error(`record ${i}: ${col} is not true/false: '${cell}'`);
        row[col] = cell === 'true';
      } else row[col] = cell;
    }
    return row as unknown as TraceRow;
  });
}
