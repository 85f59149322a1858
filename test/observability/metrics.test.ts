// GET /metrics: a strict Prometheus text parse, every family docs/metrics.md lists with its labels,
// and the counters moving by exactly what the trace rows say when a real worker process is
// killed under streams, refuses requests, or cuts streams past --migration-max-seq-len.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';
import { generate, scrape, startStack, until, type Stack } from './harness.ts';
import { histogramCount, total, type Family, type MetricType } from './prom-text.ts';

/** Family → type and label names (besides `le`), as docs/metrics.md lists them. */
const FAMILIES: Record<string, [MetricType, string[]]> = {
  baton_requests_total: ['counter', ['outcome', 'format']],
  baton_attempts_total: ['counter', ['worker', 'outcome']],
  baton_attempts_started_total: ['counter', []],
  baton_migrations_total: ['counter', ['migration_type']],
  baton_migration_duration_seconds: ['histogram', ['outcome']],
  baton_migration_refused_total: ['counter', ['reason']],
  baton_migration_max_seq_len_exceeded_total: ['counter', []],
  baton_migration_exhausted_total: ['counter', []],
  baton_tokens_streamed_total: ['counter', []],
  baton_time_to_first_token_seconds: ['histogram', []],
  baton_inter_token_latency_seconds: ['histogram', []],
  baton_requests_in_flight: ['gauge', []],
  baton_worker_healthy: ['gauge', ['worker']],
  baton_worker_circuit_state: ['gauge', ['worker']],
  baton_worker_in_flight: ['gauge', ['worker']],
  baton_worker_spare_connections: ['gauge', ['worker']],
  baton_continuation_connections_total: ['counter', ['worker', 'source']],
  baton_prompt_tokens_total: ['counter', []],
  baton_prompt_tokens_cached_total: ['counter', []],
  baton_prompt_tokens_recomputed_total: ['counter', []],
  baton_trace_file_errors_total: ['counter', []],
  baton_replica_prefix_pages_total: ['counter', ['way']],
};

let stack: Stack;
const sentIds: string[] = [];

beforeAll(async () => {
  // least_inflight: the refusing-worker case sends six identical prompts at once and needs some
  // of them to reach worker 0; cache_aware (the default) sends them all where the first went.
  stack = await startStack(3, 3, { benchMs: 300, policy: 'least_inflight' });
});
afterAll(async () => {
  await stack?.close();
});

function delta(before: Map<string, Family>, after: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const has = (m: Map<string, Family>) => m.get(name)?.samples.some((s) => s.name === name) ?? false;
  return (has(after) ? total(after, name, labels) : 0) - (has(before) ? total(before, name, labels) : 0);
}

function newRows(router: RouterHandle, ids: string[]): { attempts: AttemptRow[]; requests: RequestRow[] } {
  const set = new Set(ids);
  const rows = router.traceRows().filter((r) => set.has(r.request_id));
  return {
    attempts: rows.filter((r): r is AttemptRow => r.kind === 'attempt'),
    requests: rows.filter((r): r is RequestRow => r.kind === 'request'),
  };
}

describe('/metrics', () => {
  it('parses as Prometheus text with every family, type and label set it should have', async () => {
    await generate(stack.router.url, { id: 'warm-up', stream: true, maxNewTokens: 5 });
    sentIds.push('warm-up');
    const res = await fetch(`${stack.router.url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = await scrape(stack.router.url);
    for (const [name, [type, labels]] of Object.entries(FAMILIES)) {
      const f = families.get(name);
      expect(f, name).toBeDefined();
      expect(f!.type, name).toBe(type);
      expect(f!.help, name).toBeTruthy();
      for (const s of f!.samples) {
        expect(Object.keys(s.labels).filter((k) => k !== 'le').sort(), s.name).toEqual([...labels].sort());
      }
    }
    // Process figures come with the same prefix.
    expect(families.has('baton_process_resident_memory_bytes')).toBe(true);
    for (const name of families.keys()) expect(name.startsWith('baton_'), name).toBe(true);
    // Worker gauges name every worker of the pool, and nothing else.
    const urls = stack.router.workers().map((w) => w.url).sort();
    expect(families.get('baton_worker_healthy')!.samples.map((s) => s.labels.worker).sort()).toEqual(urls);
  });

  it('migration counters move by what the rows say when a worker process is killed mid-stream', async () => {
    const { router, cluster } = stack;
    const before = await scrape(router.url);
    const ids = Array.from({ length: 6 }, (_, i) => `kill-${i}`);
    sentIds.push(...ids);
    const streaming = new Set<string>();
    const off = router.subscribe((e) => {
      if (e.type === 'progress' && e.completion_tokens >= 20) streaming.add(e.request_id);
    });
    const answers = Promise.all(ids.map((id, i) => generate(router.url, { id, stream: i % 2 === 0, maxNewTokens: 400 })));
    await until(() => streaming.size === ids.length, 20_000, 'every request streaming');
    off();
    // Kill the worker process carrying the most attempts.
    const busiest = [...router.workers()].sort((x, y) => y.in_flight - x.in_flight)[0]!;
    const victim = cluster.workers().find((w) => w.url === busiest.url)!;
    await cluster.kill(victim.index);
    await answers;
    const after = await scrape(router.url);
    const { attempts, requests } = newRows(router, ids);
    const migrated = requests.filter((r) => r.migrations > 0);

    expect(busiest.in_flight).toBeGreaterThan(0);
    expect(migrated.length).toBe(busiest.in_flight);
    expect(requests.every((r) => r.outcome === 'finished')).toBe(true);
    expect(delta(before, after, 'baton_migrations_total', { migration_type: 'ongoing_request' })).toBe(migrated.length);
    expect(delta(before, after, 'baton_migrations_total', { migration_type: 'new_request' })).toBe(0);
    expect(histogramCount(after, 'baton_migration_duration_seconds', { outcome: 'success' }) - histogramCount(before, 'baton_migration_duration_seconds', { outcome: 'success' })).toBe(migrated.length);
    expect(delta(before, after, 'baton_attempts_total', { worker: victim.url, outcome: 'failed' })).toBe(migrated.length);
    expect(delta(before, after, 'baton_attempts_started_total')).toBe(attempts.length);
    expect(delta(before, after, 'baton_requests_total', { outcome: 'finished', format: 'sglang' })).toBe(ids.length);
    expect(delta(before, after, 'baton_tokens_streamed_total')).toBe(requests.reduce((s, r) => s + r.completion_tokens, 0));
    expect(delta(before, after, 'baton_prompt_tokens_total')).toBe(requests.reduce((s, r) => s + r.prompt_tokens, 0));
    // Recomputed: what each continuation's worker had to prefill again.
    const recomputed = attempts.filter((a) => a.attempt > 0 && a.ttft_ms !== null).reduce((s, a) => s + a.prompt_tokens_sent - (a.cached_tokens ?? 0), 0);
    expect(recomputed).toBeGreaterThan(0);
    expect(delta(before, after, 'baton_prompt_tokens_recomputed_total')).toBe(recomputed);
    expect(histogramCount(after, 'baton_time_to_first_token_seconds') - histogramCount(before, 'baton_time_to_first_token_seconds')).toBe(ids.length);
    expect(total(after, 'baton_requests_in_flight')).toBe(0);

    // The dead worker shows as unhealthy, then healthy again once restarted.
    const healthy = async () => total(await scrape(router.url), 'baton_worker_healthy', { worker: victim.url });
    await until(async () => (await healthy()) === 0, 10_000, 'the killed worker unhealthy');
    await cluster.restart(victim.index);
    await until(async () => (await healthy()) === 1, 10_000, 'the restarted worker healthy');
  });

  it('a refusing worker makes new_request migrations; a non-migratable request counts its reason', async () => {
    const { router, cluster } = stack;
    const before = await scrape(router.url);
    await cluster.fault(0, { kind: 'reject' });
    const ids = Array.from({ length: 6 }, (_, i) => `reject-${i}`);
    sentIds.push(...ids, 'penalty');
    await Promise.all([
      ...ids.map((id) => generate(router.url, { id, stream: false, maxNewTokens: 10 })),
      generate(router.url, { id: 'penalty', stream: false, maxNewTokens: 10, sampling: { frequency_penalty: 0.5 } }),
    ]);
    await cluster.fault(0, { kind: 'clear' });
    const after = await scrape(router.url);
    const { requests } = newRows(router, ids);
    const movedBeforeAnyToken = requests.filter((r) => r.migrations > 0);
    expect(movedBeforeAnyToken.length).toBeGreaterThan(0);
    expect(delta(before, after, 'baton_migrations_total', { migration_type: 'new_request' })).toBe(movedBeforeAnyToken.reduce((s, r) => s + r.migrations, 0));
    expect(delta(before, after, 'baton_migrations_total', { migration_type: 'ongoing_request' })).toBe(0);
    expect(delta(before, after, 'baton_migration_refused_total', { reason: 'frequency_penalty' })).toBe(1);
    expect(delta(before, after, 'baton_attempts_total', { worker: cluster.workers()[0]!.url, outcome: 'failed' })).toBeGreaterThan(0);
  });

  it('counts a migration stopped by --migration-max-seq-len', async () => {
    const { cluster } = stack;
    const limited = await startRouter({ port: 0, workers: cluster.workers().map((w) => w.url), healthIntervalMs: 60_000, migrationMaxSeqLen: 40 });
    try {
      for (const w of cluster.workers()) await cluster.fault(w.index, { kind: 'reset', afterTokens: 30 });
      const before = await scrape(limited.url);
      // 16 prompt tokens + 30 produced > 40: the continuation may not be made.
      const answer = await generate(limited.url, { id: 'too-long', stream: true, maxNewTokens: 100, promptLength: 16 });
      const after = await scrape(limited.url);
      expect(answer.error || answer.status !== 200).toBe(true);
      expect(delta(before, after, 'baton_migration_max_seq_len_exceeded_total')).toBe(1);
      expect(delta(before, after, 'baton_migrations_total')).toBe(0);
      expect(delta(before, after, 'baton_requests_total', { outcome: 'failed', format: 'sglang' })).toBe(1);
    } finally {
      for (const w of cluster.workers()) await cluster.fault(w.index, { kind: 'clear' });
      await limited.close();
    }
  });

  it('carries no request id in any label', async () => {
    const text = await (await fetch(`${stack.router.url}/metrics`)).text();
    expect(sentIds.length).toBeGreaterThan(10);
    for (const id of sentIds) expect(text.includes(`"${id}"`), id).toBe(false);
    for (const f of (await scrape(stack.router.url)).values()) {
      for (const s of f.samples) {
        for (const [k, v] of Object.entries(s.labels)) expect(['outcome', 'format', 'worker', 'migration_type', 'reason', 'le', 'version', 'major', 'minor', 'patch', 'space', 'kind', 'type', 'source'], `${s.name}{${k}=${v}}`).toContain(k);
      }
    }
  });
});
