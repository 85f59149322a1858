// Traces: the trace-row table (virtualized, newest first) with filters (kind, request id
// prefix, worker, outcome, behind the hub the router, a time range, since the last fault), a count, and Export JSONL / CSV
// through the host with the same filters (a download in the browser, a save dialog in Electron;
// the rows carry ISO times next to the epoch ms). Errors wrap in full: beside the row where the
// table is wide, on a line of their own below it where it is not. j / k move, Enter opens.
import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import type { TraceRow } from '../../../router/trace/row.ts';
import type { ExportFilter, ExportFormat, HubState } from '../../../host/contract.ts';
import type { TraceViewFilter } from '../store/store.ts';
import type { WorkerTable } from '../store/workers.ts';
import { idMatches } from '../store/filters.ts';
import { splitHubId } from '../store/hub-labels.ts';
import { exportContext } from '../store/export-context.ts';
import { lastFault, faultLabel } from '../store/faults.ts';
import { useDash, useHost, useStoreApi } from './context.ts';
import { fmtBytes, fmtClock, fmtIso, fmtMs } from './format.ts';
import { hoverCard, type CardContent } from './HoverCard.tsx';
import { showError } from './toast.tsx';

const OUTCOMES = ['finished', 'failed', 'cancelled', 'budget_exhausted', 'drained'];

/** A row's key, made once per row (the table asks for all of them whenever its rows change). */
const keyCache = new WeakMap<TraceRow, string>();
function rowKey(r: TraceRow): string {
  let k = keyCache.get(r);
  if (k === undefined) keyCache.set(r, (k = r.kind === 'attempt' ? `${r.request_id}#${r.attempt}` : r.request_id));
  return k;
}

/**
 * `labelled`: behind the hub, whose ids read `<label>/<id>`, where the table shows the client's
 * id: the id prefix matches that id too, as in the Requests list and the hub's /traces.
 */
export function rowMatches(row: TraceRow, f: TraceViewFilter, labelled = false): boolean {
  if (f.kind && row.kind !== f.kind) return false;
  if (f.router && !row.request_id.startsWith(`${f.router}/`)) return false;
  if (f.request && !idMatches(row.request_id, f.request)) {
    const cut = labelled ? row.request_id.indexOf('/') : -1;
    if (cut < 0 || !idMatches(row.request_id.slice(cut + 1), f.request)) return false;
  }
  if (f.outcome && row.outcome !== f.outcome) return false;
  if (f.worker && (row.kind !== 'attempt' || row.worker !== f.worker)) return false;
  if (f.since !== undefined && row.ended_at < f.since) return false;
  if (f.until !== undefined && row.ended_at > f.until) return false;
  return true;
}

/** A time typed by the user: epoch ms, an ISO time, or a clock time (HH:MM[:SS[.mmm]]) on the day of `ref`. */
export function parseTimeInput(text: string, ref: number): number | null {
  const s = text.trim();
  if (s === '') return null;
  if (/^\d{11,}$/.test(s)) return Number(s);
  const clock = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(s);
  if (clock) {
    const d = new Date(ref);
    d.setHours(Number(clock[1]), Number(clock[2]), Number(clock[3] ?? 0), Number((clock[4] ?? '0').padEnd(3, '0')));
    return d.getTime();
  }
  const t = Date.parse(s);
  return Number.isFinite(t) ? t : null;
}

function errorText(row: TraceRow): string | null {
  if (row.kind === 'attempt') return row.error || row.error_kind ? [row.error_kind, row.error].filter(Boolean).join(': ') : null;
  const parts = [row.admitted ? null : `not migratable: ${row.admission_reason ?? 'refused'}`, row.error].filter(Boolean);
  return parts.length > 0 ? parts.join(' · ') : null;
}

function rowCard(row: TraceRow, workers: WorkerTable): CardContent {
  const lines: [string, string][] = [
    ['request', row.request_id],
    ['started', `${fmtClock(row.started_at)} · ${fmtIso(row.started_at)} · ${row.started_at}`],
    ['ended', `${fmtClock(row.ended_at)} · ${fmtIso(row.ended_at)} · ${row.ended_at}`],
    ['outcome', row.outcome],
  ];
  const extra = row as { format?: string; trace_id?: string | null };
  if (extra.format) lines.push(['format', extra.format]);
  if (extra.trace_id) lines.push(['trace id', extra.trace_id]);
  if (row.kind === 'attempt') {
    lines.push(['worker', `${workers.label(row.worker)} · ${row.worker}`], ['upstream rid', row.rid]);
    if (row.error_kind) lines.push(['error kind', row.error_kind]);
    if (row.error_evidence) lines.push(['evidence', row.error_evidence]);
  }
  return { title: row.kind === 'attempt' ? `attempt ${row.attempt}` : 'request row', lines, note: row.error };
}

/**
 * What the export asks for: the hub names rows `<label>/<id>`, and its /traces (as a file's
 * export) matches a prefix past a whole label, so a router filter is the prefix `<label>/` (with
 * the typed id after it).
 */
export function exportFilter(filter: TraceViewFilter): ExportFilter {
  const { request, router, ...rest } = filter;
  const prefix = router ? `${router}/${request ?? ''}` : request;
  return { ...rest, ...(prefix ? { requestPrefix: prefix } : {}) };
}

function Cells({ row, workers, hub }: { row: TraceRow; workers: WorkerTable; hub: HubState | null }) {
  // Behind the hub the router is a column of its own and the id cell shows the client's id.
  const split = hub ? splitHubId(row.request_id, hub) : null;
  const reqCell = (
    <>
      {split && <span className="c-router mono" data-testid="trace-router" title={split.router ? `router ${split.router}` : undefined}>{split.router ?? ''}</span>}
      <span className="c-req mono" data-testid="trace-id">{split ? split.clientId : row.request_id}</span>
    </>
  );
  const error = errorText(row);
  const evidence = row.kind === 'attempt' ? row.error_evidence : null;
  const errorCell = (
    <span className="c-err trace-error" data-testid="trace-error">
      {error && <span className="error-text">{error}</span>}
      {evidence && <span className="error-evidence">read from: {evidence}</span>}
    </span>
  );
  const started = <span className="c-start" {...hoverCard(() => rowCard(row, workers))}>{fmtClock(row.started_at)}</span>;
  const outcome = <span className={`c-out${row.outcome === 'failed' ? ' health-dead' : ''}`}>{row.outcome}</span>;
  if (row.kind === 'attempt') {
    return (
      <>
        <span className="c-kind">attempt</span>
        {reqCell}
        <span className="c-att">{row.attempt}</span>
        <span className="c-worker" title={row.worker}><span className="swatch" style={{ background: workers.colorOf(row.worker) }} />{workers.label(row.worker)}</span>
        {started}
        <span className="c-dur">{fmtMs(row.ended_at - row.started_at)}</span>
        <span className="c-ttft">{fmtMs(row.ttft_ms)}</span>
        <span className="c-rep">{row.replayed_tokens}</span>
        <span className="c-tok">{row.tokens}</span>
        <span className="c-budget">{row.budget_before ?? '—'} → {row.budget_after ?? '—'}</span>
        {outcome}
        {errorCell}
      </>
    );
  }
  return (
    <>
      <span className="c-kind"><b>request</b></span>
      {reqCell}
      <span className="c-att">{row.attempts}</span>
      <span className="c-worker">{row.migrations > 0 ? `migrated ×${row.migrations}` : ''}</span>
      {started}
      <span className="c-dur">{fmtMs(row.duration_ms)}</span>
      <span className="c-ttft" />
      <span className="c-rep" />
      <span className="c-tok">{row.completion_tokens}</span>
      <span className="c-budget">{row.max_new_tokens ?? '—'}</span>
      {outcome}
      {errorCell}
    </>
  );
}

/** One row of the table, memoised: scrolling mounts new rows and leaves the others alone. */
const TraceRowItem = memo(function TraceRowItem({ row, index, start, cursor, workers, hub, measure, onOpen }: {
  row: TraceRow; index: number; start: number; cursor: boolean; workers: WorkerTable; hub: HubState | null; measure(el: HTMLElement | null): void; onOpen(index: number, id: string): void;
}) {
  return (
    <div
      ref={measure}
      data-index={index}
      className={`trace-row${hub ? ' with-router' : ''}${cursor ? ' cursor' : ''}`}
      style={{ transform: `translateY(${start}px)` }}
      data-testid="trace-row"
      data-request-id={row.request_id}
      data-kind={row.kind}
      onClick={() => onOpen(index, row.request_id)}
    >
      <Cells row={row} workers={workers} hub={hub} />
    </div>
  );
});

/**
 * The since/until inputs' placeholder and width: the width is counted in characters (ch) from
 * the placeholder itself, so the placeholder is never cut; the other forms (ISO, epoch ms) are in
 * the input's tooltip.
 */
export function timeInputLook(label: string): { placeholder: string; widthCh: number } {
  const placeholder = `${label} HH:MM:SS`;
  // +3: the input's padding and border, and the proportional font's wider letters than 0.
  return { placeholder, widthCh: placeholder.length + 3 };
}

function TimeInput({ label, value, onChange, refTime, testId }: { label: string; value: number | undefined; onChange(v: number | undefined): void; refTime: number; testId: string }) {
  const [text, setText] = useState(value === undefined ? '' : fmtClock(value));
  const [bad, setBad] = useState(false);
  useEffect(() => setText(value === undefined ? '' : fmtClock(value)), [value]);
  const commit = () => {
    if (text.trim() === '') {
      setBad(false);
      return onChange(undefined);
    }
    const t = parseTimeInput(text, refTime);
    setBad(t === null);
    if (t !== null) onChange(t);
  };
  const look = timeInputLook(label);
  return (
    <input
      className={bad ? 'bad' : ''}
      data-testid={testId}
      aria-label={label}
      placeholder={look.placeholder}
      title={value !== undefined ? `${fmtIso(value)} · ${value}` : `${label}: a clock time (HH:MM:SS), an ISO time or epoch ms`}
      value={text}
      onChange={(e) => setText(e.target.value)}
      onBlur={commit}
      onKeyDown={(e) => { if (e.key === 'Enter') commit(); if (e.key === 'Escape') (e.target as HTMLInputElement).blur(); }}
      style={{ width: `${look.widthCh}ch` }}
    />
  );
}

export function TracesView() {
  const store = useStoreApi();
  const host = useHost();
  // New rows show up to four times a second: a table of rows needs no more, and scrolling it
  // while events stream stays smooth. (A file's rows come once.)
  const version = useDash((s) => (s.mode === 'file' ? s.version : Math.floor(s.now / 250)));
  const filter = useDash((s) => s.traceFilter);
  const faults = useDash((s) => s.faults);
  const mode = useDash((s) => s.mode);
  const hub = useDash((s) => s.hub);
  const now = useDash((s) => s.now);
  const enabled = useDash((s) => s.connection.status === 'live' || s.mode === 'file');
  const { traces, workers } = store.getState().model;
  const [progress, setProgress] = useState<string | null>(null);
  const [cursor, setCursor] = useState<number>(-1);
  const scrollRef = useRef<HTMLDivElement>(null);
  const fault = lastFault(faults);

  // Newest first; recomputed when rows may have come (`version`).
  const rows = useMemo(() => {
    const all = traces.all();
    const out: TraceRow[] = [];
    const labelled = hub !== null;
    for (let i = all.length - 1; i >= 0; i--) if (rowMatches(all[i]!, filter, labelled)) out.push(all[i]!);
    return out;
  }, [traces, filter, version, hub]);

  // Rows with an error take a second line: known up front, so the list's first guess is close
  // and the measuring of rows as they appear moves little (cheap: a flag per row).
  // Keys too: the list asks for every row's key whenever a row's measured height lands.
  const { hasError, keys } = useMemo(() => {
    const flags = new Uint8Array(rows.length);
    const ks = new Array<string>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]!;
      flags[i] = r.error || (r.kind === 'attempt' ? r.error_kind : !r.admitted) ? 1 : 0;
      ks[i] = rowKey(r);
    }
    return { hasError: flags, keys: ks };
  }, [rows]);
  // Stable while the rows are: the list recomputes every position when this function changes.
  const getItemKey = useCallback((i: number) => keys[i] ?? i, [keys]);
  const estimateSize = useCallback((i: number) => (hasError[i] ? 46 : 27), [hasError]);
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize,
    overscan: 20,
    getItemKey,
  });
  const set = (patch: Partial<TraceViewFilter>) => {
    const next: TraceViewFilter = { ...filter, ...patch };
    for (const k of Object.keys(next) as (keyof TraceViewFilter)[]) if (next[k] === '' || next[k] === undefined) delete next[k];
    store.getState().setTraceFilter(next);
  };

  // Keyboard: j / k move the row cursor, Enter opens its request.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.target instanceof HTMLTextAreaElement || e.metaKey || e.ctrlKey || e.altKey) return;
      if (e.key === 'j' || e.key === 'k') {
        const next = e.key === 'j' ? Math.min(rows.length - 1, cursor + 1) : Math.max(0, cursor - 1);
        setCursor(next);
        virtualizer.scrollToIndex(next, { align: 'auto' });
        e.preventDefault();
      } else if (e.key === 'Enter' && rows[cursor]) {
        store.getState().select(rows[cursor]!.request_id);
        e.preventDefault();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [rows, cursor, store, virtualizer]);

  const exportRows = async (format: ExportFormat) => {
    setProgress(`exporting ${format.toUpperCase()}…`);
    try {
      const query = exportFilter(filter);
      const result = await host.exportTraces(format, query, (bytes) => setProgress(`exporting ${format.toUpperCase()}: ${fmtBytes(bytes)}`), exportContext(store.getState(), Date.now(), query));
      setProgress(result.saved ? `saved ${result.saved} (${fmtBytes(result.bytes)})` : 'export cancelled');
    } catch (err) {
      setProgress(null);
      showError(err);
    }
  };
  const refTime = mode === 'file' ? now : Date.now();
  const openRow = useMemo(() => (index: number, id: string) => {
    setCursor(index);
    store.getState().select(id);
  }, [store]);

  return (
    <div className="main traces">
      <div className="toolbar">
        <select data-testid="trace-filter-kind" value={filter.kind ?? ''} onChange={(e) => set({ kind: (e.target.value || undefined) as TraceViewFilter['kind'] })} aria-label="kind">
          <option value="">attempts and requests</option>
          <option value="attempt">attempt rows</option>
          <option value="request">request rows</option>
        </select>
        <input id="trace-search" data-testid="trace-filter-request" type="search" placeholder="request id prefix  ( / )" value={filter.request ?? ''} onChange={(e) => set({ request: e.target.value.trim() })} style={{ width: 180 }} />
        <select data-testid="trace-filter-worker" value={filter.worker ?? ''} onChange={(e) => set({ worker: e.target.value })} aria-label="worker">
          <option value="">any worker</option>
          {workers.list().map((w) => <option key={w.id} value={w.url}>{w.id} · {w.url}</option>)}
        </select>
        <select data-testid="trace-filter-outcome" value={filter.outcome ?? ''} onChange={(e) => set({ outcome: e.target.value })} aria-label="outcome">
          <option value="">any outcome</option>
          {OUTCOMES.map((o) => <option key={o} value={o}>{o}</option>)}
        </select>
        {hub && (
          <select data-testid="trace-filter-router" value={filter.router ?? ''} onChange={(e) => set({ router: e.target.value })} aria-label="router" title="The router that owns the row (the hub's label; the request column shows the client's id)">
            <option value="">any router</option>
            {hub.routers.map((r) => (
              <option key={r.label} value={r.label}>{r.label} · {r.url.replace(/^https?:\/\//, '')}{r.state === 'lost' ? ' (lost)' : ''}</option>
            ))}
          </select>
        )}
        <span className="range">
          ended
          <TimeInput label="from" value={filter.since} onChange={(v) => set({ since: v })} refTime={refTime} testId="trace-filter-since" />
          –
          <TimeInput label="to" value={filter.until} onChange={(v) => set({ until: v })} refTime={refTime} testId="trace-filter-until" />
          <button data-testid="trace-since-fault" disabled={!fault} title={fault ? `from ${faultLabel(fault)} at ${fmtClock(fault.t)}` : 'No fault yet'} onClick={() => fault && set({ since: fault.t, until: undefined })}>since last fault</button>
          <button onClick={() => set({ since: refTime - 60_000, until: undefined })}>last 1 min</button>
          <button onClick={() => set({ since: refTime - 300_000, until: undefined })}>last 5 min</button>
          {(filter.since !== undefined || filter.until !== undefined) && <button onClick={() => set({ since: undefined, until: undefined })}>any time</button>}
        </span>
        <button data-testid="export-jsonl" disabled={!enabled} onClick={() => void exportRows('jsonl')} title="The same filters; the rows carry ISO times next to the epoch ms">Export JSONL</button>
        <button data-testid="export-csv" disabled={!enabled} onClick={() => void exportRows('csv')}>Export CSV</button>
        {progress && <span data-testid="export-progress">{progress}</span>}
        <span className="count" data-testid="traces-count" title={mode === 'file' ? 'rows of the file' : 'rows this page holds; an export reads the router\'s own rows with the same filters'}>
          {rows.length.toLocaleString()} rows{mode === 'file' ? '' : ' held here'}
        </span>
      </div>
      <div className="scroll" ref={scrollRef} data-testid="trace-table">
        <div className={`trace-row trace-head${hub ? ' with-router' : ''}`}>
          <span className="c-kind">kind</span>{hub && <span className="c-router" data-testid="trace-router-head">router</span>}<span className="c-req">request</span><span className="c-att">att.</span><span className="c-worker">worker</span><span className="c-start">started</span><span className="c-dur">duration</span><span className="c-ttft">TTFT</span><span className="c-rep">replayed</span><span className="c-tok">tokens</span><span className="c-budget">budget</span><span className="c-out">outcome</span><span className="c-err">error</span>
        </div>
        {rows.length === 0 ? (
          <div className="empty"><strong>No trace rows match.</strong>Rows appear when attempts and requests end; check the filters.</div>
        ) : (
          <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
            {virtualizer.getVirtualItems().map((item) => (
              <TraceRowItem
                key={item.key}
                row={rows[item.index]!}
                index={item.index}
                start={item.start}
                cursor={item.index === cursor}
                workers={workers}
                hub={hub}
                measure={virtualizer.measureElement}
                onOpen={openRow}
              />
            ))}
          </div>
        )}
      </div>
    </div>
  );
}
