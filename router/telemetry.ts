// The one place where trace rows, metrics and dashboard events are emitted: when a request is
// admitted, an attempt starts or ends, and a request ends. The migration loop reports facts
// here; it never writes a row or bumps a counter itself.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { BatonEvent, DiscoveryStatus, RouterStats, WorkerInfo } from './events/types.ts';
import type { EventBus } from './events/bus.ts';
import type { RouterMetrics } from './metrics.ts';
import type { TraceStore } from './trace/store.ts';
import { RecentOutputs, type RequestOutput } from './trace/outputs.ts';
import type { AttemptRow, ErrorKind, RequestRow } from './trace/row.ts';
import type { Tracing } from './otel/tracing.ts';

/** Trace context the client sent (W3C headers), for tracing to continue the client's trace. */
export interface InboundTrace {
  traceparent?: string;
  tracestate?: string;
  /** The inbound request's HTTP method and route (the server span's http.request.method, http.route). */
  method?: string;
  route?: string;
}

/** A row as the loop writes it: telemetry fills in `trace_id`. */
export type AttemptRowIn = Omit<AttemptRow, 'trace_id'> & { trace_id?: string | null };
export type RequestRowIn = Omit<RequestRow, 'trace_id'> & { trace_id?: string | null };
type AdmittedFacts = Omit<Extract<BatonEvent, { type: 'request_admitted' }>, 'type' | 't' | 'trace_id'>;

/** What the progress ticker asks of a request in flight. */
export interface ProgressSource {
  readonly id: string;
  /** The client's trace context, when it sent one. */
  readonly trace?: InboundTrace | null;
  attemptIndex(): number;
  /** Tokens produced so far by the current attempt, and by the logical request. */
  progress(): { tokens: number; completion: number };
}

export class Telemetry {
  private readonly inFlight = new Set<ProgressSource>();
  private readonly lastReported = new WeakMap<ProgressSource, number>();
  private ticker: NodeJS.Timeout | null = null;
  /**
   * Output ids of recent requests, for the dashboard's request view: the last 512 finished, and
   * apart from them the last 512 that migrated or failed (the ones an incident is about).
   */
  readonly outputs = new KeptOutputs(512, 512);
  /** This router's identity: a dashboard that sees another instance answer starts over. */
  readonly instance = randomUUID();
  readonly startedAt = Date.now();
  /** Which replica this router is (router/replicas/identity.ts); shown in its stats. */
  replica: { id: string; index: number; epoch: number } | null = null;
  /**
   * OpenTelemetry traces (router/otel/tracing.ts), or null when export is off: then every hook
   * here costs one branch, and no span state exists.
   */
  tracing: Tracing | null = null;

  constructor(
    readonly bus: EventBus,
    readonly traces: TraceStore,
    readonly metrics: RouterMetrics,
    private readonly progressMs = 250,
  ) {}

  /**
   * What tracing needs of the inbound request: the client's W3C trace context, the method and the
   * route. Null when tracing is off (nothing is read or allocated).
   */
  inboundTrace(req: IncomingMessage, route: string): InboundTrace | null {
    if (this.tracing === null) return null;
    const { traceparent, tracestate } = req.headers;
    return {
      traceparent: typeof traceparent === 'string' ? traceparent : undefined,
      tracestate: typeof tracestate === 'string' ? tracestate : undefined,
      method: req.method,
      route,
    };
  }

  // Events are built only when someone listens (`bus.active`): a headless router has no
  // subscriber, and these run for every request.

  requestAdmitted(src: ProgressSource, e: AdmittedFacts): void {
    this.inFlight.add(src);
    this.metrics.count.inFlight++;
    if (!e.admitted && e.reason) this.metrics.notAdmitted.inc({ reason: e.reason });
    const traceId = this.tracing === null ? null : this.tracing.admitted(src);
    if (this.bus.active) this.bus.emit({ type: 'request_admitted', t: Date.now(), ...e, trace_id: traceId });
    this.startTicker();
  }

  /**
   * An attempt is about to be sent. Returns headers to send with it upstream (a tracer's
   * `traceparent`, so the worker's own trace joins the attempt's), or null: none.
   */
  attemptStarted(e: Omit<Extract<BatonEvent, { type: 'attempt_started' }>, 'type' | 't'>): Record<string, string> | null {
    this.metrics.count.attemptsStarted++;
    if (this.bus.active) this.bus.emit({ type: 'attempt_started', t: Date.now(), ...e });
    return this.tracing === null ? null : this.tracing.attemptStarted(e);
  }

  firstToken(requestId: string, attempt: number, ttftMs: number, logicalTtftMs: number | null): void {
    if (logicalTtftMs !== null) this.metrics.ttft.observeValue(logicalTtftMs / 1000);
    if (this.tracing !== null) this.tracing.firstToken(requestId, attempt);
    if (this.bus.active) this.bus.emit({ type: 'first_token', t: Date.now(), request_id: requestId, attempt, ttft_ms: ttftMs });
  }

  attemptEnded(input: AttemptRowIn): void {
    const row = input as AttemptRow;
    row.trace_id = this.tracing === null ? null : this.tracing.attemptEnded(row, this.inFlight);
    this.traces.add(row);
    this.metrics.count.attempts.add(row.worker, row.outcome);
    // Migration's prefill cost, known once the continuation's worker has said what it had cached
    // (SGLang: every chunk's meta_info; vLLM: only the usage chunk after the finish). A
    // continuation that reported nothing (failed before that, or a vLLM worker without
    // --enable-prompt-tokens-details) is not counted: counting all it was sent overstated the cost.
    if (row.attempt > 0 && row.ttft_ms !== null && row.cached_tokens !== null) {
      this.metrics.count.recomputedTokens += Math.max(0, row.prompt_tokens_sent - row.cached_tokens);
    }
    // Finished attempts only: a failed one's end includes the time it took to notice the failure
    // (up to the inter-token timeout), which is not a gap between tokens.
    if (row.outcome === 'finished' && row.tokens > 1 && row.ttft_ms !== null) {
      const decodeMs = row.ended_at - row.started_at - row.ttft_ms;
      if (decodeMs >= 0) this.metrics.interToken.observeValue(decodeMs / 1000 / (row.tokens - 1));
    }
    if (this.bus.active) this.bus.emit({ type: 'attempt_ended', t: row.ended_at, row });
  }

  /** `_replayed` is not counted here: recompute is counted when the continuation ends (see attemptEnded). */
  migrated(requestId: string, from: string, to: string | null, atToken: number, attempt: number, kind: ErrorKind, ongoing: boolean, _replayed: number): void {
    // A drain's move is planned, not a failure: counted apart (baton_drain_migrations_total).
    if (kind === 'drain') this.metrics.count.drainMigrations++;
    else if (ongoing) this.metrics.count.migrations.ongoing_request++;
    else this.metrics.count.migrations.new_request++;
    if (this.tracing !== null) this.tracing.migrated(requestId, attempt, kind, atToken, ongoing);
    if (this.bus.active) this.bus.emit({ type: 'migrated', t: Date.now(), request_id: requestId, from_worker: from, to_worker: to, at_token: atToken, attempt, error_kind: kind });
  }

  maxSeqLenExceeded(): void {
    this.metrics.maxSeqLenExceeded.inc();
  }

  requestFinished(src: ProgressSource, input: RequestRowIn, firstFailureAt: number | null, exhausted: boolean, output?: RequestOutput): void {
    const row = input as RequestRow;
    row.trace_id = this.tracing === null ? null : this.tracing.requestFinished(src, row);
    if (output) this.outputs.add(output, row.migrations > 0 || row.outcome === 'failed');
    this.inFlight.delete(src);
    const count = this.metrics.count;
    count.inFlight--;
    this.traces.add(row);
    count.requests.add(row.outcome, row.format);
    count.tokens += row.completion_tokens;
    count.promptTokens += row.prompt_tokens;
    // A worker's report may be anything: only a positive count adds (a counter never goes down).
    if (typeof row.cached_tokens === 'number' && row.cached_tokens > 0 && Number.isFinite(row.cached_tokens)) count.cachedPromptTokens += row.cached_tokens;
    if (exhausted) this.metrics.migrationExhausted.inc();
    if (firstFailureAt !== null && row.migrations > 0) {
      const outcome = row.outcome === 'finished' ? 'success' : row.outcome === 'cancelled' ? 'cancelled' : 'failure';
      this.metrics.migrationDuration.observe({ outcome }, (row.ended_at - firstFailureAt) / 1000);
    }
    if (this.bus.active) this.bus.emit({ type: 'request_finished', t: row.ended_at, row });
  }

  // Worker gauges are read from the pool at scrape time (RouterMetrics.observe); only events here.
  workerChanged(info: WorkerInfo): void {
    if (this.tracing !== null) this.tracing.noteWorker(info);
    if (this.bus.active) this.bus.emit({ type: 'worker_state', t: Date.now(), worker: info });
  }

  /** A discovery source's state changed (router/discovery/): the dashboard shows it. */
  discoveryState(status: DiscoveryStatus): void {
    if (this.bus.active) this.bus.emit({ type: 'discovery_state', t: Date.now(), discovery: status });
  }

  /** `last`: the worker as it was when removed; its discovery tag's reason says why it went (a pod OOMKilled, evicted, deleted). */
  workerRemoved(id: string, last: WorkerInfo | null = null): void {
    if (this.bus.active) this.bus.emit({ type: 'worker_removed', t: Date.now(), worker_id: id, ...(last ? { worker: last } : {}) });
  }

  /** Coalesced progress: at most one event per request per tick, only when it moved. */
  private startTicker(): void {
    if (this.ticker || this.progressMs <= 0) return;
    this.ticker = setInterval(() => {
      if (this.inFlight.size === 0) {
        clearInterval(this.ticker!);
        this.ticker = null;
        return;
      }
      if (!this.bus.active) return;
      const t = Date.now();
      for (const src of this.inFlight) {
        const p = src.progress();
        if (this.lastReported.get(src) === p.completion) continue;
        this.lastReported.set(src, p.completion);
        this.bus.emit({ type: 'progress', t, request_id: src.id, attempt: src.attemptIndex(), tokens: p.tokens, completion_tokens: p.completion });
      }
    }, this.progressMs);
    this.ticker.unref();
  }

  /** Totals since this router started, read from its metrics (what /metrics shows), and the workers given. */
  async stats(workers: WorkerInfo[], discovery: DiscoveryStatus[] = []): Promise<RouterStats> {
    const m = this.metrics;
    const [requests, migrations, attempts, tokens, inFlight] = await Promise.all([
      m.requests.get(), m.migrations.get(), m.attemptsStarted.get(), m.tokens.get(), m.inFlight.get(),
    ]);
    const sum = (values: { value: number }[]) => values.reduce((n, v) => n + v.value, 0);
    const outcome = (o: string) => sum(requests.values.filter((v) => v.labels.outcome === o));
    return {
      instance: this.instance,
      started_at: this.startedAt,
      ...(this.replica ? { replica: { id: this.replica.id, index: this.replica.index, epoch: this.replica.epoch } } : {}),
      t: Date.now(),
      totals: {
        requests: sum(requests.values),
        finished: outcome('finished'),
        failed: outcome('failed'),
        cancelled: outcome('cancelled'),
        migrations: sum(migrations.values),
        attempts_started: sum(attempts.values),
        tokens: sum(tokens.values),
        in_flight: sum(inFlight.values),
      },
      workers,
      ...(discovery.length > 0 ? { discovery } : {}),
    };
  }

  close(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = null;
  }
}

/** Recent outputs in two rings, so that ordinary traffic does not push out the incidents. */
class KeptOutputs {
  private readonly recent: RecentOutputs;
  private readonly notable: RecentOutputs;

  constructor(recent: number, notable: number) {
    this.recent = new RecentOutputs(recent);
    this.notable = new RecentOutputs(notable);
  }

  add(out: RequestOutput, notable: boolean): void {
    (notable ? this.notable : this.recent).add(out);
  }

  get(id: string): RequestOutput | undefined {
    return this.recent.get(id) ?? this.notable.get(id);
  }
}
