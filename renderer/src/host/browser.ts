// Browser mode's host: the page's own origin serves `/events` (SSE, envelopes of events),
// `/api/*` (the host's actions), `/traces` (exports) and `/requests/:id/output` (a finished request's tokens).
import type { BatonEvent, WorkerInfo } from '../../../router/events/types.ts';
import type { TraceRow } from '../../../router/trace/row.ts';
import type {
  ExportFilter, ExportFormat, ExportResult, LiveState, RequestBody, RequestOutput, SimAction, SimWorkerState, Snapshot, TrafficSettings,
  TrafficStatus, TraceFileContext,
} from '../../../host/contract.ts';
import { CatchUp } from './catch-up.ts';
import { contextRecord, csvHeaderColumns, traceQuery, exportFileName } from '../../../host/export-query.ts';
import type { DashboardHost, FeedHandlers, UiConfig } from './types.ts';

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    // Mutations always carry JSON: the host refuses anything else (CSRF guard).
    headers: method === 'GET' ? {} : { 'content-type': 'application/json' },
    ...(method === 'GET' || method === 'DELETE' ? {} : { body: JSON.stringify(body ?? {}) }),
  });
  const text = await res.text();
  const data = text ? (JSON.parse(text) as unknown) : null;
  if (!res.ok) {
    const message = (data as { error?: { message?: string } } | null)?.error?.message ?? `${res.status} ${res.statusText}`;
    throw new Error(message);
  }
  return data as T;
}

export class BrowserHost implements DashboardHost {
  readonly kind = 'browser' as const;
  private source: EventSource | null = null;
  private handlers: FeedHandlers | null = null;
  private catchUp: CatchUp | null = null;

  connect(handlers: FeedHandlers): () => void {
    this.handlers = handlers;
    this.open();
    return () => this.close();
  }

  retry(): void {
    this.close();
    this.open();
  }

  private open(): void {
    const handlers = this.handlers;
    if (!handlers) return;
    handlers.onStatus({ status: 'connecting', message: null });
    const catchUp = new CatchUp(handlers);
    this.catchUp = catchUp;
    const source = new EventSource('/events');
    this.source = source;
    // Every (re)open gets a fresh snapshot: events sent while the connection was down are lost.
    source.onopen = () => void catchUp.begin(() => call<Snapshot>('GET', '/api/snapshot'));
    source.onmessage = (message: MessageEvent<string>) => {
      let data: BatonEvent[] | { events?: BatonEvent[]; reset?: string };
      try {
        data = JSON.parse(message.data) as typeof data;
      } catch {
        return; // a frame we cannot read; the next snapshot repairs what it carried
      }
      // An envelope (router/http/events-endpoint.ts); `reset`: what was missed is gone, start over.
      if (!Array.isArray(data) && data.reset !== undefined) return void catchUp.begin(() => call<Snapshot>('GET', '/api/snapshot'));
      catchUp.events(Array.isArray(data) ? data : (data.events ?? []));
    };
    source.onerror = () => {
      catchUp.cancel();
      const closed = source.readyState === EventSource.CLOSED;
      handlers.onStatus({
        status: 'lost',
        message: closed ? 'The host closed the event stream.' : 'Connection to the host lost; reconnecting…',
      });
    };
  }

  private close(): void {
    this.catchUp?.cancel();
    this.source?.close();
    this.source = null;
  }

  async live(): Promise<LiveState | null> {
    return call<LiveState>('GET', '/api/live');
  }

  async traceRows(id: string): Promise<TraceRow[]> {
    return (await call<{ rows: TraceRow[] }>('GET', `/api/requests/${encodeURIComponent(id)}/rows`)).rows;
  }

  /** The preferences the host keeps (GET /api/prefs): the same on every port. */
  async prefs(): Promise<Record<string, unknown> | null> {
    const res = await fetch('/api/prefs');
    return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
  }

  async savePrefs(prefs: Record<string, unknown>): Promise<void> {
    await call('PUT', '/api/prefs', prefs);
  }

  async uiConfig(): Promise<UiConfig | null> {
    const res = await fetch('/config/ui');
    return res.ok ? ((await res.json()) as UiConfig) : null;
  }

  async requestBody(id: string): Promise<RequestBody | null> {
    const res = await fetch(`/api/requests/${encodeURIComponent(id)}/body`);
    if (res.status === 404) return null;
    if (!res.ok) throw new Error(`body of ${id}: ${res.status} ${res.statusText}`);
    return (await res.json()) as RequestBody;
  }

  async simWorkers(): Promise<SimWorkerState[] | null> {
    return (await call<{ workers: SimWorkerState[] | null }>('GET', '/api/sim')).workers;
  }

  async simAction(index: number, action: SimAction): Promise<SimWorkerState[]> {
    return (await call<{ workers: SimWorkerState[] }>('POST', `/api/sim/${index}/${action}`)).workers;
  }

  addWorker = (url: string) => call<WorkerInfo>('POST', '/api/workers', { url });

  async removeWorker(id: string): Promise<void> {
    await call('DELETE', `/api/workers/${encodeURIComponent(id)}`);
  }

  async drainWorker(id: string, draining: boolean): Promise<void> {
    await call('POST', `/api/workers/${encodeURIComponent(id)}/drain`, { draining });
  }

  async traffic(): Promise<TrafficStatus | null> {
    try {
      return await call<TrafficStatus>('GET', '/api/traffic');
    } catch {
      return null;
    }
  }

  setTraffic = (patch: Partial<TrafficSettings>) => call<TrafficStatus>('PUT', '/api/traffic', patch);

  /** The router's own `/requests/:id/output`; a 404 means it no longer keeps this request's output. */
  async requestOutput(id: string): Promise<RequestOutput | null> {
    const res = await fetch(`/requests/${encodeURIComponent(id)}/output`);
    if (res.status === 404) return null;
    if (!res.ok) throw new Error(`output of ${id}: ${res.status} ${res.statusText}`);
    return (await res.json()) as RequestOutput;
  }

  /** Streams `/traces` with progress, then hands the file to the browser as a download. */
  async exportTraces(format: ExportFormat, filter: ExportFilter, onProgress: (bytes: number) => void, context?: TraceFileContext): Promise<ExportResult> {
    const res = await fetch(`/traces?${traceQuery(format, filter)}`);
    if (!res.ok || !res.body) throw new Error(`export failed: ${res.status} ${res.statusText}`);
    const reader = res.body.getReader();
    const parts: BlobPart[] = [];
    let bytes = 0;
    let header = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (parts.length === 0) header = new TextDecoder().decode(value.subarray(0, 8192));
      parts.push(value);
      bytes += value.byteLength;
      onProgress(bytes);
    }
    if (context) {
      const record = new TextEncoder().encode(contextRecord(context, format, csvHeaderColumns(header)));
      parts.push(record);
      bytes += record.byteLength;
    }
    return download(parts, format, bytes);
  }
}

/** Hands bytes to the browser as a download named like the router's exports. */
export function download(parts: BlobPart[], format: ExportFormat, bytes: number): ExportResult {
  const type = format === 'csv' ? 'text/csv' : 'application/x-ndjson';
  const url = URL.createObjectURL(new Blob(parts, { type }));
  const name = exportFileName(format, new Date());
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return { saved: name, bytes };
}
