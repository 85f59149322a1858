// Prometheus metrics (prom-client, prefix baton_). Labels never carry request ids: their
// cardinality would grow without bound; `worker` (a URL) is bounded by the pool. Every metric is
// described, with its labels, in docs/metrics.md. Names follow Dynamo's migration metrics where
// one exists (migrations by migration_type new_request / ongoing_request, max-seq-len exceeded).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DiscoveryStatus, WorkerInfo } from './events/types.ts';

/** What the scrape reads from the router at scrape time, rather than tracking it by events. */
export interface ScrapeSources {
  workers(): WorkerInfo[];
  traceFileErrors(): number;
  /** Spare connections per worker (pool/spares.ts); empty when they are off. */
  spares(): SpareStats[];
  /** Each discovery source's state (router/discovery/reconciler.ts); absent: no discovery. */
  discovery?(): DiscoveryStatus[];
  /** Pages of cache_aware prefixes shared with the other replicas (pool/prefix-share.ts); absent: a lone router. */
  prefixShare?(): { sent: number; dropped: number; received: number };
}

/** The states a discovery source reports (router/discovery/types.ts DiscoveryState). */
const DISCOVERY_STATES = ['synced', 'stale', 'forbidden', 'unreachable'] as const;

export interface SpareStats {
  worker: string;
  idle: number;
  taken: number;
  reused: number;
  missed: number;
}

/**
 * The gauges that state what one replica sees (a worker's health and breaker, a discovery
 * source's state): in the /metrics the primary of `--replicas` aggregates, each of their series
 * carries a `replica` label, so that summing keeps one series per replica (docs/metrics.md
 * "Replicas"). Every other family sums over replicas (prom-client's default aggregator).
 */
export const BY_REPLICA_METRICS: ReadonlySet<string> = new Set(['baton_worker_healthy', 'baton_worker_circuit_state', 'baton_discovery_state', 'baton_discovery_workers']);

const CIRCUIT_VALUE = { closed: 0, half_open: 1, open: 2 } as const;

/**
 * How often the event-loop delay is sampled, ms (prom-client's eventLoopMonitoringPrecision, the
 * `resolution` of Node's perf_hooks.monitorEventLoopDelay). Each sample is a libuv timer that
 * wakes an idle process: prom-client's 10 ms default was ~100 of an idle router's ~110 wakeups a
 * second and about half its idle CPU (docs/benchmarks.md, "An idle router process"), in every
 * replica. At 100 ms a stall of 100 ms or more is always seen (as its length less up to 100 ms:
 * the sample due in it fires at its end); a shorter one with a chance of its length over
 * 100 ms. `baton_nodejs_eventloop_lag_seconds` (a setImmediate timed at scrape) does not depend
 * on it.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** prom-client's event-loop delay figures that the sampling period is part of (not the stddev). */
const LAG_FIGURES = ['min', 'max', 'mean', 'p50', 'p90', 'p99'] as const;

/**
 * Node records each sample as the time since the previous one: the period plus the delay
 * (src/node_perf.cc CreateELDHistogram: an IntervalHistogram whose timer callback records
 * `histogram.RecordDelta()`; measured on Node 20: 10.1 ms per sample when idle at a 10 ms period,
 * 100.2 ms at 100 ms), so prom-client's min/max/mean and percentiles read 0.01 s on an idle
 * process at its default period, and would read 0.1 s at ours.
 * They are reported less the period, clamped at 0: the delay itself, whatever the period (as
 * proposed in prom-client issue #370). prom-client sets them all in the `collect` of
 * nodejs_eventloop_lag_seconds, synchronously, before the registry reads the others; this runs
 * right after, in the same call.
 */
function lagLessSamplePeriod(registry: Registry, prefix: string, periodMs: number): void {
  type Settable = Gauge & { collect?: () => unknown; _getValue(): number };
  const lag = registry.getSingleMetric(`${prefix}nodejs_eventloop_lag_seconds`) as Settable | undefined;
  const figures = LAG_FIGURES.map((f) => registry.getSingleMetric(`${prefix}nodejs_eventloop_lag_${f}_seconds`) as Settable | undefined);
  const collect = lag?.collect;
  // Without perf_hooks' monitor (Bun) prom-client registers neither the figures nor a monitor.
  if (!lag || !collect || figures.some((g) => g === undefined)) return;
  const period = periodMs / 1000;
  lag.collect = () => {
    collect.call(lag);
    // NaN (no sample since the last scrape) stays NaN: Math.max(0, NaN) is NaN.
    for (const g of figures) g!.set(Math.max(0, g!._getValue() - period));
  };
}

/**
 * A histogram whose observations are counted into its buckets by a plain loop, and handed to
 * prom-client only when scraped: the same family, help, buckets and exposition as prom-client's
 * own Histogram (a test compares them), without prom-client's per-observation label hashing and
 * allocation on the per-request path. For histograms without labels.
 */
export class BucketedHistogram extends Histogram {
  private readonly bounds: readonly number[];
  /** Observations per bucket: counts[i] for bounds[i]; the last slot is above every bound. */
  private readonly counts: number[];
  private sum = 0;
  private n = 0;

  constructor(config: { name: string; help: string; buckets: number[]; registers: Registry[] }) {
    super(config);
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    this.counts = new Array<number>(this.bounds.length + 1).fill(0);
  }

  /** As prom-client's observe (a value in the first bucket whose bound is at or above it); a value that is not finite is not counted. */
  observeValue(v: number): void {
    if (!Number.isFinite(v)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && v > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.n++;
  }

  /** Scrape time: the counts in prom-client's own form, for its exposition. */
  collect(): void {
    const bucketValues: Record<number, number> = {};
    for (let i = 0; i < this.bounds.length; i++) bucketValues[this.bounds[i]!] = this.counts[i]!;
    (this as unknown as { hashMap: Record<string, unknown> }).hashMap = { '': { labels: {}, bucketValues, sum: this.sum, count: this.n } };
  }
}

/**
 * Counts by two label values, kept as plain numbers, in the order each pair was first counted
 * (the order prom-client gives its series).
 */
export class PairTally {
  private readonly byFirst = new Map<string, Map<string, { a: string; b: string; n: number }>>();
  readonly cells: { a: string; b: string; n: number }[] = [];

  add(a: string, b: string, n = 1): void {
    let byB = this.byFirst.get(a);
    if (!byB) this.byFirst.set(a, (byB = new Map()));
    let cell = byB.get(b);
    if (!cell) {
      byB.set(b, (cell = { a, b, n: 0 }));
      this.cells.push(cell);
    }
    cell.n += n;
  }
}

export class RouterMetrics {
  readonly registry = new Registry();
  private sources: ScrapeSources | null = null;

  /**
   * What the per-request path counts: plain numbers, copied into the prom-client families below
   * when they are scraped (their `collect`), so that a request bumps a field instead of hashing
   * label sets and allocating in prom-client. Names, labels and values are the families'.
   */
  readonly count = {
    /** baton_requests_total by outcome and format. */
    requests: new PairTally(),
    /** baton_attempts_total by worker and outcome. */
    attempts: new PairTally(),
    attemptsStarted: 0,
    tokens: 0,
    promptTokens: 0,
    cachedPromptTokens: 0,
    recomputedTokens: 0,
    inFlight: 0,
    /** baton_migrations_total by migration_type. Counted between a failure and its continuation's write (W4's gap). */
    migrations: { new_request: 0, ongoing_request: 0 },
    /** baton_drain_migrations_total: streams moved off a draining worker (not failures). */
    drainMigrations: 0,
  };

  readonly requests: Counter = new Counter({
    name: 'baton_requests_total', help: 'Logical requests that ended, by outcome (finished, failed, cancelled) and client format (sglang, vllm, openai)', labelNames: ['outcome', 'format'], registers: [this.registry],
    collect: () => {
      this.requests.reset();
      for (const c of this.count.requests.cells) this.requests.inc({ outcome: c.a, format: c.b }, c.n);
    },
  });
  readonly attempts: Counter = new Counter({
    name: 'baton_attempts_total', help: 'Upstream attempts that ended, by worker and attempt outcome', labelNames: ['worker', 'outcome'], registers: [this.registry],
    collect: () => {
      this.attempts.reset();
      for (const c of this.count.attempts.cells) this.attempts.inc({ worker: c.a, outcome: c.b }, c.n);
    },
  });
  readonly attemptsStarted = this.plainCounter('baton_attempts_started_total', 'Upstream attempts started', () => this.count.attemptsStarted);
  readonly migrations: Counter = new Counter({
    name: 'baton_migrations_total', help: 'Migrations (continuations started on another worker), by migration_type: new_request (no token yet) or ongoing_request', labelNames: ['migration_type'], registers: [this.registry],
    collect: () => {
      this.migrations.reset();
      const m = this.count.migrations;
      this.migrations.inc({ migration_type: 'new_request' }, m.new_request);
      this.migrations.inc({ migration_type: 'ongoing_request' }, m.ongoing_request);
    },
  });
  readonly drainMigrations = this.plainCounter('baton_drain_migrations_total', 'Streams continued on another worker because their worker was draining toward a deadline (not failures; not in baton_migrations_total)', () => this.count.drainMigrations);
  readonly discoveryState: Gauge = new Gauge({
    name: 'baton_discovery_state', help: '1 for the state each discovery source is in now (synced, stale, forbidden, unreachable), 0 for the others', labelNames: ['source', 'state'], registers: [this.registry],
    collect: () => {
      this.discoveryState.reset();
      for (const d of this.sources?.discovery?.() ?? []) for (const st of DISCOVERY_STATES) this.discoveryState.set({ source: d.source, state: st }, d.state === st ? 1 : 0);
    },
  });
  readonly discoveryWorkers: Gauge = new Gauge({
    name: 'baton_discovery_workers', help: 'Workers a discovery source added that are in the pool now', labelNames: ['source'], registers: [this.registry],
    collect: () => {
      this.discoveryWorkers.reset();
      for (const d of this.sources?.discovery?.() ?? []) this.discoveryWorkers.set({ source: d.source }, d.workers);
    },
  });
  readonly replicaPrefixPages: Counter = new Counter({
    name: 'baton_replica_prefix_pages_total',
    help: 'Pages of cache_aware prefixes shared between replicas: sent to the others, dropped (the IPC channel backed up), received from them',
    labelNames: ['way'], registers: [this.registry],
    collect: () => {
      const c = this.sources?.prefixShare?.();
      if (!c) return;
      this.replicaPrefixPages.reset();
      for (const way of ['sent', 'dropped', 'received'] as const) this.replicaPrefixPages.inc({ way }, c[way]);
    },
  });
  readonly migrationDuration = new Histogram({
    name: 'baton_migration_duration_seconds',
    help: 'From the first failed attempt of a migrated request to its end, by outcome (success, failure, cancelled)',
    labelNames: ['outcome'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });
  readonly notAdmitted = new Counter({ name: 'baton_migration_refused_total', help: 'Requests refused migration at admission, by reason (served on one attempt)', labelNames: ['reason'], registers: [this.registry] });
  readonly maxSeqLenExceeded = new Counter({ name: 'baton_migration_max_seq_len_exceeded_total', help: 'Migrations not made because prompt + replayed tokens exceeded --migration-max-seq-len', registers: [this.registry] });
  readonly migrationExhausted = new Counter({ name: 'baton_migration_exhausted_total', help: 'Requests that failed with their migration limit spent or no worker left to continue on', registers: [this.registry] });
  readonly tokens = this.plainCounter('baton_tokens_streamed_total', 'Output tokens delivered to clients (completion tokens of ended logical requests)', () => this.count.tokens);
  readonly ttft = new BucketedHistogram({
    name: 'baton_time_to_first_token_seconds', help: 'Time from arrival to the first output token of logical requests',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [this.registry],
  });
  readonly interToken = new BucketedHistogram({
    name: 'baton_inter_token_latency_seconds', help: 'Mean time between output tokens, one observation per attempt with 2 or more tokens',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [this.registry],
  });
  readonly inFlight: Gauge = new Gauge({
    name: 'baton_requests_in_flight', help: 'Logical requests in flight', registers: [this.registry],
    collect: () => this.inFlight.set(this.count.inFlight),
  });
  // Worker gauges are read from the pool at scrape time: a circuit turns half-open by the clock,
  // with no event to say so, and a removed worker's series must disappear, not linger.
  readonly workerHealthy = this.workerGauge('baton_worker_healthy', '1 when the worker may take new attempts (health "healthy"), else 0', (w) => (w.health === 'healthy' ? 1 : 0));
  readonly workerCircuit = this.workerGauge('baton_worker_circuit_state', 'Circuit breaker state: 0 closed, 1 half-open, 2 open', (w) => CIRCUIT_VALUE[w.circuit]);
  readonly workerInFlight = this.workerGauge('baton_worker_in_flight', 'Attempts in flight on the worker', (w) => w.in_flight);
  readonly cachedPromptTokens = this.plainCounter('baton_prompt_tokens_cached_total', 'Prompt tokens of logical requests that the first worker reported cached', () => this.count.cachedPromptTokens);
  readonly recomputedTokens = this.plainCounter('baton_prompt_tokens_recomputed_total', 'Tokens prefilled again because of migration: prompt + replayed tokens sent to continuations, less what their workers reported cached', () => this.count.recomputedTokens);
  readonly promptTokens = this.plainCounter('baton_prompt_tokens_total', 'Prompt tokens of logical requests', () => this.count.promptTokens);
  readonly traceFileErrors: Counter = new Counter({
    name: 'baton_trace_file_errors_total', help: 'Trace rows that could not be appended to --trace-file', registers: [this.registry],
    collect: () => {
      if (!this.sources) return;
      this.traceFileErrors.reset();
      this.traceFileErrors.inc(this.sources.traceFileErrors());
    },
  });

  readonly spareIdle: Gauge = new Gauge({
    name: 'baton_worker_spare_connections', help: 'Connected spare sockets kept for continuations to the worker', labelNames: ['worker'], registers: [this.registry],
    collect: () => {
      if (!this.sources) return;
      this.spareIdle.reset();
      for (const s of this.sources.spares()) this.spareIdle.set({ worker: s.worker }, s.idle);
    },
  });
  readonly continuationConnections: Counter = new Counter({
    name: 'baton_continuation_connections_total',
    help: 'Connections continuations were sent on, by worker and source: spare or keepalive (written at once), or new (connected first)',
    labelNames: ['worker', 'source'], registers: [this.registry],
    collect: () => {
      if (!this.sources) return;
      this.continuationConnections.reset();
      for (const s of this.sources.spares()) {
        this.continuationConnections.inc({ worker: s.worker, source: 'spare' }, s.taken);
        this.continuationConnections.inc({ worker: s.worker, source: 'keepalive' }, s.reused);
        this.continuationConnections.inc({ worker: s.worker, source: 'new' }, s.missed);
      }
    },
  });

  /** `formats`: the client formats' names (trace rows' `format`), whose request series start at 0. */
  constructor(defaultMetrics = false, formats: readonly string[] = []) {
    if (defaultMetrics) {
      collectDefaultMetrics({ register: this.registry, prefix: 'baton_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
      lagLessSamplePeriod(this.registry, 'baton_', EVENT_LOOP_SAMPLE_MS);
    }
    // Series with known label values exist from the start at 0, so that rate() and absent()
    // see the first failure or migration as a change rather than as a series appearing.
    for (const outcome of ['finished', 'failed', 'cancelled']) for (const format of formats) this.count.requests.add(outcome, format, 0);
    for (const outcome of ['success', 'failure', 'cancelled']) this.migrationDuration.zero({ outcome });
  }

  /**
   * The exposition for GET /metrics. prom-client writes NaN as `Nan` (the event-loop lag before
   * its first sample); the text format spells it `NaN`, and strict parsers reject anything else.
   */
  async exposition(): Promise<string> {
    return (await this.registry.metrics()).replace(/ Nan$/gm, ' NaN');
  }

  /** A counter without labels whose value is `value()` at scrape time. */
  private plainCounter(name: string, help: string, value: () => number): Counter {
    const counter: Counter = new Counter({
      name, help, registers: [this.registry],
      collect: () => {
        counter.reset();
        counter.inc(value());
      },
    });
    return counter;
  }

  /** Read the pool and the trace store at each scrape. */
  observe(sources: ScrapeSources): void {
    this.sources = sources;
  }

  private workerGauge(name: string, help: string, value: (w: WorkerInfo) => number): Gauge {
    const gauge: Gauge = new Gauge({
      name, help, labelNames: ['worker'], registers: [this.registry],
      collect: () => {
        if (!this.sources) return;
        gauge.reset();
        for (const w of this.sources.workers()) gauge.set({ worker: w.url }, value(w));
      },
    });
    return gauge;
  }
}
