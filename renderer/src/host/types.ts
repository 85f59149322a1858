// The one host interface the renderer talks to; Electron IPC, HTTP + SSE, and a trace file opened
// offline implement it.
import type { BatonEvent, WorkerInfo } from '../../../router/events/types.ts';
import type { TraceRow } from '../../../router/trace/row.ts';
import type {
  ExportFilter, ExportFormat, ExportResult, LiveState, RequestBody, RequestOutput, SimAction, SimWorkerState, Snapshot, TrafficSettings,
  TrafficStatus, TraceFileContext,
} from '../../../host/contract.ts';
import type { ConnectionState, FileInfo } from '../store/store.ts';

export interface FeedHandlers {
  /** A snapshot to catch up from: on first connect and after every reconnect. */
  onSnapshot(snapshot: Snapshot): void;
  /** Live events, after the snapshot they follow. */
  onEvents(events: BatonEvent[]): void;
  onStatus(state: ConnectionState): void;
}

export interface DashboardHost {
  /** `file`: a trace file, no router: nothing is live and there are no actions. */
  readonly kind: 'electron' | 'browser' | 'file';
  /** For `file`: what was opened. */
  readonly file?: FileInfo;
  /** Starts the feed; returns a function that stops it. */
  connect(handlers: FeedHandlers): () => void;
  /** Drops the feed and connects again (the banner's Retry). */
  retry(): void;
  /** The router's figures and the host's faults, sim state, probe errors; null where the host offers none. */
  live(): Promise<LiveState | null>;
  /** The trace rows the router still holds for one request (exact id). */
  traceRows(id: string): Promise<TraceRow[]>;
  /** The body of a request, when the host knows it (its traffic generator sent it); else null. */
  requestBody(id: string): Promise<RequestBody | null>;
  simWorkers(): Promise<SimWorkerState[] | null>;
  simAction(index: number, action: SimAction): Promise<SimWorkerState[]>;
  addWorker(url: string): Promise<WorkerInfo>;
  removeWorker(id: string): Promise<void>;
  drainWorker(id: string, draining: boolean): Promise<void>;
  traffic(): Promise<TrafficStatus | null>;
  setTraffic(patch: Partial<TrafficSettings>): Promise<TrafficStatus>;
  /** Writes the rows, and after them `context` (workers, colours, fault markers) so that the file stands alone. */
  exportTraces(format: ExportFormat, filter: ExportFilter, onProgress: (bytes: number) => void, context?: TraceFileContext): Promise<ExportResult>;
  /** A finished request's output token ids; null when the router no longer keeps them. */
  requestOutput(id: string): Promise<RequestOutput | null>;
  /** The router's settings for the dashboard (GET /config/ui): where a trace id links to; null when it has none. */
  uiConfig(): Promise<UiConfig | null>;
  /** The dashboard's preferences as the host keeps them across ports (browser mode); absent: the page's localStorage only. */
  prefs?(): Promise<Record<string, unknown> | null>;
  savePrefs?(prefs: Record<string, unknown>): Promise<void>;
}

export interface UiConfig {
  /** A URL with `{trace_id}` in it (a Jaeger or Tempo page), or null. */
  trace_url_template: string | null;
  tracing: boolean;
}
