// OpenTelemetry traces of Baton's requests (docs/tracing.md). Telemetry (router/telemetry.ts)
// hands over the facts it is told anyway: a request admitted, an attempt started, its first
// token, an attempt ended (its trace row), a migration, the request finished (its row).
//
// Nothing here runs per token. While a request is in flight only a few numbers are kept per
// attempt (a span id, performance.now() readings); the spans are built when the request ends,
// with the times recorded on the way. That is what lets the decision to keep a request wait for
// its end: a request the head sampler dropped is still exported, rebuilt from its trace rows,
// when one of its attempts failed. An attempt's span id is chosen when the attempt starts,
// because the worker must be sent it (traceparent) long before the span is built.
//
// The finished spans are the SDK's ReadableSpan, built directly (every field is known at the
// end: there is no live span to record into, so the SDK's Tracer would only add its per-span
// bookkeeping), and handed to the SDK's BatchSpanProcessor (bounded queue, OTEL_BSP_*) in front
// of the official OTLP/HTTP exporter (protobuf or JSON). A collector that is down or slow costs
// dropped spans, never a request's time: nothing on a request's path waits for an export.
//
// Functions here create no closures per request: under tsx (bin/baton.js) each closure created
// costs a defineProperty (esbuild's keepNames), which shows in the bench.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type HrTime, type Link, type SpanContext, type SpanStatus } from '@opentelemetry/api';
import { ExportResultCode, TraceState, hrTimeDuration, millisToHrTime, parseTraceParent, type ExportResult, type InstrumentationScope } from '@opentelemetry/core';
import { defaultResource, detectResources, envDetector, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  RandomIdGenerator,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type TimedEvent,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { InboundTrace, ProgressSource } from '../telemetry.ts';
import type { AttemptRow, ErrorKind, RequestRow } from '../trace/row.ts';
import type { WorkerInfo } from '../events/types.ts';
import type { SamplerName, TracingSettings } from './settings.ts';

/** What telemetry is told when an attempt starts (the attempt_started event's facts). */
export interface AttemptStart {
  request_id: string;
  attempt: number;
  rid: string;
  worker: string;
  replayed_tokens: number;
  budget_before: number | null;
}

/**
 * A wire format as the spans tell it (formats/registry.ts hands them over through index.ts):
 * `workers`, the name a worker's `format` says and gen_ai.provider.name; `generatePath`, the
 * attempt span's url.full and name. The first of the list is the format a worker not yet probed
 * is taken to speak.
 */
export interface TracedFormat {
  readonly workers: string;
  readonly generatePath: string;
}
/** The router's own route when the inbound request did not say (the server span). */
const ROUTE = '/generate';
/** Failures that are the request's own (4xx-like): the server span is not an error for them. */
const CLIENT_FAULTS: ReadonlySet<string> = new Set<ErrorKind>(['http_4xx', 'validation', 'worker_abort', 'client_cancel']);
/** Text that comes from clients or workers (ids, error messages) is cut to this many characters. */
const MAX_TEXT = 1024;
const SCOPE: InstrumentationScope = { name: 'baton' };
const NO_LINKS: Link[] = [];
const NO_EVENTS: TimedEvent[] = [];
const UNSET: SpanStatus = { code: SpanStatusCode.UNSET };

function buildSampler(name: SamplerName, arg: number | null): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(arg ?? 1);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(arg ?? 1) });
  }
}

/** Counts what was exported, and says once (not per batch) when export starts and stops failing. */
export class WatchedExporter implements SpanExporter {
  exportedSpans = 0;
  failedSpans = 0;
  private failing = false;

  constructor(
    private readonly inner: SpanExporter,
    private readonly url: string,
    private readonly log: (line: string) => void,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        this.exportedSpans += spans.length;
        if (this.failing) this.log(`baton: tracing: export to ${this.url} works again`);
        this.failing = false;
      } else {
        this.failedSpans += spans.length;
        if (!this.failing) this.log(`baton: tracing: export to ${this.url} failed (${result.error?.message ?? 'unknown error'}); spans are dropped until it answers`);
        this.failing = true;
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve();
  }
}

/** A finished span, as the SDK's processors and exporters read one. */
class FinishedSpan implements ReadableSpan {
  readonly ended = true;
  readonly duration: HrTime;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;

  constructor(
    private readonly context: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly name: string,
    readonly kind: SpanKind,
    readonly startTime: HrTime,
    readonly endTime: HrTime,
    readonly attributes: Attributes,
    readonly links: Link[],
    readonly events: TimedEvent[],
    readonly status: SpanStatus,
    readonly resource: Resource,
    readonly instrumentationScope: InstrumentationScope,
  ) {
    this.duration = hrTimeDuration(startTime, endTime);
  }

  spanContext(): SpanContext {
    return this.context;
  }
}

interface Migration {
  reason: string;
  tokens: number;
  ongoing: boolean;
}

/** One attempt while its request is in flight. Times: performance.now(), or epoch ms from a row. */
interface AttemptTrace {
  index: number;
  rid: string;
  worker: string;
  spanId: string;
  start: number;
  end: number | null;
  firstTokenAt: number | null;
  row: AttemptRow | null;
  /** Why this continuation exists (the link to the attempt before it). */
  migration: Migration | null;
}

interface RequestTrace {
  id: string;
  /** The request's ProgressSource; null for one kept at a failure whose source was not found. */
  src: ProgressSource | null;
  traceId: string;
  /** The client's span, when it sent a traceparent. */
  parent: SpanContext | null;
  method: string | undefined;
  route: string | undefined;
  /** performance.now() at admission; null for a request kept at a failure (its row's times). */
  start: number | null;
  firstTokenAt: number | null;
  attempts: AttemptTrace[];
  open: AttemptTrace | null;
  nextAttempt: number;
  pendingMigration: Migration | null;
}

interface WorkerFacts {
  model: string | null;
  format: string | null;
  address: string;
  port: number;
}

function parseParent(t: InboundTrace | null | undefined): SpanContext | null {
  if (!t || typeof t.traceparent !== 'string') return null;
  const sc = parseTraceParent(t.traceparent);
  if (!sc || !trace.isSpanContextValid(sc)) return null;
  sc.isRemote = true;
  if (typeof t.tracestate === 'string' && t.tracestate !== '') sc.traceState = new TraceState(t.tracestate);
  return sc;
}

function text(s: string): string {
  return s.length <= MAX_TEXT ? s : s.slice(0, MAX_TEXT);
}

function put(attrs: Attributes, key: string, v: string | number | boolean | string[] | null | undefined): void {
  if (v !== null && v !== undefined) attrs[key] = typeof v === 'string' ? text(v) : v;
}

/** A time recorded on the way (performance.now(), or epoch ms from a row) as an epoch HrTime. */
function hr(t: number, anchor: number): HrTime {
  // One anchor per request keeps its spans nested exactly; no uptime reaches 1e12 ms.
  return millisToHrTime(t < 1e12 ? t + anchor : t);
}

/** The last attempt of `rt` whose row names a failure kind, or null. */
function lastFailureKind(rt: RequestTrace): string | null {
  let kind: string | null = null;
  for (const a of rt.attempts) if (a.row !== null && a.row.error_kind !== null) kind = a.row.error_kind;
  return kind;
}

export class Tracing {
  readonly exporter: WatchedExporter;
  private readonly processor: BatchSpanProcessor;
  private readonly resource: Resource;
  private readonly ids = new RandomIdGenerator();
  private readonly sampler: Sampler;
  /** The sampler's decision needs no call: always_on, or parentbased_always_on (the default). */
  private readonly samplesAll: boolean;
  private readonly parentDecides: boolean;
  private readonly keepFailed: boolean;
  /** Requests being traced, by logical id (ids may repeat: clients share correlation headers). */
  private readonly live = new Map<string, RequestTrace[]>();
  private readonly workers = new Map<string, WorkerFacts>();
  private closed: Promise<void> | null = null;
  /** The generate path of each wire format, by name (TracedFormat). */
  private readonly generatePaths: ReadonlyMap<string, string>;
  /** The format a worker not yet probed is taken to speak (none: no provider is named). */
  private readonly defaultFormat: string | undefined;

  constructor(readonly settings: TracingSettings, opts: { log?: (line: string) => void; exporter?: SpanExporter; formats?: readonly TracedFormat[] } = {}) {
    const formats = opts.formats ?? [];
    this.generatePaths = new Map(formats.map((f) => [f.workers, f.generatePath]));
    this.defaultFormat = formats[0]?.workers;
    const log = opts.log ?? ((line: string) => console.error(line));
    this.sampler = buildSampler(settings.samplerName, settings.samplerArg);
    this.samplesAll = settings.samplerName === 'always_on';
    this.parentDecides = settings.samplerName === 'parentbased_always_on';
    this.keepFailed = settings.keepFailed;
    const inner = opts.exporter ?? (settings.protocol === 'http/json' ? new OtlpJsonExporter({ url: settings.url }) : new OtlpProtoExporter({ url: settings.url }));
    this.exporter = new WatchedExporter(inner, settings.url, log);
    // service.name defaults to baton; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
    this.resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'baton' }))
      .merge(detectResources({ detectors: [envDetector] }));
    this.processor = new BatchSpanProcessor(this.exporter);
  }

  /** Requests being traced right now (for tests: nothing may stay behind). */
  liveRequests(): number {
    let n = 0;
    for (const list of this.live.values()) n += list.length;
    return n;
  }

  noteWorker(info: WorkerInfo): void {
    const f = this.worker(info.url);
    f.model = info.model_path;
    f.format = info.format ?? null;
  }

  /** The head decision. Returns the trace id of a sampled request, else null. */
  admitted(src: ProgressSource): string | null {
    const t = src.trace;
    const parent = parseParent(t);
    const traceId = parent ? parent.traceId : this.ids.generateTraceId();
    let sampled: boolean;
    if (this.samplesAll) sampled = true;
    else if (this.parentDecides) sampled = parent === null || (parent.traceFlags & TraceFlags.SAMPLED) !== 0;
    else {
      const ctx = parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
      sampled = this.sampler.shouldSample(ctx, traceId, `${t?.method ?? 'POST'} ${t?.route ?? ROUTE}`, SpanKind.SERVER, {}, NO_LINKS).decision === SamplingDecision.RECORD_AND_SAMPLED;
    }
    if (!sampled) return null;
    this.track({
      id: src.id,
      src,
      traceId,
      parent,
      method: t?.method,
      route: t?.route,
      start: performance.now(),
      firstTokenAt: null,
      attempts: [],
      open: null,
      nextAttempt: 0,
      pendingMigration: null,
    });
    return traceId;
  }

  /** Headers for the attempt's upstream call: its span's context, or null when not traced. */
  attemptStarted(e: AttemptStart): Record<string, string> | null {
    const list = this.live.get(e.request_id);
    if (list === undefined) return null;
    let rt: RequestTrace | null = null;
    for (const r of list) {
      if (r.open === null && r.nextAttempt === e.attempt) {
        rt = r;
        break;
      }
    }
    if (rt === null) return null;
    const a: AttemptTrace = {
      index: e.attempt,
      rid: e.rid,
      worker: e.worker,
      spanId: this.ids.generateSpanId(),
      start: performance.now(),
      end: null,
      firstTokenAt: null,
      row: null,
      migration: rt.pendingMigration ?? (e.attempt > 0 ? { reason: 'unknown', tokens: e.replayed_tokens, ongoing: e.replayed_tokens > 0 } : null),
    };
    rt.pendingMigration = null;
    rt.open = a;
    rt.nextAttempt = e.attempt + 1;
    rt.attempts.push(a);
    const state = rt.parent?.traceState?.serialize();
    return state ? { traceparent: `00-${rt.traceId}-${a.spanId}-01`, tracestate: state } : { traceparent: `00-${rt.traceId}-${a.spanId}-01` };
  }

  firstToken(requestId: string, attempt: number): void {
    const list = this.live.get(requestId);
    if (list === undefined) return;
    for (const r of list) {
      const a = r.open;
      if (a !== null && a.index === attempt && a.firstTokenAt === null) {
        const t = performance.now();
        a.firstTokenAt = t;
        r.firstTokenAt ??= t;
        return;
      }
    }
  }

  migrated(requestId: string, attempt: number, kind: ErrorKind, atToken: number, ongoing: boolean): void {
    const list = this.live.get(requestId);
    if (list === undefined) return;
    for (const r of list) {
      if (r.open === null && r.nextAttempt === attempt) {
        r.pendingMigration = { reason: kind, tokens: atToken, ongoing };
        return;
      }
    }
  }

  /**
   * An attempt's row. Returns the trace id its row carries: the request's, when traced; a new one
   * when this failure makes a request the head sampler dropped worth keeping; else null.
   */
  attemptEnded(row: AttemptRow, inFlight: Iterable<ProgressSource>): string | null {
    const list = this.live.get(row.request_id);
    if (list !== undefined) {
      for (const r of list) {
        const a = r.open;
        if (a !== null && a.rid === row.rid) {
          a.end = performance.now();
          a.row = row;
          r.open = null;
          return r.traceId;
        }
      }
    }
    if (!this.keepFailed || (row.outcome !== 'failed' && row.outcome !== 'budget_exhausted')) return null;
    // Kept at its first failure: what came before is in this row (attempts before a failed one
    // have all failed, so this is the first), and its source gives the client's trace context.
    const kept = this.keep(row.request_id, this.untracked(row.request_id, inFlight));
    kept.attempts.push({
      index: row.attempt,
      rid: row.rid,
      worker: row.worker,
      spanId: this.ids.generateSpanId(),
      start: row.started_at,
      end: row.ended_at,
      firstTokenAt: row.ttft_ms === null ? null : row.started_at + row.ttft_ms,
      row,
      migration: null,
    });
    kept.nextAttempt = row.attempt + 1;
    return kept.traceId;
  }

  /** The request's end: its spans go to the batch processor. Returns the trace id of its row. */
  requestFinished(src: ProgressSource, row: RequestRow): string | null {
    const list = this.live.get(row.request_id);
    let rt: RequestTrace | null = null;
    if (list !== undefined) {
      for (const r of list) if (r.src === src) rt = r;
      if (rt === null) for (const r of list) if (r.src === null) rt = r;
    }
    if (rt === null) {
      if (!this.keepFailed || row.outcome !== 'failed') return null;
      rt = this.keep(row.request_id, src); // failed before any attempt (no worker)
    }
    this.untrack(rt);
    try {
      this.emit(rt, row);
    } catch {
      // A span that cannot be built must not cut the request's telemetry short.
    }
    return rt.traceId;
  }

  /** Exports what is queued, waiting at most `timeoutMs` (a collector that is down must not hold a close). */
  async shutdown(timeoutMs = 3000): Promise<void> {
    this.closed ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.processor.shutdown().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    })();
    return this.closed;
  }

  forceFlush(): Promise<void> {
    return this.processor.forceFlush();
  }

  // --- state ------------------------------------------------------------------------------

  private track(rt: RequestTrace): void {
    const list = this.live.get(rt.id);
    if (list) list.push(rt);
    else this.live.set(rt.id, [rt]);
  }

  private untrack(rt: RequestTrace): void {
    const list = this.live.get(rt.id);
    if (!list) return;
    const i = list.indexOf(rt);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.live.delete(rt.id);
  }

  /** The in-flight source of a request by id that is not traced yet (a linear scan: failures only). */
  private untracked(id: string, inFlight: Iterable<ProgressSource>): ProgressSource | null {
    const list = this.live.get(id);
    for (const s of inFlight) {
      if (s.id !== id) continue;
      let traced = false;
      if (list) for (const r of list) if (r.src === s) traced = true;
      if (!traced) return s;
    }
    return null;
  }

  /** Start tracing a request the head sampler dropped, from its rows (its times are theirs). */
  private keep(id: string, src: ProgressSource | null): RequestTrace {
    const parent = parseParent(src?.trace);
    const rt: RequestTrace = {
      id,
      src,
      traceId: parent ? parent.traceId : this.ids.generateTraceId(),
      parent,
      method: src?.trace?.method,
      route: src?.trace?.route,
      start: null,
      firstTokenAt: null,
      attempts: [],
      open: null,
      nextAttempt: 0,
      pendingMigration: null,
    };
    this.track(rt);
    return rt;
  }

  private worker(url: string): WorkerFacts {
    let f = this.workers.get(url);
    if (f === undefined) {
      let address = url;
      let port = 0;
      try {
        const u = new URL(url);
        address = u.hostname.replace(/^\[|\]$/g, '');
        port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
      } catch {
        // Not a URL: the attributes say what there is.
      }
      f = { model: null, format: null, address, port };
      this.workers.set(url, f);
    }
    return f;
  }

  // --- spans --------------------------------------------------------------------------------

  private span(ctx: SpanContext, parent: SpanContext | undefined, name: string, kind: SpanKind, start: HrTime, end: HrTime, attrs: Attributes, links: Link[], events: TimedEvent[], status: SpanStatus): void {
    this.processor.onEnd(new FinishedSpan(ctx, parent, name, kind, start, end, attrs, links, events, status, this.resource, SCOPE));
  }

  private emit(rt: RequestTrace, row: RequestRow): void {
    // performance.now() readings become epoch times with one anchor for the whole request.
    const anchor = Date.now() - performance.now();
    const end = hr(performance.now(), anchor);
    const start = hr(rt.start ?? row.started_at, anchor);
    const first = rt.attempts.length > 0 ? rt.attempts[0]! : null;
    const w0 = first ? this.worker(first.worker) : null;
    const provider = w0?.format ?? this.defaultFormat;
    const model = w0?.model ?? null;
    const failed = row.outcome === 'failed';
    const errorType = failed ? (row.attempts === 0 ? 'no_worker' : lastFailureKind(rt) ?? '_OTHER') : null;
    const method = rt.method ?? 'POST';
    const route = rt.route ?? ROUTE;
    const traceState = rt.parent?.traceState;
    const serverCtx: SpanContext = { traceId: rt.traceId, spanId: this.ids.generateSpanId(), traceFlags: TraceFlags.SAMPLED, traceState };
    const logicalCtx: SpanContext = { traceId: rt.traceId, spanId: this.ids.generateSpanId(), traceFlags: TraceFlags.SAMPLED, traceState };

    // One CLIENT span per attempt, each continuation linked to the attempt it continues.
    let prev: AttemptTrace | null = null;
    let prevCtx: SpanContext | null = null;
    for (const a of rt.attempts) {
      const r = a.row;
      const w = this.worker(a.worker);
      const format = w.format ?? this.defaultFormat;
      const path = format === undefined ? undefined : this.generatePaths.get(format);
      const attrs = attemptAttributes(rt, a, w, path);
      const events: TimedEvent[] = [];
      const attemptEnd = a.end === null ? end : hr(a.end, anchor);
      if (a.firstTokenAt !== null) events.push({ name: 'baton.first_token', time: hr(a.firstTokenAt, anchor) });
      const status = r !== null ? failureEvent(r, attemptEnd, events) : UNSET;
      const links = prev !== null && prevCtx !== null && prev.index === a.index - 1 ? migrationLinks(prev, prevCtx, a) : NO_LINKS;
      const ctx: SpanContext = { traceId: rt.traceId, spanId: a.spanId, traceFlags: TraceFlags.SAMPLED, traceState };
      this.span(ctx, logicalCtx, path !== undefined ? `POST ${path}` : 'POST', SpanKind.CLIENT, hr(a.start, anchor), attemptEnd, attrs, links, events.length > 0 ? events : NO_EVENTS, status);
      prev = a;
      prevCtx = ctx;
    }

    // The logical generation, over every attempt (GenAI semantic conventions).
    const ttft = rt.start !== null && rt.firstTokenAt !== null ? (rt.firstTokenAt - rt.start) / 1000 : rowTtft(rt, row);
    // Continuations run on the model the request started on; said again only if a worker differs.
    const lastModel = rt.attempts.length > 1 ? this.worker(rt.attempts[rt.attempts.length - 1]!.worker).model : model;
    const gen = generationAttributes(row, provider, model, lastModel, ttft, errorType);
    const genStatus: SpanStatus = failed ? { code: SpanStatusCode.ERROR, message: text(row.error ?? errorType ?? 'failed') } : UNSET;
    this.span(logicalCtx, serverCtx, model ? `text_completion ${model}` : 'text_completion', SpanKind.INTERNAL, start, end, gen, NO_LINKS, NO_EVENTS, genStatus);

    // The inbound request (SERVER), under the client's span when it sent one.
    const server: Attributes = {
      'http.request.method': method,
      'http.route': route,
      'url.path': route,
      'url.scheme': 'http',
      'baton.request.id': text(row.request_id),
    };
    put(server, 'error.type', errorType);
    const serverStatus: SpanStatus = errorType !== null && !CLIENT_FAULTS.has(errorType) ? { code: SpanStatusCode.ERROR, message: text(row.error ?? errorType) } : UNSET;
    this.span(serverCtx, rt.parent ?? undefined, `${method} ${route}`, SpanKind.SERVER, start, end, server, NO_LINKS, NO_EVENTS, serverStatus);
  }
}

/** An attempt's CLIENT span attributes: the worker, the attempt, and its row's facts once it has one. */
function attemptAttributes(rt: RequestTrace, a: AttemptTrace, w: WorkerFacts, path: string | undefined): Attributes {
  const attrs: Attributes = {
    'http.request.method': 'POST',
    'server.address': w.address,
    'server.port': w.port,
    'baton.request.id': text(rt.id),
    'baton.attempt': a.index,
    'baton.rid': text(a.rid),
  };
  if (path !== undefined) attrs['url.full'] = a.worker + path;
  if (a.index > 0) attrs['http.request.resend_count'] = a.index;
  const r = a.row;
  if (r === null) return attrs;
  attrs['baton.replayed_tokens'] = r.replayed_tokens;
  attrs['baton.prompt_tokens_sent'] = r.prompt_tokens_sent;
  attrs['baton.tokens'] = r.tokens;
  attrs['baton.outcome'] = r.outcome;
  put(attrs, 'baton.budget_before', r.budget_before);
  put(attrs, 'baton.budget_after', r.budget_after);
  put(attrs, 'baton.cached_tokens', r.cached_tokens);
  put(attrs, 'baton.ttft_ms', r.ttft_ms);
  put(attrs, 'baton.finish_reason', r.finish_reason);
  put(attrs, 'error.type', r.error_kind);
  put(attrs, 'baton.error.evidence', r.error_evidence);
  // P/D (docs/pd.md): the attempt's two legs and its room.
  put(attrs, 'baton.pd.prefill_worker', r.prefill_worker ?? null);
  put(attrs, 'baton.pd.decode_worker', r.decode_worker ?? null);
  put(attrs, 'baton.pd.bootstrap_room', r.bootstrap_room ?? null);
  put(attrs, 'baton.pd.failed_leg', r.failed_leg ?? null);
  return attrs;
}

/** An attempt that did not finish: its failure as an event (into `events`), and the span's status. */
function failureEvent(r: AttemptRow, attemptEnd: HrTime, events: TimedEvent[]): SpanStatus {
  if (r.error_kind === null || r.outcome === 'finished') return UNSET;
  const ev: Attributes = { 'error.type': r.error_kind };
  put(ev, 'baton.error.message', r.error);
  put(ev, 'baton.error.evidence', r.error_evidence);
  events.push({ name: 'baton.failure', time: attemptEnd, attributes: ev });
  return r.outcome === 'failed' || r.outcome === 'budget_exhausted' ? { code: SpanStatusCode.ERROR, message: text(r.error ?? r.error_kind) } : UNSET;
}

/** A continuation's link to the attempt it continues (`prev`, whose span is `prevCtx`). */
function migrationLinks(prev: AttemptTrace, prevCtx: SpanContext, a: AttemptTrace): Link[] {
  const m = a.migration;
  const r = a.row;
  return [{
    context: prevCtx,
    attributes: {
      'baton.migration.reason': m !== null && m.reason !== 'unknown' ? m.reason : prev.row?.error_kind ?? 'unknown',
      'baton.migration.tokens_carried': m?.tokens ?? r?.replayed_tokens ?? 0,
      'baton.migration.ongoing': m?.ongoing ?? (r !== null ? r.replayed_tokens > 0 : false),
    },
  }];
}

/** The logical generation's attributes, over every attempt (GenAI semantic conventions). */
function generationAttributes(row: RequestRow, provider: string | undefined, model: string | null, lastModel: string | null, ttft: number | null, errorType: string | null): Attributes {
  const gen: Attributes = {
    'gen_ai.operation.name': 'text_completion',
    'gen_ai.provider.name': provider,
    'gen_ai.response.id': text(row.request_id),
    'gen_ai.usage.output_tokens': row.completion_tokens,
    'baton.request.stream': row.stream,
    'baton.admission.admitted': row.admitted,
    'baton.attempts': row.attempts,
    'baton.migrations': row.migrations,
    'baton.outcome': row.outcome,
  };
  put(gen, 'gen_ai.request.model', model);
  if (lastModel !== model) put(gen, 'gen_ai.response.model', lastModel);
  put(gen, 'gen_ai.request.max_tokens', row.max_new_tokens);
  put(gen, 'gen_ai.response.finish_reasons', row.finish_reason === null ? null : [row.finish_reason]);
  // 0 means the prompt was not token ids (text, a batch): Baton does not tokenize.
  put(gen, 'gen_ai.usage.input_tokens', row.prompt_tokens > 0 ? row.prompt_tokens : null);
  put(gen, 'gen_ai.usage.cache_read.input_tokens', row.cached_tokens);
  put(gen, 'gen_ai.response.time_to_first_chunk', ttft);
  put(gen, 'baton.admission.reason', row.admission_reason);
  put(gen, 'error.type', errorType);
  return gen;
}

/** Time to the first chunk of a request kept at a failure, from its rows (seconds), or null. */
function rowTtft(rt: RequestTrace, row: RequestRow): number | null {
  let first: number | null = null;
  for (const a of rt.attempts) {
    const r = a.row;
    if (r && r.ttft_ms !== null && (first === null || r.started_at + r.ttft_ms < first)) first = r.started_at + r.ttft_ms;
  }
  return first === null ? null : Math.max(0, first - row.started_at) / 1000;
}

export function createTracing(settings: TracingSettings, opts: { log?: (line: string) => void; formats?: readonly TracedFormat[] } = {}): Tracing {
  return new Tracing(settings, opts);
}
