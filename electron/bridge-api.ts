// The API the preload script exposes to the renderer as `window.api` (types only: the renderer
// imports this with `import type`). Each method is one allowlisted IPC channel (electron/policy.ts).
import type { BatonEvent, WorkerInfo } from '../router/events/types.ts';
import type {
  ExportFormat, ExportResult, RequestOutput, SimAction, SimWorkerState, Snapshot, TraceFilter, TrafficSettings, TrafficStatus,
} from '../host/contract.ts';

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
  exportTraces(format: ExportFormat, filter: TraceFilter): Promise<ExportResult>;
  /** A finished request's output token ids from the router's memory; null once it is no longer kept. */
  requestOutput(id: string): Promise<RequestOutput | null>;
}
