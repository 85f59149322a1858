// The one host interface the renderer talks to; Electron IPC and HTTP + SSE implement it.
import type { BatonEvent, WorkerInfo } from '../../../router/events/types.ts';
import type {
  ExportFormat, ExportResult, RequestOutput, SimAction, SimWorkerState, Snapshot, TraceFilter, TrafficSettings, TrafficStatus,
} from '../../../host/contract.ts';
import type { ConnectionState } from '../store/store.ts';

export interface FeedHandlers {
  /** A snapshot to catch up from: on first connect and after every reconnect. */
  onSnapshot(snapshot: Snapshot): void;
  /** Live events, after the snapshot they follow. */
  onEvents(events: BatonEvent[]): void;
  onStatus(state: ConnectionState): void;
}

export interface DashboardHost {
  readonly kind: 'electron' | 'browser';
  /** Starts the feed; returns a function that stops it. */
  connect(handlers: FeedHandlers): () => void;
  /** Drops the feed and connects again (the banner's Retry). */
  retry(): void;
  simWorkers(): Promise<SimWorkerState[] | null>;
  simAction(index: number, action: SimAction): Promise<SimWorkerState[]>;
  addWorker(url: string): Promise<WorkerInfo>;
  removeWorker(id: string): Promise<void>;
  drainWorker(id: string, draining: boolean): Promise<void>;
  traffic(): Promise<TrafficStatus | null>;
  setTraffic(patch: Partial<TrafficSettings>): Promise<TrafficStatus>;
  exportTraces(format: ExportFormat, filter: TraceFilter, onProgress: (bytes: number) => void): Promise<ExportResult>;
  /** A finished request's output token ids; null when the router no longer keeps them (it keeps the last 512). */
  requestOutput(id: string): Promise<RequestOutput | null>;
}
