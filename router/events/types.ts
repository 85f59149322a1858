// The typed event stream the dashboard is drawn from. The renderer imports this module for
// types only (`import type`), so nothing here may have run-time code.
import type { AttemptRow, RequestRow, ErrorKind } from '../trace/row.ts';

export type WorkerHealth = 'healthy' | 'unhealthy' | 'benched' | 'circuit_open' | 'dead' | 'draining' | 'unknown';

export interface WorkerInfo {
  id: string;               // stable id used by the worker API (w0, w1, ...)
  url: string;
  health: WorkerHealth;
  circuit: 'closed' | 'open' | 'half_open';
  format: string | null;               // the wire format it speaks (router/formats/registry.ts); null until probed
  token_only: boolean | null;          // null until probed
  incremental: boolean | null;         // null until probed
  model_path: string | null;           // null until probed (or not advertised)
  weight_version: string | null;       // probed, and re-read from each attempt's meta_info
  in_flight: number;
  /** The worker's own load as last read (SGLang /get_load num_reqs, vLLM running + waiting); null: not read. */
  reported_load?: number | null;
  /** Cached / prompt tokens over the attempts it served (cached_tokens as the worker reported them); null: none yet. */
  hit_rate?: number | null;
  simulated: boolean;                  // a worker of the embedded simulated cluster (has fault controls)
  sim_index: number | null;
  draining: boolean;
  /**
   * The abort endpoint the worker serves, where probed (vLLM: `/inference/v1/abort_requests` or
   * the older `/abort_requests`); null: none, closing the attempt's connection is its abort;
   * absent: the format's own (SGLang's `/abort_request`), or not probed.
   */
  abort_path?: string | null;
  /** P/D role (docs/pd.md); absent: an aggregated worker. */
  pd_role?: 'prefill' | 'decode';
  /** A P/D worker's bootstrap port (prefill: where decode servers pull the KV); null: unknown. */
  bootstrap_port?: number | null;
  /** Where a draining worker's time runs out (epoch ms): it is removed then. Absent: not draining toward a deadline. */
  drain_deadline?: number;
  /** Set when a discovery source added the worker (router/discovery/); absent for one added by hand. */
  discovery?: WorkerDiscovery;
}

/** Which discovery source added a worker, and what it says about it (the dashboard shows it). */
export interface WorkerDiscovery {
  source: string;
  key: string;
  name?: string;
  pod?: string;
  namespace?: string;
  node?: string;
  reason?: string;
}

/** A discovery source's own health, as /workers, /metrics and the dashboard show it. */
export interface DiscoveryStatus {
  source: string;
  /** synced | stale | forbidden | unreachable */
  state: string;
  /** synced: when; stale: since when (epoch ms). */
  at: number | null;
  detail: string | null;
  /** Workers this source added that are in the pool now. */
  workers: number;
}

export type BatonEvent =
  | { type: 'request_admitted'; t: number; request_id: string; admitted: boolean; reason: string | null;
      stream: boolean; prompt_tokens: number; max_new_tokens: number | null;
      /** The request's OpenTelemetry trace id when it is traced (head-sampled), else null. */
      trace_id: string | null;
      /** The wire format it came in (as its rows' `format`), so the page badges it from the start; absent from older routers. */
      format?: string;
      /** The path it was posted to (/generate, /inference/v1/generate, /v1/chat/completions, ...); absent from older routers. */
      front?: string }
  | { type: 'attempt_started'; t: number; request_id: string; attempt: number; rid: string; worker: string;
      replayed_tokens: number; budget_before: number | null;
      /** P/D (docs/pd.md): the prefill server of the attempt's pair (`worker` is its decode worker); absent for an aggregated worker. */
      prefill_worker?: string }
  | { type: 'first_token'; t: number; request_id: string; attempt: number; ttft_ms: number }
  | { type: 'progress'; t: number; request_id: string; attempt: number; tokens: number; completion_tokens: number }
  | { type: 'attempt_ended'; t: number; row: AttemptRow }
  | { type: 'migrated'; t: number; request_id: string; from_worker: string; to_worker: string | null;
      at_token: number; attempt: number; error_kind: ErrorKind }
  | { type: 'request_finished'; t: number; row: RequestRow }
  | { type: 'worker_state'; t: number; worker: WorkerInfo }
  | { type: 'worker_removed'; t: number; worker_id: string;
      /** The worker as it was when removed (absent from older routers): `discovery.reason` says why a discovered one went. */
      worker?: WorkerInfo }
  | { type: 'discovery_state'; t: number; discovery: DiscoveryStatus };

export type BatonEventType = BatonEvent['type'];

/** The router's own counters since it started (the numbers its /metrics shows). */
export interface RouterTotals {
  requests: number;          // logical requests that ended (baton_requests_total)
  finished: number;
  failed: number;
  cancelled: number;
  migrations: number;        // baton_migrations_total, both migration types
  attempts_started: number;  // baton_attempts_started_total
  tokens: number;            // baton_tokens_streamed_total
  in_flight: number;         // baton_requests_in_flight
}

/** Who the router is (a new id at every start) and its figures now: what the dashboard polls. */
export interface RouterStats {
  instance: string;
  started_at: number;        // epoch ms
  t: number;                 // epoch ms of this reading
  totals: RouterTotals;
  workers: WorkerInfo[];
  /** Each discovery source's state (absent: no discovery source runs). */
  discovery?: DiscoveryStatus[];
  /** Which replica this router is (router/replicas/identity.ts; a lone router is index 0). */
  replica?: { id: string; index: number; epoch: number };
}
