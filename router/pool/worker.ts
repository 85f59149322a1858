// One upstream worker as the pool sees it: its connection pool, what probing learned about it,
// and its health, bench and circuit state.
import { Pool, buildConnector } from 'undici';
import { H1Pool, KEEP_ALIVE_MARGIN_MS } from '../upstream/h1.ts';
import type { WorkerDiscovery, WorkerHealth, WorkerInfo } from '../events/types.ts';
import type { FormatName } from '../core/types.ts';
import { UNPROBED } from '../formats/registry.ts';
import { CircuitBreaker, type CircuitOptions } from './circuit-breaker.ts';
import { SpareConnections } from './spares.ts';

/**
 * The idle timeout of the HTTP servers workers run: SGLang runs uvicorn with
 * `timeout_keep_alive=5` (python/sglang/srt/entrypoints/http_server.py, both `uvicorn.run` calls
 * at the end of `launch_server`), vLLM with `timeout_keep_alive=envs.VLLM_HTTP_TIMEOUT_KEEP_ALIVE`
 * (vllm/entrypoints/openai/api_server.py), whose default is "5" (vllm/envs.py); Node's http
 * server (the simulator) has 5 s too. uvicorn closes an idle connection exactly this long after
 * it wrote a response's end (uvicorn/protocols/http/h11_impl.py and httptools_impl.py:
 * `on_response_complete` arms `loop.call_later(timeout_keep_alive, timeout_keep_alive_handler)`),
 * without a word, and resets a request that arrives after the close.
 */
export const WORKER_KEEP_ALIVE_MS = 5_000;
/**
 * Idle connections to a worker, of both clients, are not written past this (3 s): a request never
 * crosses the worker's idle close (docs/architecture.md, "Idle connections and the worker's
 * keep-alive", measured against uvicorn).
 */
export const UPSTREAM_IDLE_MS = WORKER_KEEP_ALIVE_MS - KEEP_ALIVE_MARGIN_MS;

export class Worker {
  /** Health checks, probes, aborts and the endpoints passed through (undici: the general client). */
  readonly pool: Pool;
  /**
   * Generate attempts (upstream/h1.ts: the per-token path's own client). Attempt 0 on keep-alive
   * connections; continuations one request per connection, on a spare when one is ready (see
   * spares.ts), or keep-alive like attempt 0 when spare connections are off.
   */
  readonly h1: H1Pool;
  readonly spares: SpareConnections | null;
  healthy = true; // optimistic until a check or a connect error says otherwise
  dead = false; // connect refused: gone until a health check answers
  benchedUntil = 0;
  draining = false;
  /** When a drain with a deadline removes the worker (epoch ms; migration/drain.ts); null: none. */
  drainDeadline: number | null = null;
  /** The discovery source that added it (router/discovery/); null: added by hand, never touched by discovery. */
  discovery: WorkerDiscovery | null = null;
  inFlight = 0;
  /** The wire format the worker speaks, detected by probing (null until then: taken for SGLang). */
  format: FormatName | null = null;
  tokenOnly: boolean | null = null;
  incremental: boolean | null = null;
  /** preferred_sampling_params.max_new_tokens, when advertised. */
  defaultMaxNewTokens: number | null = null;
  /** preferred_sampling_params, merged by SGLang under every request's own (null: none). */
  preferred: Record<string, unknown> | null = null;
  modelPath: string | null = null;
  /** As probed, and as the latest attempt's meta_info reported it (RL clusters update weights live). */
  weightVersion: string | null = null;
  contextLength: number | null = null;
  maxTotalTokens: number | null = null;
  /** Tokens per KV page (probed page_size; null: unknown, taken as 1). */
  pageSize: number | null = null;
  /** Requests the worker itself reports running + waiting (null: not read), from every router's traffic. */
  reportedLoad: number | null = null;
  /** Prompt tokens sent and cached tokens reported over its attempts (the Workers view's hit rate). */
  promptTokens = 0;
  cachedTokens = 0;
  /** The abort endpoint it serves, as probed (vLLM: formats/vllm/probe.ts); undefined: the format's own. */
  abortPath: string | null | undefined = undefined;
  /** Tokens per streamed frame when a request names none (probed; null: unknown, taken as 1). */
  streamInterval: number | null = null;
  /**
   * P/D role (docs/pd.md): `prefill` serves only the prefill leg of a pair, `decode` streams the
   * answer; null, an aggregated worker. Declared by --prefill / --decode, else as probed.
   */
  pdRole: 'prefill' | 'decode' | null = null;
  /** The role given on the command line (kept over what a probe says). */
  declaredRole: 'prefill' | 'decode' | null = null;
  /** A prefill server's bootstrap port: given with --prefill URL PORT, else probed; null: unknown (sent as null, as the gateway does). */
  bootstrapPort: number | null = null;
  declaredBootstrapPort: number | null = null;
  probed = false;
  healthFailures = 0;
  readonly circuit: CircuitBreaker;

  constructor(
    readonly id: string,
    readonly url: string,
    circuit: CircuitOptions,
    connectTimeoutMs: number,
    readonly simulated = false,
    readonly simIndex: number | null = null,
    spareConnections = 0,
  ) {
    this.circuit = new CircuitBreaker(circuit);
    const connect = buildConnector({ timeout: connectTimeoutMs });
    // Timeouts on the body and headers are the router's own (inter-token timeout, swept per
    // frame), because undici's would also fire while the router pauses a worker for a slow client.
    const common = { pipelining: 1, headersTimeout: 0, bodyTimeout: 0 } as const;
    // undici closes a connection idle for keepAliveTimeout (when the server gives no Keep-Alive
    // hint, as uvicorn gives none), or for the hint less keepAliveTimeoutThreshold (2 s) capped by
    // keepAliveMaxTimeout: both at UPSTREAM_IDLE_MS. With 30 s, every 5 s health check went out on
    // the connection the previous one left, at 4.94-5.00 s idle, as uvicorn closed it.
    this.pool = new Pool(url, { ...common, connections: 512, connect, keepAliveTimeout: UPSTREAM_IDLE_MS, keepAliveMaxTimeout: UPSTREAM_IDLE_MS });
    this.spares = spareConnections > 0 ? new SpareConnections(new URL(url), connect) : null;
    // Idle connections are not written past UPSTREAM_IDLE_MS, so a request is not written on a
    // connection the worker is closing at that moment; one that still is (a worker with a
    // shorter timeout) is sent again once on a fresh connection (h1.ts, H1Connection.onClose).
    this.h1 = new H1Pool(new URL(url), connect, { connections: 512, keepAliveMs: UPSTREAM_IDLE_MS, spares: this.spares });
  }

  /** Close every connection to the worker; in-flight attempts end with an error. */
  async destroy(): Promise<void> {
    this.spares?.close();
    await Promise.all([this.pool.destroy(), this.h1.destroy()]);
  }

  /** Stop taking work; in-flight attempts keep their connections until they end. */
  async close(): Promise<void> {
    this.spares?.close();
    await Promise.all([this.pool.close(), this.h1.close()]);
  }

  health(now = Date.now()): WorkerHealth {
    if (this.draining) return 'draining';
    if (this.dead) return 'dead';
    if (!this.healthy) return 'unhealthy';
    if (this.circuit.state(now) === 'open') return 'circuit_open';
    if (this.benchedUntil > now) return 'benched';
    return 'healthy';
  }

  /**
   * SGLang's scheduler bound on prompt + output (scheduler.py: `max_req_len =
   * min(context_len - 1, max_total_num_tokens - 1)`), or null when not advertised.
   */
  maxReqLen(): number | null {
    // Asked for every request (admission): no arrays.
    const c = this.contextLength;
    const t = this.maxTotalTokens;
    if (c === null) return t === null ? null : t - 1;
    return t === null ? c - 1 : Math.min(c, t) - 1;
  }

  /**
   * The load policies compare: what the worker reported, or the router's own attempts in flight
   * when that is higher (the report is up to one poll old) or there is no report.
   */
  load(): number {
    const r = this.reportedLoad;
    return r === null || r < this.inFlight ? this.inFlight : r;
  }

  /** May take new attempts now. */
  eligible(now = Date.now()): boolean {
    return !this.draining && !this.dead && this.healthy && this.benchedUntil <= now && this.circuit.allows(now);
  }

  info(): WorkerInfo {
    return {
      id: this.id,
      url: this.url,
      health: this.health(),
      circuit: this.circuit.state(),
      format: this.format,
      token_only: this.tokenOnly,
      incremental: this.incremental,
      model_path: this.modelPath,
      weight_version: this.weightVersion,
      in_flight: this.inFlight,
      reported_load: this.reportedLoad,
      hit_rate: this.promptTokens > 0 ? this.cachedTokens / this.promptTokens : null,
      simulated: this.simulated,
      sim_index: this.simIndex,
      draining: this.draining,
      abort_path: this.abortPath,
      ...(this.pdRole !== null ? { pd_role: this.pdRole, bootstrap_port: this.bootstrapPort } : {}),
      ...(this.drainDeadline !== null ? { drain_deadline: this.drainDeadline } : {}),
      ...(this.discovery !== null ? { discovery: this.discovery } : {}),
    };
  }
}

/** A worker serves a format's requests once probed as that format (an unprobed one: formats/registry.ts UNPROBED). */
export function speaks(w: Worker, format: FormatName): boolean {
  // Asked per worker on every pick: a probed worker answers without the default.
  const f = w.format;
  return f === format || (f === null && format === UNPROBED);
}
