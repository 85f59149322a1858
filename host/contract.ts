// What the dashboard host offers the renderer, whichever way it travels (Electron IPC or HTTP).
// Types only: the renderer imports this module with `import type`, so it must hold no run-time code.
import type { BatonEvent, WorkerInfo } from '../router/events/types.ts';
import type { TraceRow } from '../router/trace/row.ts';
import type { TraceFilter } from '../router/api.ts';
import type { RequestOutput } from '../router/trace/outputs.ts';

/** Fault controls of a simulated worker; `clear` ends a hang/reject/slow, `restart` revives a killed one. */
export type SimAction = 'kill' | 'hang' | 'reset' | 'reject' | 'slow' | 'clear' | 'restart';

export interface SimWorkerState {
  index: number;
  url: string;
  port: number;
  pid: number | null;
  alive: boolean;
  /** The fault last injected through the dashboard, null when cleared or restarted. */
  fault: Exclude<SimAction, 'clear' | 'restart'> | null;
}

/** The embedded traffic generator's knobs; every field is adjustable while it runs. */
export interface TrafficSettings {
  rate: number;               // requests started per second
  concurrency: number;        // at most this many requests in flight
  promptMin: number;          // prompt length in tokens, uniform in [min, max]
  promptMax: number;
  budgetMin: number;          // max_new_tokens, uniform in [min, max]
  budgetMax: number;
  streamShare: number;        // 0..1, share of streaming requests (the rest are unary)
  nonMigratableShare: number; // 0..1, share sent with stateful sampling (refused by admission)
  running: boolean;
}

export interface TrafficStatus {
  settings: TrafficSettings;
  inFlight: number;
  sent: number;
  ok: number;
  failed: number;
}

/** Enough state for a page that opens late to draw the same picture as one that watched from the start. */
export interface Snapshot {
  routerUrl: string;
  t: number;
  workers: WorkerInfo[];
  /** Recent trace rows, oldest first: finished requests and ended attempts. */
  rows: TraceRow[];
  /** The events so far of requests still in flight, in order (progress coalesced to the latest). */
  inflight: BatonEvent[];
  sim: SimWorkerState[] | null;
  traffic: TrafficStatus | null;
}

export type ExportFormat = 'jsonl' | 'csv';

export interface ExportResult {
  /** Where it went: a file path (Electron) or a file name (browser download); null when cancelled. */
  saved: string | null;
  bytes: number;
}

/** The host's actions, shared by the HTTP API (browser mode) and the IPC handlers (Electron). */
export interface HostActions {
  snapshot(): Snapshot;
  simWorkers(): SimWorkerState[] | null;
  simAction(index: number, action: SimAction): Promise<SimWorkerState[]>;
  addWorker(url: string): Promise<WorkerInfo>;
  removeWorker(id: string): boolean;
  drainWorker(id: string, draining: boolean): boolean;
  traffic(): TrafficStatus | null;
  setTraffic(patch: Partial<TrafficSettings>): TrafficStatus;
}

export type { TraceFilter };
/** A recent finished request's output token ids and where each attempt's tokens start (GET /requests/:id/output). */
export type { RequestOutput };
