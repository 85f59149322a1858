// The collector goes down mid-run: no request is slowed or lost, what waits for export stays
// within the batch processor's bound (the rest is dropped), and export resumes when it returns.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../../bench/otlp-receiver.ts';
import { generate } from '../observability/harness.ts';
import { waitUntil } from '../router/harness/procs.ts';

const QUEUE = 64;
const BATCH = 16;
const TOKENS = 24;

let cluster: SimCluster;
let receiver: OtlpReceiver;
let router: RouterHandle;
const saved = { ...process.env };

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 1 });
  Object.assign(process.env, {
    OTEL_BSP_MAX_QUEUE_SIZE: String(QUEUE),
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(BATCH),
    OTEL_BSP_SCHEDULE_DELAY: '20',
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '500',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
  });
  router = await startRouter({ port: 0, workers: cluster.workers().map((w) => w.url), otlpEndpoint: receiver.url, healthIntervalMs: 200 });
  await waitUntil(() => router.workers().every((w) => w.health === 'healthy'), 10_000, 'healthy workers');
});

afterAll(async () => {
  process.env = saved;
  await router?.close();
  await cluster?.stop();
  await receiver?.close();
});

/** `n` requests, `concurrency` at a time; each one's duration (ms) and whether it got every token. */
async function load(prefix: string, n: number, concurrency: number): Promise<{ ms: number[]; complete: number }> {
  const ms: number[] = [];
  let complete = 0;
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      const i = next++;
      const t = performance.now();
      const a = await generate(router.url, { id: `${prefix}-${i}`, stream: true, maxNewTokens: TOKENS });
      ms.push(performance.now() - t);
      if (a.status === 200 && !a.error && a.tokens === TOKENS) complete++;
    }
  }));
  return { ms, complete };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
/** Spans of the requests whose ids start with `prefix-` (the logical span names it as gen_ai.response.id). */
const spansOf = (prefix: string) => receiver.spans.filter((s) => String(s.attributes['baton.request.id'] ?? s.attributes['gen_ai.response.id'] ?? '').startsWith(`${prefix}-`)).length;

describe('the collector goes down mid-run', () => {
  it('slows and loses no request, keeps at most the queue, and exports again when it returns', async () => {
    // Warm up, then the baseline with the collector up: every request's three spans arrive.
    await load('warm', 30, 6);
    const up = await load('up', 60, 6);
    expect(up.complete).toBe(60);
    await waitUntil(() => spansOf('up') === 60 * 3, 10_000, 'the baseline spans');

    await receiver.close();
    const down = await load('down', 150, 6);
    // No request lost, none slowed: the export path never waits on a request's path.
    expect(down.complete).toBe(150);
    expect(median(down.ms)).toBeLessThan(median(up.ms) * 1.5 + 15);
    // The router is not holding the outage's spans: 450 were made, the queue keeps at most 64.
    const rows = router.traceRows({ kind: 'request' }).filter((r) => r.request_id.startsWith('down-'));
    expect(rows).toHaveLength(150);
    expect(rows.every((r) => typeof r.trace_id === 'string')).toBe(true);

    await receiver.reopen();
    const back = await load('back', 30, 6);
    expect(back.complete).toBe(30);
    await waitUntil(() => spansOf('back') === 30 * 3, 15_000, 'spans after the collector came back');
    // What reached the collector of the outage's 450 spans is at most what the queue held plus
    // the batch that was being retried: everything else was dropped, not kept in memory.
    expect(spansOf('down')).toBeLessThanOrEqual(QUEUE + BATCH);
  });
});
