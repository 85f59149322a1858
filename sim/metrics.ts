// The worker's /metrics, under SGLang's metric names and its `model_name` label, so dashboards
// and scrapers written for SGLang read the simulator unchanged. A private registry per worker:
// several in-process workers in one test must not share counters.

import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface LoadSnapshot {
  running: number;
  queued: number;
  usedTokens: number;
  maxTotalTokens: number;
}

const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 20, 30, 60];
const ITL_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8];

type Child = { inc(v?: number): void };
type Observer = { observe(v: number): void };

export class WorkerMetrics {
  readonly registry = new Registry();
  readonly promptTokens: Child;
  readonly generationTokens: Child;
  readonly cachedTokens: Child;
  readonly requests: Child;
  readonly aborted: Child;
  readonly ttft: Observer;
  readonly itl: Observer;
  readonly e2e: Observer;

  constructor(modelName: string, load: () => LoadSnapshot) {
    const r = this.registry;
    const labelNames = ['model_name'] as const;
    const labels = { model_name: modelName };
    const counter = (name: string, help: string) => new Counter({ name, help, labelNames, registers: [r] }).labels(labels);
    const histogram = (name: string, help: string, buckets: number[]) => new Histogram({ name, help, labelNames, buckets, registers: [r] }).labels(labels);
    const gauge = (name: string, help: string, read: (s: LoadSnapshot) => number) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers: [r],
        collect() {
          this.set(labels, read(load()));
        },
      });

    this.promptTokens = counter('sglang:prompt_tokens_total', 'Number of prefill tokens processed.');
    this.generationTokens = counter('sglang:generation_tokens_total', 'Number of generation tokens processed.');
    this.cachedTokens = counter('sglang:cached_tokens_total', 'Number of cached prompt tokens.');
    this.requests = counter('sglang:num_requests_total', 'Number of requests processed.');
    this.aborted = counter('sglang:num_aborted_requests_total', 'Number of requests aborted.');
    this.ttft = histogram('sglang:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', LATENCY_BUCKETS);
    this.itl = histogram('sglang:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', ITL_BUCKETS);
    this.e2e = histogram('sglang:e2e_request_latency_seconds', 'Histogram of End-to-end request latency in seconds', LATENCY_BUCKETS);
    gauge('sglang:num_running_reqs', 'The number of running requests.', (s) => s.running);
    gauge('sglang:num_queue_reqs', 'The number of requests in the waiting queue.', (s) => s.queued);
    gauge('sglang:num_used_tokens', 'The number of used tokens.', (s) => s.usedTokens);
    gauge('sglang:token_usage', 'The token usage.', (s) => (s.maxTotalTokens > 0 ? s.usedTokens / s.maxTotalTokens : 0));
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
