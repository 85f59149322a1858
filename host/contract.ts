// What the dashboard host offers the renderer, whichever way it travels (Electron IPC or HTTP).
// Types only: the renderer imports this module with `import type`, so it must hold no run-time code.
import type { BatonEvent, RouterStats, WorkerHealth, WorkerInfo } from '../router/events/types.ts';
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
  /**
   * How a dead worker's process ended, as the cluster saw it: the signal that killed it
   * (`SIGKILL` from Kill or an outside `kill -9`) or its exit code; null while it runs or unknown.
   */
  exit?: { code: number | null; signal: string | null } | null;
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
 * `router_lost` is the page's own, behind a dashboard hub: a router died with requests in flight
 * (`worker` is then the router's label, `url` its URL; renderer/src/store/router-lost.ts).
 */
export type FaultKind = SimAction | 'drain' | 'undrain' | 'add' | 'remove' | 'down' | 'router_lost';

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
  /** The routers behind a dashboard hub (host/hub/), and its workers across them; absent from a host of one embedded router. */
  hub?: HubState;
}

/**
 * A router as the hub sees it. `connected`: its event stream is open and heard within the last
 * second; `lagging`: open but silent (or its /stats slow) for over a second; `lost`: the stream
 * is closed and cannot be reopened, or silent for 1.5 s.
 */
export type RouterLinkState = 'connecting' | 'connected' | 'lagging' | 'lost';

export interface RouterLinkStatus {
  /** The hub's name for it (r0, r1, ...): request ids of this router read `<label>/<id>` in the hub. */
  label: string;
  url: string;
  state: RouterLinkState;
  /** RouterStats.instance of the router answering now; null before the first answer. */
  instance: string | null;
  /** When it is a replica of `baton router --replicas` (GET /replicas of its primary). */
  replica: { id: string; index: number; epoch: number } | null;
  /** Its event stream's epoch and the last sequence number received. */
  epoch: number | null;
  seq: number;
  /** Epoch ms the hub last heard from it (an event, a heartbeat or /stats). */
  last_seen: number | null;
  /** Its clock minus the hub's (ms), from RouterStats.t and the round trip of the fastest recent /stats. */
  offset_ms: number | null;
  rtt_ms: number | null;
  /** Events received since the hub started. */
  events: number;
  /** Sequence numbers missing between consecutive messages of one epoch, plus resets for a gap. */
  gaps: number;
  /** Times the stream was reopened (a reconnect with Last-Event-ID). */
  reconnects: number;
  /** Requests (summary rows) of its current instance the hub holds: its /traces count. */
  requests: number;
  /** Why it is not connected, when it is not. */
  error: string | null;
}

/** One worker across the routers: in flight summed, and each router's health of it. */
export interface WorkerMatrixRow {
  id: string;
  url: string;
  in_flight: number;
  /** Routers that see it healthy, of the routers that know it. */
  healthy: number;
  of: number;
  /** By router label. */
  health: Record<string, WorkerHealth>;
}

export interface HubState {
  routers: RouterLinkStatus[];
  workers: WorkerMatrixRow[];
  /** Requests in flight at a router that died (hub request ids, the latest 500): "router lost". */
  owner_lost: string[];
  /**
   * The address clients send requests to when the routers share one (`--replicas`: the shared
   * port); null when each router is its own (`serve --router`), where the page's own address is
   * the hub's, not a router's. Absent from hubs that predate it.
   */
  front?: string | null;
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
  /** Behind a dashboard hub: its routers and the worker matrix. */
  hub?: HubState;
}

/** A request body the host sent (its traffic generator), for "copy as curl". */
export interface RequestBody {
  request_id: string;
  body: unknown;
  /** The router path it was posted to (/generate, /inference/v1/generate, /v1/chat/completions, /v1/completions); absent from older hosts. */
  path?: string;
}

export type ExportFormat = 'jsonl' | 'csv';

/** A worker as an exported file remembers it: the router's id and URL, what it served, and its colour on the page. */
export interface ContextWorker {
  id: string;
  url: string;
  format: WorkerInfo['format'];
  model_path: string | null;
  /** The colour the page drew it in (#rrggbb). */
  color: string;
  /** Where a discovery source added it (pod name, node, ...); absent for a worker added by hand. */
  discovery?: WorkerInfo['discovery'];
}

/**
 * What an export carries besides its rows, so that opening the file restores the same view
 * (docs/trace-rows.md, "The context record"): one JSON Lines line, or one CSV record, of kind
 * `baton_context`, after the rows. Readers that predate it skip it as a line that is not a row.
 */
export interface TraceFileContext {
  kind: 'baton_context';
  version: 1;
  /** Epoch ms of the export. */
  exported_at: number;
  /** The workers the page knew, removed ones included: ids, URLs, formats, colours. */
  workers: ContextWorker[];
  /** The host's fault markers (kills, drains, workers the router blamed or found down). */
  faults: FaultMark[];
  /**
   * The requests still running at the export, as events (admission, their running attempts'
   * start, first token and tokens so far): they have no rows yet, and without them the file's
   * last seconds would lose their traffic, a fall to zero that never happened. Filtered like
   * the rows (id prefix, worker); none when the export keeps one outcome.
   */
  inflight: BatonEvent[];
  /**
   * The incidents (first blame, what followed) as the page derived them from its rows and fault
   * marks (renderer/src/store/incidents.ts `deriveIncidents`), for a reader other than Baton;
   * Baton re-derives them from the file's rows and `faults` on open. Absent in older files.
   */
  incidents?: unknown[];
}

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
