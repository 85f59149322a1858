// Traces: the trace-row table (virtualized, newest first) with filters, a count, and Export
// JSONL / CSV through the host (a download in the browser, a save dialog in Electron).
import { useMemo, useRef, useState } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import type { TraceRow } from '../../../router/trace/row.ts';
import type { ExportFormat, TraceFilter } from '../../../host/contract.ts';
import type { WorkerTable } from '../store/workers.ts';
import { useDash, useHost, useStoreApi } from './context.ts';
import { fmtBytes, fmtClock, fmtMs } from './format.ts';
import { showError } from './toast.tsx';

const ROW_HEIGHT = 26;
const OUTCOMES = ['finished', 'failed', 'cancelled', 'budget_exhausted'];

function rowMatches(row: TraceRow, f: TraceFilter): boolean {
  if (f.kind && row.kind !== f.kind) return false;
  if (f.request && row.request_id !== f.request) return false;
  if (f.outcome && row.outcome !== f.outcome) return false;
  if (f.worker && (row.kind !== 'attempt' || row.worker !== f.worker)) return false;
  return true;
}

function Cells({ row, workers }: { row: TraceRow; workers: WorkerTable }) {
  if (row.kind === 'attempt') {
    return (
      <>
        <span>attempt</span>
        <span className="mono" title={row.request_id}>{row.request_id}</span>
        <span>{row.attempt}</span>
        <span title={row.worker}><span className="swatch" style={{ background: workers.colorOf(row.worker) }} />{workers.idOf(row.worker)}</span>
        <span title={new Date(row.started_at).toISOString()}>{fmtClock(row.started_at)}</span>
        <span>{fmtMs(row.ended_at - row.started_at)}</span>
        <span>{fmtMs(row.ttft_ms)}</span>
        <span>{row.replayed_tokens}</span>
        <span>{row.tokens}</span>
        <span>{row.budget_before ?? '—'} → {row.budget_after ?? '—'}</span>
        <span className={row.outcome === 'failed' ? 'health-dead' : ''}>{row.outcome}</span>
        <span title={row.error ?? ''}>{row.error_kind ?? ''}{row.error ? `: ${row.error}` : ''}</span>
      </>
    );
  }
  return (
    <>
      <span><b>request</b></span>
      <span className="mono" title={row.request_id}>{row.request_id}</span>
      <span>{row.attempts}</span>
      <span>{row.migrations > 0 ? `×${row.migrations}` : ''}</span>
      <span title={new Date(row.started_at).toISOString()}>{fmtClock(row.started_at)}</span>
      <span>{fmtMs(row.duration_ms)}</span>
      <span />
      <span />
      <span>{row.completion_tokens}</span>
      <span>{row.max_new_tokens ?? '—'}</span>
      <span className={row.outcome === 'failed' ? 'health-dead' : ''}>{row.outcome}</span>
      <span title={row.error ?? ''}>{row.admitted ? '' : `not migratable: ${row.admission_reason ?? ''} `}{row.error ?? ''}</span>
    </>
  );
}

export function TracesView() {
  const store = useStoreApi();
  const host = useHost();
  const version = useDash((s) => s.version);
  const { traces, workers } = store.getState().model;
  const [filter, setFilter] = useState<TraceFilter>({});
  const [progress, setProgress] = useState<string | null>(null);
  const scrollRef = useRef<HTMLDivElement>(null);

  // Newest first; recomputed once per batch (`version`).
  const rows = useMemo(() => {
    const all = traces.all();
    const out: TraceRow[] = [];
    for (let i = all.length - 1; i >= 0; i--) if (rowMatches(all[i]!, filter)) out.push(all[i]!);
    return out;
  }, [traces, filter, version]);

  const virtualizer = useVirtualizer({ count: rows.length, getScrollElement: () => scrollRef.current, estimateSize: () => ROW_HEIGHT, overscan: 20 });
  const set = (patch: Partial<TraceFilter>) => setFilter((f) => {
    const next = { ...f, ...patch };
    for (const k of Object.keys(next) as (keyof TraceFilter)[]) if (next[k] === '' || next[k] === undefined) delete next[k];
    return next;
  });

  const exportRows = async (format: ExportFormat) => {
    setProgress(`exporting ${format.toUpperCase()}…`);
    try {
      const result = await host.exportTraces(format, filter, (bytes) => setProgress(`exporting ${format.toUpperCase()}: ${fmtBytes(bytes)}`));
      setProgress(result.saved ? `saved ${result.saved} (${fmtBytes(result.bytes)})` : 'export cancelled');
    } catch (err) {
      setProgress(null);
      showError(err);
    }
  };

  return (
    <div className="main">
      <div className="toolbar">
        <select data-testid="trace-filter-kind" value={filter.kind ?? ''} onChange={(e) => set({ kind: (e.target.value || undefined) as TraceFilter['kind'] })} aria-label="kind">
          <option value="">attempts and requests</option>
          <option value="attempt">attempt rows</option>
          <option value="request">request rows</option>
        </select>
        <input data-testid="trace-filter-request" placeholder="request id (exact)" value={filter.request ?? ''} onChange={(e) => set({ request: e.target.value.trim() })} style={{ width: 200 }} />
        <select data-testid="trace-filter-worker" value={filter.worker ?? ''} onChange={(e) => set({ worker: e.target.value })} aria-label="worker">
          <option value="">any worker</option>
          {workers.list().map((w) => <option key={w.id} value={w.url}>{w.id} · {w.url}</option>)}
        </select>
        <select data-testid="trace-filter-outcome" value={filter.outcome ?? ''} onChange={(e) => set({ outcome: e.target.value })} aria-label="outcome">
          <option value="">any outcome</option>
          {OUTCOMES.map((o) => <option key={o} value={o}>{o}</option>)}
        </select>
        <button data-testid="export-jsonl" onClick={() => void exportRows('jsonl')}>Export JSONL</button>
        <button data-testid="export-csv" onClick={() => void exportRows('csv')}>Export CSV</button>
        {progress && <span data-testid="export-progress">{progress}</span>}
        <span className="count" data-testid="traces-count">{rows.length} rows</span>
      </div>
      <div className="scroll" ref={scrollRef} data-testid="trace-table">
        <div className="trace-inner">
        <div className="trace-row trace-head">
          <span>kind</span><span>request</span><span>att.</span><span>worker</span><span>started</span><span>duration</span><span>TTFT</span><span>replayed</span><span>tokens</span><span>budget</span><span>outcome</span><span>error</span>
        </div>
        {rows.length === 0 ? (
          <div className="empty"><strong>No trace rows.</strong>Rows appear when attempts and requests end; check the filters.</div>
        ) : (
          <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
            {virtualizer.getVirtualItems().map((item) => {
              const row = rows[item.index]!;
              return (
                <div
                  key={item.key}
                  className="trace-row"
                  style={{ top: item.start, height: ROW_HEIGHT }}
                  data-testid="trace-row"
                  data-request-id={row.request_id}
                  title="Open in Request view"
                  onClick={() => store.getState().select(row.request_id)}
                >
                  <Cells row={row} workers={workers} />
                </div>
              );
            })}
          </div>
        )}
        </div>
      </div>
    </div>
  );
}
