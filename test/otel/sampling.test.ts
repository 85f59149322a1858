// Telemetry + tracing without a server: the head sampler's decision, requests kept at a failure
// when the sampler dropped them, duplicate request ids in flight, and tracing off.
import { describe, expect, it } from 'vitest';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { EventBus } from '../../router/events/bus.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { RouterMetrics } from '../../router/metrics.ts';
import { TraceStore } from '../../router/trace/store.ts';
import { Telemetry, type AttemptRowIn, type InboundTrace, type ProgressSource, type RequestRowIn } from '../../router/telemetry.ts';
import { Tracing } from '../../router/otel/tracing.ts';
import type { SamplerName } from '../../router/otel/settings.ts';
import type { ErrorKind } from '../../router/trace/row.ts';

function setup(samplerName: SamplerName | null, samplerArg: number | null = null) {
  const exporter = new InMemorySpanExporter();
  const telemetry = new Telemetry(new EventBus(), new TraceStore(1000, null), new RouterMetrics(false), 0);
  const tracing = samplerName === null ? null : new Tracing(
    { url: 'http://127.0.0.1:9/v1/traces', urlFrom: 'test', protocol: 'http/protobuf', samplerName, samplerArg, keepFailed: !samplerName.endsWith('always_off') },
    { exporter, log: () => undefined },
  );
  telemetry.tracing = tracing;
  const events: BatonEvent[] = [];
  telemetry.bus.subscribe((e) => events.push(e));
  const spans = async (): Promise<ReadableSpan[]> => {
    await tracing?.forceFlush();
    return exporter.getFinishedSpans();
  };
  return { telemetry, tracing, spans, events };
}

const src = (id: string, trace: InboundTrace | null = null): ProgressSource => ({ id, trace, attemptIndex: () => 0, progress: () => ({ tokens: 0, completion: 0 }) });

let clock = 1_800_000_000_000;

function attemptRow(id: string, attempt: number, rid: string, worker: string, o: { tokens: number; replayed: number; fail?: ErrorKind }): AttemptRowIn {
  const started = clock;
  clock += 50;
  return {
    kind: 'attempt', format: 'sglang', request_id: id, attempt, rid, worker, started_at: started, ended_at: clock, ttft_ms: 5, prompt_tokens_sent: 4 + o.replayed,
    replayed_tokens: o.replayed, tokens: o.tokens, budget_before: 10 - o.replayed, budget_after: 10 - o.replayed - o.tokens, cached_tokens: 0,
    outcome: o.fail ? 'failed' : 'finished', error_kind: o.fail ?? null, error: o.fail ? 'socket closed' : null, error_evidence: null, finish_reason: o.fail ? null : 'length',
  };
}

function requestRow(id: string, attempts: number, outcome: 'finished' | 'failed' = 'finished'): RequestRowIn {
  return {
    kind: 'request', format: 'sglang', request_id: id, attempts, migrations: Math.max(0, attempts - 1), admitted: true, admission_reason: null, prompt_tokens: 4,
    completion_tokens: outcome === 'finished' ? 10 : 0, cached_tokens: 0, finish_reason: outcome === 'finished' ? 'length' : null, outcome,
    duration_ms: 100, started_at: clock - 100, ended_at: clock, stream: true, max_new_tokens: 10, error: outcome === 'failed' ? 'no healthy worker available' : null,
  };
}

const admitted = { admitted: true, reason: null, stream: true, prompt_tokens: 4, max_new_tokens: 10 };

/** One attempt that finishes. Returns the headers the attempt was given and the rows. */
function runOk(t: Telemetry, s: ProgressSource) {
  t.requestAdmitted(s, { request_id: s.id, ...admitted });
  const h = t.attemptStarted({ request_id: s.id, attempt: 0, rid: `${s.id}~m0`, worker: 'http://w0:1', replayed_tokens: 0, budget_before: 10 });
  t.firstToken(s.id, 0, 5, 5);
  const a = attemptRow(s.id, 0, `${s.id}~m0`, 'http://w0:1', { tokens: 10, replayed: 0 });
  t.attemptEnded(a);
  const r = requestRow(s.id, 1);
  t.requestFinished(s, r, null, false);
  return { headers: [h], rows: [a, r] };
}

/** Attempt 0 breaks after 4 tokens on w0; attempt 1 finishes on w1. */
function runMigrated(t: Telemetry, s: ProgressSource) {
  t.requestAdmitted(s, { request_id: s.id, ...admitted });
  const h0 = t.attemptStarted({ request_id: s.id, attempt: 0, rid: `${s.id}~m0`, worker: 'http://w0:1', replayed_tokens: 0, budget_before: 10 });
  t.firstToken(s.id, 0, 5, 5);
  const a0 = attemptRow(s.id, 0, `${s.id}~m0`, 'http://w0:1', { tokens: 4, replayed: 0, fail: 'stream_broken' });
  t.attemptEnded(a0);
  t.migrated(s.id, 'http://w0:1', 'http://w1:1', 4, 1, 'stream_broken', true, 4);
  const h1 = t.attemptStarted({ request_id: s.id, attempt: 1, rid: `${s.id}~m1`, worker: 'http://w1:1', replayed_tokens: 4, budget_before: 6 });
  t.firstToken(s.id, 1, 5, null);
  const a1 = attemptRow(s.id, 1, `${s.id}~m1`, 'http://w1:1', { tokens: 6, replayed: 4 });
  t.attemptEnded(a1);
  const r = requestRow(s.id, 2);
  t.requestFinished(s, r, clock, false);
  return { headers: [h0, h1], rows: [a0, a1, r] };
}

const traceIdOf = (h: Record<string, string> | null) => h?.traceparent?.split('-')[1] ?? null;
const spanIdOf = (h: Record<string, string> | null) => h?.traceparent?.split('-')[2] ?? null;
const byKind = (spans: ReadableSpan[], kind: SpanKind) => spans.filter((s) => s.kind === kind);

describe('head sampling and failures kept at the end', () => {
  it('sampled in: every attempt sends its span context, the rows and the event carry the trace id', async () => {
    const { telemetry, tracing, spans, events } = setup('parentbased_always_on');
    const run = runMigrated(telemetry, src('a'));
    const traceId = traceIdOf(run.headers[0]!);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceIdOf(run.headers[1]!)).toBe(traceId);
    expect(run.rows.map((r) => r.trace_id)).toEqual([traceId, traceId, traceId]);
    expect(events.find((e) => e.type === 'request_admitted')).toMatchObject({ trace_id: traceId });
    const got = await spans();
    expect(got).toHaveLength(4);
    const attempts = byKind(got, SpanKind.CLIENT);
    expect(attempts.map((s) => s.spanContext().spanId).sort()).toEqual([spanIdOf(run.headers[0]!), spanIdOf(run.headers[1]!)].sort());
    expect(tracing!.liveRequests()).toBe(0);
  });

  it('sampled out: nothing is sent or kept for a request that finishes; a migrated one is kept from its failure on', async () => {
    const { telemetry, tracing, spans, events } = setup('parentbased_traceidratio', 0);
    const ok = runOk(telemetry, src('ok'));
    expect(ok.headers).toEqual([null]);
    expect(ok.rows.map((r) => r.trace_id)).toEqual([null, null]);
    expect(await spans()).toHaveLength(0);
    expect(events.find((e) => e.type === 'request_admitted')).toMatchObject({ trace_id: null });

    const mig = runMigrated(telemetry, src('mig'));
    // Attempt 0 was not traced when it was sent; the continuation is.
    expect(mig.headers[0]).toBeNull();
    const traceId = traceIdOf(mig.headers[1]!);
    expect(mig.rows.map((r) => r.trace_id)).toEqual([traceId, traceId, traceId]);
    const got = await spans();
    expect(got).toHaveLength(4);
    const [server] = byKind(got, SpanKind.SERVER);
    const [logical] = byKind(got, SpanKind.INTERNAL);
    const attempts = byKind(got, SpanKind.CLIENT).sort((a, b) => Number(a.attributes['baton.attempt']) - Number(b.attributes['baton.attempt']));
    expect(server!.spanContext().traceId).toBe(traceId);
    expect(logical!.parentSpanContext?.spanId).toBe(server!.spanContext().spanId);
    expect(attempts[1]!.spanContext().spanId).toBe(spanIdOf(mig.headers[1]!));
    expect(attempts[1]!.links[0]!.context.spanId).toBe(attempts[0]!.spanContext().spanId);
    expect(attempts[1]!.links[0]!.attributes).toMatchObject({ 'baton.migration.reason': 'stream_broken', 'baton.migration.tokens_carried': 4 });
    expect(attempts[0]!.attributes['error.type']).toBe('stream_broken');
    expect(tracing!.liveRequests()).toBe(0);
  });

  it('sampled out: a request that failed before any attempt is kept (no worker)', async () => {
    const { telemetry, spans } = setup('traceidratio', 0);
    const s = src('nw');
    telemetry.requestAdmitted(s, { request_id: 'nw', ...admitted });
    const r = requestRow('nw', 0, 'failed');
    telemetry.requestFinished(s, r, null, false);
    expect(r.trace_id).toMatch(/^[0-9a-f]{32}$/);
    const got = await spans();
    expect(got.map((x) => x.kind).sort()).toEqual([SpanKind.INTERNAL, SpanKind.SERVER]);
    expect(got.every((x) => x.attributes['error.type'] === 'no_worker')).toBe(true);
  });

  it("honours the client's sampled flag, and keeps its trace id for a failure it did not sample", async () => {
    const { telemetry, spans } = setup('parentbased_traceidratio', 0);
    const sampled = runOk(telemetry, src('p1', { traceparent: '00-11111111111111111111111111111111-2222222222222222-01', tracestate: 'k=v' }));
    expect(sampled.headers[0]).toMatchObject({ tracestate: 'k=v' });
    expect(traceIdOf(sampled.headers[0]!)).toBe('11111111111111111111111111111111');
    const unsampled = runOk(telemetry, src('p0', { traceparent: '00-33333333333333333333333333333333-4444444444444444-00' }));
    expect(unsampled.headers[0]).toBeNull();
    const failed = runMigrated(telemetry, src('p0f', { traceparent: '00-55555555555555555555555555555555-6666666666666666-00' }));
    expect(failed.rows.map((r) => r.trace_id)).toEqual(Array(3).fill('55555555555555555555555555555555'));
    const got = await spans();
    const server = byKind(got, SpanKind.SERVER).find((x) => x.spanContext().traceId === '55555555555555555555555555555555')!;
    expect(server.parentSpanContext?.spanId).toBe('6666666666666666');
    expect(got.filter((x) => x.spanContext().traceId === '33333333333333333333333333333333')).toHaveLength(0);
  });

  it('always_off: nothing at all, failures included', async () => {
    const { telemetry, spans } = setup('always_off');
    const run = runMigrated(telemetry, src('off'));
    expect(run.headers).toEqual([null, null]);
    expect(run.rows.map((r) => r.trace_id)).toEqual([null, null, null]);
    expect(await spans()).toHaveLength(0);
  });

  it('two requests in flight under one id get a trace each', async () => {
    const { telemetry, tracing, spans } = setup('always_on');
    const a = src('dup');
    const b = src('dup');
    telemetry.requestAdmitted(a, { request_id: 'dup', ...admitted });
    const ha = telemetry.attemptStarted({ request_id: 'dup', attempt: 0, rid: 'dup~m0~a', worker: 'http://w0:1', replayed_tokens: 0, budget_before: 10 });
    telemetry.requestAdmitted(b, { request_id: 'dup', ...admitted });
    const hb = telemetry.attemptStarted({ request_id: 'dup', attempt: 0, rid: 'dup~m0~b', worker: 'http://w1:1', replayed_tokens: 0, budget_before: 10 });
    expect(traceIdOf(ha)).not.toBe(traceIdOf(hb));
    const rb = attemptRow('dup', 0, 'dup~m0~b', 'http://w1:1', { tokens: 10, replayed: 0 });
    telemetry.attemptEnded(rb);
    const ra = attemptRow('dup', 0, 'dup~m0~a', 'http://w0:1', { tokens: 10, replayed: 0 });
    telemetry.attemptEnded(ra);
    const qa = requestRow('dup', 1);
    const qb = requestRow('dup', 1);
    telemetry.requestFinished(b, qb, null, false);
    telemetry.requestFinished(a, qa, null, false);
    expect([ra.trace_id, qa.trace_id]).toEqual([traceIdOf(ha), traceIdOf(ha)]);
    expect([rb.trace_id, qb.trace_id]).toEqual([traceIdOf(hb), traceIdOf(hb)]);
    const got = byKind(await spans(), SpanKind.CLIENT);
    expect(got.find((x) => x.spanContext().traceId === traceIdOf(ha))!.attributes['baton.rid']).toBe('dup~m0~a');
    expect(got.find((x) => x.spanContext().traceId === traceIdOf(hb))!.attributes['baton.rid']).toBe('dup~m0~b');
    expect(tracing!.liveRequests()).toBe(0);
  });

  it('tracing off: no headers, and every row says trace_id null', () => {
    const { telemetry, events } = setup(null);
    const run = runMigrated(telemetry, src('none'));
    expect(run.headers).toEqual([null, null]);
    expect(run.rows.map((r) => r.trace_id)).toEqual([null, null, null]);
    expect(events.find((e) => e.type === 'request_admitted')).toMatchObject({ trace_id: null });
  });
});
