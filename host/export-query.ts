// The `/traces` query for an export, and the suggested file name: shared by the browser host
// (renderer) and Electron's main process. Pure, no Node or DOM imports.
import type { ExportFilter, ExportFormat } from './contract.ts';

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
