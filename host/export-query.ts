// The `/traces` query for an export, and the suggested file name: shared by the browser host
// (renderer) and Electron's main process. Pure, no Node or DOM imports.
import type { ExportFormat, TraceFilter } from './contract.ts';

export function traceQuery(format: ExportFormat, filter: TraceFilter): string {
  const q = new URLSearchParams({ format });
  for (const key of ['request', 'worker', 'outcome', 'kind'] as const) {
    const value = filter[key];
    if (value) q.set(key, value);
  }
  if (filter.since !== undefined) q.set('since', String(filter.since));
  return q.toString();
}

export function exportFileName(format: ExportFormat, at: Date): string {
  const stamp = at.toISOString().replace(/[:]/g, '-').replace(/\..*$/, '');
  return `baton-traces-${stamp}.${format}`;
}
