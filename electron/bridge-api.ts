// The API the preload script exposes to the renderer as `window.api` (types only: the renderer
// imports this with `import type`). Each method is one allowlisted IPC channel (electron/policy.ts).
import type { BatonEvent, WorkerInfo } from '../router/events/types.ts';
import type {
  ExportFilter, ExportFormat, ExportResult, LiveState, RequestBody, RequestOutput, SimAction, SimWorkerState, Snapshot, TrafficSettings,
  TrafficStatus, TraceFileContext,
} from '../host/contract.ts';
import type { TraceRow } from '../router/trace/row.ts';

export interface BatonBridge {
  /** Event batches from the main process, a few per second; returns unsubscribe. */
  onEvents(listener: (events: BatonEvent[]) => void): () => void;
  /** The main process dropped a backlog of events: re-read the snapshot. Returns unsubscribe. */
  onResync(listener: () => void): () => void;
  snapshot(): Promise<Snapshot>;
  simWorkers(): Promise<SimWorkerState[] | null>;
  simAction(index: number, action: SimAction): Promise<SimWorkerState[]>;
  addWorker(url: string): Promise<WorkerInfo>;
  removeWorker(id: string): Promise<boolean>;
  drainWorker(id: string, draining: boolean): Promise<boolean>;
  traffic(): Promise<TrafficStatus | null>;
  setTraffic(patch: Partial<TrafficSettings>): Promise<TrafficStatus>;
  /** Opens a save dialog in the main process and writes the rows there. */
  exportTraces(format: ExportFormat, filter: ExportFilter, context?: TraceFileContext): Promise<ExportResult>;
  /** A finished request's output token ids from the router's memory; null once it is no longer kept. */
  requestOutput(id: string): Promise<RequestOutput | null>;
  /** The router's figures (totals, workers) and the host's faults, sim state and probe errors: polled. */
  live(): Promise<LiveState>;
  /** The trace rows the router still holds for one request. */
  traceRows(id: string): Promise<TraceRow[]>;
  /** The body of a request the traffic generator sent, or null. */
  requestBody(id: string): Promise<RequestBody | null>;
  /** The router's GET /config/ui (where trace ids link to), or null. */
  uiConfig(): Promise<{ trace_url_template: string | null; tracing: boolean } | null>;
}
