// A request killed mid-stream and migrated is one trace at a real OTLP/HTTP
// receiver (decoded from protobuf and from JSON): the server span under the client's, the logical
// generation under it, two attempt spans on different workers, the continuation linked to the
// failed attempt, the attributes; and each worker received its attempt span's traceparent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../../bench/otlp-receiver.ts';
import { waitUntil } from '../router/harness/procs.ts';
import { RecordingProxy } from './recording-proxy.ts';

const KIND = { internal: 1, server: 2, client: 3 };
const PROMPT = Array.from({ length: 16 }, (_, i) => 1000 + i * 7);
const BUDGET = 60;

let cluster: SimCluster;
let proxies: RecordingProxy[];
let receiver: OtlpReceiver;
const saved = { ...process.env };

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 4 });
  proxies = await Promise.all(cluster.workers().map((w) => new RecordingProxy(w.url).start()));
  process.env.OTEL_BSP_SCHEDULE_DELAY = '50';
});

afterAll(async () => {
  process.env = saved;
  await Promise.all((proxies ?? []).map((p) => p.close()));
  await cluster?.stop();
  await receiver?.close();
});

function hex(n: number, seed: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += ((seed * 31 + i * 7) % 16).toString(16);
  return s;
}

describe.each(['http/protobuf', 'http/json'] as const)('a migrated request exported as %s', (protocol) => {
  let router: RouterHandle;

  beforeAll(async () => {
    process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = protocol;
    router = await startRouter({ port: 0, workers: proxies.map((p) => p.url), otlpEndpoint: receiver.url, healthIntervalMs: 100, interTokenTimeoutMs: 2000, benchMs: 100, circuitOpenMs: 100 });
    await waitUntil(() => router.workers().every((w) => w.health === 'healthy' && w.model_path !== null), 10_000, 'healthy, probed workers');
  });

  afterAll(async () => {
    await router?.close();
  });

  it('is one trace: server, logical, two linked attempts on different workers, and the workers got each attempt\'s traceparent', async () => {
    const seed = protocol === 'http/json' ? 2 : 1;
    const clientTrace = hex(32, seed);
    const clientSpan = hex(16, seed + 5);
    const id = `otel-${seed}`;
    let killed = -1;
    const res = await fetch(`${router.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id, traceparent: `00-${clientTrace}-${clientSpan}-01`, tracestate: 'vendor=abc' },
      body: JSON.stringify({ input_ids: PROMPT, sampling_params: { max_new_tokens: BUDGET, ignore_eos: true, temperature: 0 }, stream: true }),
    });
    expect(res.status).toBe(200);
    // Read the stream; after the 10th frame, SIGKILL the worker serving it.
    const decoder = new TextDecoder();
    let pending = '';
    let frames = 0;
    let last: { meta_info: { completion_tokens: number; finish_reason: { type: string } | null } } | null = null;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = pending.indexOf('\n\n')) >= 0) {
        const frame = pending.slice(0, i);
        pending = pending.slice(i + 2);
        if (frame === 'data: [DONE]') continue;
        last = JSON.parse(frame.slice(6));
        if (++frames === 10 && killed < 0) {
          killed = proxies.findIndex((p) => p.received.some((r) => r.rid?.startsWith(`${id}~`)));
          expect(killed).toBeGreaterThanOrEqual(0);
          await cluster.kill(killed);
        }
      }
    }
    expect(killed).toBeGreaterThanOrEqual(0);
    expect(last?.meta_info.completion_tokens).toBe(BUDGET);
    expect(last?.meta_info.finish_reason?.type).toBe('length');

    await waitUntil(() => receiver.spans.filter((s) => s.traceId === clientTrace).length >= 4, 10_000, 'the four spans');
    const spans = receiver.spans.filter((s) => s.traceId === clientTrace);
    expect(spans).toHaveLength(4);
    expect(spans.every((s) => s.encoding === (protocol === 'http/json' ? 'json' : 'protobuf'))).toBe(true);
    expect(spans[0]!.resource['service.name']).toBe('baton');

    const server = one(spans, (s) => s.kind === KIND.server);
    const logical = one(spans, (s) => s.kind === KIND.internal);
    const attempts = spans.filter((s) => s.kind === KIND.client).sort((a, b) => Number(a.attributes['baton.attempt']) - Number(b.attributes['baton.attempt']));
    expect(attempts).toHaveLength(2);
    const [a0, a1] = attempts as [ReceivedSpan, ReceivedSpan];

    // The tree: the client's span → server → logical → attempts.
    expect(server.parentSpanId).toBe(clientSpan);
    expect(server.name).toBe('POST /generate');
    expect(server.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.route': '/generate', 'baton.request.id': id });
    expect(server.traceState).toBe('vendor=abc');
    expect(logical.parentSpanId).toBe(server.spanId);
    expect(a0.parentSpanId).toBe(logical.spanId);
    expect(a1.parentSpanId).toBe(logical.spanId);

    // The logical generation (GenAI semantic conventions + Baton's admission).
    expect(logical.name).toBe('text_completion baton-sim');
    expect(logical.attributes).toMatchObject({
      'gen_ai.operation.name': 'text_completion',
      'gen_ai.provider.name': 'sglang',
      'gen_ai.request.model': 'baton-sim',
      'gen_ai.request.max_tokens': BUDGET,
      'gen_ai.response.finish_reasons': ['length'],
      'gen_ai.usage.input_tokens': PROMPT.length,
      'gen_ai.usage.output_tokens': BUDGET,
      'gen_ai.response.id': id,
      'baton.admission.admitted': true,
      'baton.attempts': 2,
      'baton.migrations': 1,
      'baton.outcome': 'finished',
    });
    expect(logical.attributes['baton.admission.reason']).toBeUndefined();
    const ttft = logical.attributes['gen_ai.response.time_to_first_chunk'] as number;
    expect(ttft).toBeGreaterThan(0);
    expect(ttft).toBeLessThan(5);

    // Two attempts on different workers; the continuation linked to the failed one.
    const portOf = (s: ReceivedSpan) => s.attributes['server.port'];
    expect(portOf(a0)).toBe(proxies[killed]!.port);
    expect(portOf(a1)).toBe(proxies[1 - killed]!.port);
    expect(a0.attributes['server.address']).toBe('127.0.0.1');
    const carried = a0.attributes['baton.tokens'] as number;
    expect(carried).toBeGreaterThanOrEqual(9);
    expect(a0.attributes).toMatchObject({ 'baton.attempt': 0, 'baton.outcome': 'failed', 'error.type': 'stream_broken', 'baton.replayed_tokens': 0, 'baton.budget_before': BUDGET, 'baton.budget_after': BUDGET - carried, 'http.request.method': 'POST' });
    expect(a0.attributes['http.request.resend_count']).toBeUndefined();
    expect(a0.status.code).toBe(2);
    expect(a0.events.map((e) => e.name)).toEqual(['baton.first_token', 'baton.failure']);
    expect(a0.events[1]!.attributes['error.type']).toBe('stream_broken');
    expect(a1.attributes).toMatchObject({ 'baton.attempt': 1, 'http.request.resend_count': 1, 'baton.outcome': 'finished', 'baton.replayed_tokens': carried, 'baton.prompt_tokens_sent': PROMPT.length + carried, 'baton.budget_before': BUDGET - carried, 'baton.budget_after': 0, 'baton.tokens': BUDGET - carried, 'baton.finish_reason': 'length' });
    expect(a1.attributes['error.type']).toBeUndefined();
    expect(a1.events.map((e) => e.name)).toEqual(['baton.first_token']);
    expect(a1.links).toHaveLength(1);
    expect(a1.links[0]).toMatchObject({ traceId: clientTrace, spanId: a0.spanId, attributes: { 'baton.migration.reason': 'stream_broken', 'baton.migration.tokens_carried': carried, 'baton.migration.ongoing': true } });
    expect(a0.links).toHaveLength(0);

    // Times nest: the attempts inside the logical span inside the server span, in order.
    expect(server.startNs <= logical.startNs && logical.startNs <= a0.startNs).toBe(true);
    expect(a0.startNs < a0.endNs && a0.endNs <= a1.startNs && a1.endNs <= logical.endNs && logical.endNs <= server.endNs).toBe(true);

    // What each worker received: its attempt span's context.
    const rows = router.traceRows({ request: id });
    const rid = (k: number) => rows.find((r) => r.kind === 'attempt' && r.attempt === k)!;
    const got0 = proxies[killed]!.received.find((r) => r.rid === (rid(0) as { rid: string }).rid)!;
    const got1 = proxies[1 - killed]!.received.find((r) => r.rid === (rid(1) as { rid: string }).rid)!;
    expect(got0.traceparent).toBe(`00-${clientTrace}-${a0.spanId}-01`);
    expect(got1.traceparent).toBe(`00-${clientTrace}-${a1.spanId}-01`);
    expect(got0.tracestate).toBe('vendor=abc');
    expect(got1.tracestate).toBe('vendor=abc');

    // Baton's own outputs carry the trace id.
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.trace_id === clientTrace)).toBe(true);

    // Back to two workers for the next encoding.
    await cluster.restart(killed);
    await waitUntil(() => router.workers().every((w) => w.health === 'healthy'), 15_000, 'the restarted worker');
  });

  it('traces a passed-through batch too, and its worker gets the attempt\'s traceparent', async () => {
    const id = `otel-batch-${protocol === 'http/json' ? 2 : 1}`;
    const res = await fetch(`${router.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ input_ids: [PROMPT, PROMPT.slice(1)], sampling_params: { max_new_tokens: 4, ignore_eos: true } }),
    });
    expect(res.status).toBe(200);
    await res.text();
    const rows = router.traceRows({ request: id });
    const traceId = rows[0]?.trace_id as string;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    await waitUntil(() => receiver.spans.filter((s) => s.traceId === traceId).length >= 3, 10_000, 'the batch\'s spans');
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    const attempt = one(spans, (s) => s.kind === KIND.client);
    const logical = one(spans, (s) => s.kind === KIND.internal);
    expect(logical.attributes).toMatchObject({ 'baton.admission.admitted': false, 'baton.admission.reason': 'batch' });
    const got = proxies.flatMap((p) => p.received).filter((r) => r.traceparent?.includes(traceId));
    expect(got.map((r) => r.traceparent)).toEqual([`00-${traceId}-${attempt.spanId}-01`]);
  });
});

function one(spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter(pred);
  expect(found).toHaveLength(1);
  return found[0]!;
}
