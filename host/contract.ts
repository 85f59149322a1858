// What the dashboard host offers the renderer, whichever way it travels (Electron IPC or HTTP).
// Types only: the renderer imports this module with `import type`, so it must hold no run-time code.
import type { BatonEvent, RouterStats, WorkerInfo } from '../router/events/types.ts';
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

/**
 * Something that happened to a worker, drawn as a marker across the waterfall and the charts:
 * an action taken through the dashboard (kill, hang, drain, ...), or a worker the router reported
 * going down. Kept by the host, so every page (and a page that opens late) sees the same ones.
 */
export type FaultKind = SimAction | 'drain' | 'undrain' | 'add' | 'remove' | 'down';

export interface FaultMark {
  /** Epoch ms. */
  t: number;
  kind: FaultKind;
  /** The worker's id (w0, ...) and URL, when known. */
  worker: string | null;
  url: string | null;
  /** `dashboard`: an action through the host; `router`: a health change the router reported, or a worker its discovery drained or removed. */
  source: 'dashboard' | 'router';
  /**
   * For `down`: the health the router reported first (benched at its first blame, dead,
   * unhealthy, circuit_open); for a `drain` or `remove` the router made
   * (source `router`: discovery), why the worker went, read from its pod's status (`OOMKilled (exit
   * code 137)`, `Evicted: ...`, `pod deleted (grace 30s)`).
   */
  detail: string | null;
  /**
   * For `down`: what the router read when it blamed the worker, from the failed attempt's row
   * (`<error_kind>: <error_evidence>`), attached as soon as that row is written; null until then.
   */
  evidence?: string | null;
  /** For `down`: the health the router reported later (its health check's verdict: dead, unhealthy), and when. */
  verdict?: string | null;
  verdictAt?: number | null;
  /** For `down`: when the router next reported the worker healthy (epoch ms); null: not yet. */
  recoveredAt?: number | null;
  /** A discovered worker's pod and node (router/discovery/k8s-pods.ts), so the operator need not open k9s. */
  pod?: string | null;
  node?: string | null;
}

/** The error of the host's last probe of a worker's /health, for a worker the router says is not healthy. */
export interface ProbeNote {
  worker: string;
  url: string;
  at: number;
  error: string;
}

/** What a page polls a few times a second: figures from the router itself, and the host's own state. */
export interface LiveState {
  t: number;
  /** The router's identity, totals since it started and workers (in flight, circuit, health); null when unavailable. */
  router: RouterStats | null;
  faults: FaultMark[];
  sim: SimWorkerState[] | null;
  probes: ProbeNote[];
}

/** Enough state for a page that opens late to draw the same picture as one that watched from the start. */
export interface Snapshot {
  routerUrl: string;
  t: number;
  workers: WorkerInfo[];
  /**
   * Trace rows, oldest first: finished requests and ended attempts. The most recent ones, and
   * before them the rows of older requests that migrated or failed still in the router's ring.
   */
  rows: TraceRow[];
  /** The events so far of requests still in flight, in order (progress coalesced to the latest). */
  inflight: BatonEvent[];
  sim: SimWorkerState[] | null;
  traffic: TrafficStatus | null;
  /** The router's identity and totals (absent from hosts that predate it). */
  router?: RouterStats | null;
  faults?: FaultMark[];
}

/** A request body the host sent (its traffic generator), for "copy as curl". */
export interface RequestBody {
  request_id: string;
  body: unknown;
}

export type ExportFormat = 'jsonl' | 'csv';

/**
 * An export's filter: the router's (request, worker, outcome, kind, since) plus `until` (rows that
 * ended at or before, epoch ms) and `requestPrefix` (request ids starting with it).
 */
export interface ExportFilter extends TraceFilter {
  until?: number;
  requestPrefix?: string;
}

export interface ExportResult {
  /** Where it went: a file path (Electron) or a file name (browser download); null when cancelled. */
  saved: string | null;
  bytes: number;
}

/** The host's actions, shared by the HTTP API (browser mode) and the IPC handlers (Electron). */
export interface HostActions {
  snapshot(): Snapshot | Promise<Snapshot>;
  // The three below are optional so that stand-ins written before them still type-check; the
  // real host (actions.ts) has them all.
  /** Polled by pages: the router's figures and the host's faults, sim state and probe errors. */
  live?(): Promise<LiveState>;
  /** Trace rows the router still holds for one request (exact id), oldest first. */
  traceRows?(requestId: string): TraceRow[];
  /** The body of a request the host's traffic generator sent, or null. */
  requestBody?(requestId: string): RequestBody | null;
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
