// Prometheus metrics (prom-client, prefix baton_). Labels never carry request ids: their
// cardinality would grow without bound. Names follow Dynamo's migration metrics where one exists.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class RouterMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: 'baton_requests_total', help: 'Logical requests by outcome', labelNames: ['outcome'], registers: [this.registry] });
  readonly attempts = new Counter({ name: 'baton_attempts_total', help: 'Upstream attempts by worker and outcome', labelNames: ['worker', 'outcome'], registers: [this.registry] });
  readonly attemptsStarted = new Counter({ name: 'baton_attempts_started_total', help: 'Upstream attempts started', registers: [this.registry] });
  readonly migrations = new Counter({ name: 'baton_migrations_total', help: 'Migrations by type', labelNames: ['migration_type'], registers: [this.registry] });
  readonly migrationDuration = new Histogram({
    name: 'baton_migration_duration_seconds',
    help: 'From the failure of an attempt to the end of the migrated request, by outcome',
    labelNames: ['outcome'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });
  readonly notAdmitted = new Counter({ name: 'baton_migration_refused_total', help: 'Requests refused migration at admission, by reason', labelNames: ['reason'], registers: [this.registry] });
  readonly maxSeqLenExceeded = new Counter({ name: 'baton_migration_max_seq_len_exceeded_total', help: 'Migrations stopped by --migration-max-seq-len', registers: [this.registry] });
  readonly migrationExhausted = new Counter({ name: 'baton_migration_exhausted_total', help: 'Requests whose migration limit was spent', registers: [this.registry] });
  readonly tokens = new Counter({ name: 'baton_tokens_streamed_total', help: 'Output tokens delivered to clients', registers: [this.registry] });
  readonly ttft = new Histogram({
    name: 'baton_time_to_first_token_seconds', help: 'Time to first token of logical requests',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [this.registry],
  });
  readonly interToken = new Histogram({
    name: 'baton_inter_token_latency_seconds', help: 'Mean time between output tokens per attempt',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [this.registry],
  });
  readonly inFlight = new Gauge({ name: 'baton_requests_in_flight', help: 'Logical requests in flight', registers: [this.registry] });
  readonly workerHealthy = new Gauge({ name: 'baton_worker_healthy', help: '1 when the worker may take new attempts', labelNames: ['worker'], registers: [this.registry] });
  readonly workerCircuit = new Gauge({ name: 'baton_worker_circuit_state', help: 'Circuit breaker: 0 closed, 1 half-open, 2 open', labelNames: ['worker'], registers: [this.registry] });
  readonly cachedPromptTokens = new Counter({ name: 'baton_prompt_tokens_cached_total', help: 'Prompt tokens of logical requests reported cached', registers: [this.registry] });
  readonly recomputedTokens = new Counter({ name: 'baton_prompt_tokens_recomputed_total', help: 'Tokens prefilled again by continuations (replayed tokens not served from cache)', registers: [this.registry] });
  readonly promptTokens = new Counter({ name: 'baton_prompt_tokens_total', help: 'Prompt tokens of logical requests', registers: [this.registry] });

  constructor(defaultMetrics = false) {
    if (defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'baton_process_' });
  }
}
