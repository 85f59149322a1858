// The `/traces` query for an export, and the suggested file name: shared by the browser host
// (renderer) and Electron's main process. Pure, no Node or DOM imports.
import type { ExportFilter, ExportFormat, TraceFileContext } from './contract.ts';

/** Exports made from the dashboard carry ISO times next to the epoch milliseconds (`iso=1`). */
export function traceQuery(format: ExportFormat, filter: ExportFilter, iso = true): string {
  const q = new URLSearchParams({ format });
  for (const key of ['request', 'worker', 'outcome', 'kind'] as const) {
    const value = filter[key];
    if (value) q.set(key, value);
  }
  if (filter.requestPrefix) q.set('request_prefix', filter.requestPrefix);
  if (filter.since !== undefined) q.set('since', String(filter.since));
  if (filter.until !== undefined) q.set('until', String(filter.until));
  if (iso) q.set('iso', '1');
  return q.toString();
}

export function exportFileName(format: ExportFormat, at: Date): string {
  const stamp = at.toISOString().replace(/[:]/g, '-').replace(/\..*$/, '');
  return `baton-traces-${stamp}.${format}`;
}

export const CONTEXT_KIND = 'baton_context';

/**
 * The context record that ends a self-contained export: a JSON line, or a CSV record with
 * `baton_context` in the `kind` column (the first) and the same JSON in `request_id` (the
 * second), padded with empty fields to the header's `columns` so strict CSV readers take it.
 */
export function contextRecord(ctx: TraceFileContext, format: ExportFormat, columns = 2): string {
  const json = JSON.stringify(ctx);
  if (format === 'jsonl') return `${json}\n`;
  return `${CONTEXT_KIND},"${json.replace(/"/g, '""')}"${','.repeat(Math.max(0, columns - 2))}\n`;
}

/** Fields in a CSV header line (trace-row headers are bare names: no quotes, no commas inside). */
export function csvHeaderColumns(text: string): number {
  const end = text.indexOf('\n');
  const line = (end < 0 ? text : text.slice(0, end)).replace(/\r$/, '');
  return line === '' ? 0 : line.split(',').length;
}
