// A trace file as the dashboard's host: the same views over rows read from a file (`baton view
// FILE`, or a file dropped on the page), with no router behind them. Nothing is live: there are
// no events after the snapshot, no actions, no outputs; exports write the file's rows again.
import type { TraceRow } from '../../../router/trace/row.ts';
import type { WorkerInfo } from '../../../router/events/types.ts';
import type { ExportFilter, ExportFormat, ExportResult, Snapshot, TraceFileContext } from '../../../host/contract.ts';
import type { FileInfo } from '../store/store.ts';
import { parseTraceFile, renderTraceFile } from '../store/trace-file.ts';
import { idMatches } from '../store/filters.ts';
import { WORKER_PALETTE } from '../store/colors.ts';
import { download } from './browser.ts';
import type { DashboardHost, FeedHandlers } from './types.ts';

const offline = () => Promise.reject(new Error('a trace file has no router: this action needs a live host'));

export class TraceFileError extends Error {}

/** Reads a file's text into a host, or throws TraceFileError saying why nothing could be read. */
export function fileHost(name: string, text: string): FileHost {
  const parsed = parseTraceFile(name, text);
  if (parsed.rows.length === 0) {
    throw new TraceFileError(`${name}: no trace rows${parsed.firstError ? ` (${parsed.firstError})` : ''}`);
  }
  let from = Infinity;
  let to = -Infinity;
  for (const r of parsed.rows) {
    if (r.started_at < from) from = r.started_at;
    if (r.ended_at > to) to = r.ended_at;
  }
  // Requests running at the export (the context's events) run to the file's end.
  for (const e of parsed.context?.inflight ?? []) if (e.t > to) to = e.t;
  return new FileHost({ name, rows: parsed.rows.length, skipped: parsed.skipped, from, to }, parsed.rows, parsed.context);
}

/**
 * The workers of a file as the router named them: from its context record (ids, formats, colours),
 * else one per worker URL in its rows, in order of first appearance, under its host:port, with
 * palette slots in that order so that they differ (a hash of the URL may give two the same).
 */
export function fileWorkers(rows: readonly TraceRow[], context: TraceFileContext | null): { workers: WorkerInfo[]; colors: Map<string, string> } {
  const colors = new Map<string, string>();
  const blank = (id: string, url: string): WorkerInfo => ({
    id, url, health: 'unknown', circuit: 'closed', format: null, token_only: null, incremental: null, model_path: null, weight_version: null,
    in_flight: 0, simulated: false, sim_index: null, draining: false,
  });
  if (context && context.workers.length > 0) {
    const workers = context.workers.map((w) => {
      if (w.color) colors.set(w.id, w.color);
      return { ...blank(w.id, w.url), format: w.format, model_path: w.model_path, ...(w.discovery ? { discovery: w.discovery } : {}) };
    });
    return { workers, colors };
  }
  const urls: string[] = [];
  const seen = new Set<string>();
  for (const r of rows) if (r.kind === 'attempt' && !seen.has(r.worker)) { seen.add(r.worker); urls.push(r.worker); }
  const workers = urls.map((url, i) => {
    let id = url;
    try { id = new URL(url).host || url; } catch { /* not a URL: its own name */ }
    colors.set(id, WORKER_PALETTE[i % WORKER_PALETTE.length]!);
    return blank(id, url);
  });
  return { workers, colors };
}

export function matchesExport(row: TraceRow, f: ExportFilter): boolean {
  if (f.kind && row.kind !== f.kind) return false;
  if (f.request && row.request_id !== f.request) return false;
  if (f.requestPrefix && !idMatches(row.request_id, f.requestPrefix)) return false;
  if (f.outcome && row.outcome !== f.outcome) return false;
  if (f.worker && (row.kind !== 'attempt' || row.worker !== f.worker)) return false;
  if (f.since !== undefined && row.ended_at < f.since) return false;
  if (f.until !== undefined && row.ended_at > f.until) return false;
  return true;
}

export class FileHost implements DashboardHost {
  readonly kind = 'file' as const;
  private readonly byRequest = new Map<string, TraceRow[]>();
  readonly workers: WorkerInfo[];
  /** Worker colours by id, as the file gives them (or as assigned to a file without them). */
  readonly colors: Map<string, string>;

  constructor(readonly file: FileInfo, private readonly rows: TraceRow[], readonly context: TraceFileContext | null = null) {
    ({ workers: this.workers, colors: this.colors } = fileWorkers(rows, context));
    for (const r of rows) {
      let mine = this.byRequest.get(r.request_id);
      if (!mine) this.byRequest.set(r.request_id, (mine = []));
      mine.push(r);
    }
  }

  snapshot(): Snapshot {
    return { routerUrl: '', t: this.file.to, workers: this.workers, rows: this.rows, inflight: this.context?.inflight ?? [], sim: null, traffic: null, router: null, faults: this.context?.faults ?? [] };
  }

  connect(handlers: FeedHandlers): () => void {
    handlers.onSnapshot(this.snapshot());
    return () => {};
  }

  retry(): void {}
  live = async () => null;
  traceRows = async (id: string) => this.byRequest.get(id) ?? [];
  requestBody = async () => null;
  requestOutput = async () => null;
  uiConfig = async () => null;
  simWorkers = async () => null;
  simAction = offline;
  addWorker = offline;
  removeWorker = offline;
  drainWorker = offline;
  traffic = async () => null;
  setTraffic = offline;

  /** The file's rows again, with its own context record (or the page's, for a file without one). */
  async exportTraces(format: ExportFormat, filter: ExportFilter, onProgress: (bytes: number) => void, context?: TraceFileContext): Promise<ExportResult> {
    const ctx = this.context ?? context ?? null;
    const text = renderTraceFile(this.rows.filter((r) => matchesExport(r, filter)), format, ctx);
    const bytes = new TextEncoder().encode(text);
    onProgress(bytes.byteLength);
    return download([bytes], format, bytes.byteLength);
  }
}

/** `baton view` serves the file at /api/file; the page is opened as /?file=NAME. */
export function fileFromLocation(w: Window = window): string | null {
  return new URLSearchParams(w.location.search).get('file');
}

/** The preferences `baton view`'s server keeps (GET / PUT /api/prefs), as `baton serve` does. */
export const serverPrefs = {
  async prefs(): Promise<Record<string, unknown> | null> {
    const res = await fetch('/api/prefs');
    return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
  },
  async savePrefs(prefs: Record<string, unknown>): Promise<void> {
    await fetch('/api/prefs', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(prefs) });
  },
};

export async function fetchFileHost(name: string): Promise<FileHost> {
  const res = await fetch('/api/file');
  if (!res.ok) throw new TraceFileError(`could not load ${name}: ${res.status} ${res.statusText}`);
  return fileHost(name, await res.text());
}
