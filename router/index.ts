// startRouter(): the whole router behind one call, for the CLI, the Electron main process,
// `baton serve` and the tests alike.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { RouterHandle, RouteHandler, TraceFilter } from './api.ts';
import { DEFAULTS, isLoopback, ConfigError, type RouterConfig } from './config.ts';
import { EventBus } from './events/bus.ts';
import { TraceStore } from './trace/store.ts';
import { RouterMetrics } from './metrics.ts';
import { Telemetry, type InboundTrace } from './telemetry.ts';
import { tracingSettings } from './otel/settings.ts';
import { WorkerPool, normalizeWorkerUrl } from './pool/worker-pool.ts';
import { createPolicy } from './pool/policies/index.ts';
import { StallWatch } from './upstream/stall-watch.ts';
import { Routes } from './http/routes.ts';
import { BodyError, readBody } from './http/body.ts';
import { MAX_JSON_DEPTH, accessRefusal, hasLossyNumber, isHeaderSafe, isJsonContentType, jsonDepthExceeds, mayHoldLossyNumber } from './http/guards.ts';
import { serveEvents } from './http/events-endpoint.ts';
import { TraceQueryError, parseTraceQuery, streamTraces } from './http/traces-endpoint.ts';
import { MalformedBody, parseGenerateRequest, workerRids, type GenerateRequest } from './format/sglang/request.ts';
import { BODY_PARSE_ERROR, PyBytes, httpException, malformedBody, methodNotAllowed, notFound, objectError, writeValueError, type PydanticError } from './sglang-api/errors.ts';
import { RequestRegistry, type InFlight } from './sglang-api/registry.ts';
import { addSglangRoutes } from './sglang-api/endpoints.ts';
import { ClientSink } from './format/client-sink.ts';
import { SGLANG } from './format/sglang/index.ts';
import { VLLM } from './format/vllm/index.ts';
import { VllmMalformedBody } from './format/vllm/request.ts';
import type { FormatRequest, WireFormat } from './format/types.ts';
import { LogicalRequest, type LoopContext } from './migration/logical-request.ts';
import { passThrough } from './upstream/passthrough.ts';
import { classifyTransportError } from './migration/failure.ts';
import type { TraceRow } from './trace/row.ts';
import { ServedModels } from './format/openai/models.ts';
import { addOpenAiRoutes, reportedModels } from './openai-api.ts';
import { applyGcScavenge } from './gc.ts';

export type { RouterHandle } from './api.ts';
export type { RouterConfig } from './config.ts';

const REQUEST_ID_HEADERS = ['x-request-id', 'x-correlation-id', 'x-trace-id', 'request-id'];

/** Request targets whose URL pathname is the target itself: segments of these characters only (no dots, no %, no query). */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_-]+)+$/;

/** A request in flight, as the registry holds it (a class: no closure made per request, see request.ts). */
class Entry implements InFlight {
  worker: InFlight['worker'] = null;
  lr: LogicalRequest | null = null;
  constructor(
    readonly id: string,
    readonly kind: InFlight['kind'],
    readonly rids: readonly string[],
  ) {}

  abort(): void {
    this.lr?.abort();
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/**
 * Python's json error for a body JSON.parse refused, as FastAPI reports it (`json_invalid`,
 * `loc: ('body', <position>)`): V8's wording mapped onto the closest of Python's messages.
 */
function jsonInvalid(text: string, err: Error): PydanticError {
  const m = err.message;
  const at = /position (\d+)/.exec(m);
  let pos = at ? Number(at[1]) : 0;
  let error = 'Expecting value';
  if (/Unexpected end/.test(m)) pos = text.length;
  else if (/non-whitespace character after JSON/.test(m)) error = 'Extra data';
  else if (/Bad control character/.test(m)) error = 'Invalid control character at';
  else if (/Expected property name|Expected double-quoted property name/.test(m)) error = 'Expecting property name enclosed in double quotes';
  else if (/Expected ',' or/.test(m)) error = "Expecting ',' delimiter";
  else if (/Expected ':'/.test(m)) error = "Expecting ':' delimiter";
  else if (/Unterminated string/.test(m)) error = 'Unterminated string starting at';
  return { type: 'json_invalid', loc: ['body', pos], msg: 'JSON decode error', input: {}, ctx: { error } };
}

/** SGLang's error body for other endpoints. */
function httpError(res: ServerResponse, status: number, message: string, type = 'BadRequestError'): void {
  sendJson(res, status, { object: 'error', message, type, param: null, code: status });
}

export async function startRouter(partial: Partial<RouterConfig> = {}): Promise<RouterHandle> {
  const config: RouterConfig = { ...DEFAULTS, ...partial, workers: partial.workers ?? [], tokenizers: partial.tokenizers ?? [] };
  if (!isLoopback(config.host) && !config.adminToken) {
    // An api key does not stand in for it: every client holds the api key.
    throw new ConfigError(`binding to ${config.host} without --admin-token would open the worker API, traces, events, abort_all and flush_cache to anyone who reaches it: set --admin-token (or bind to 127.0.0.1)`);
  }
  if (config.apiKey !== null && config.apiKey === config.adminToken) {
    throw new ConfigError('--api-key and --admin-token must differ: every client holds the api key');
  }
  const keys = { apiKey: config.apiKey ?? null, adminToken: config.adminToken ?? null };
  for (const w of config.workers) normalizeWorkerUrl(w); // fail before binding, not after
  // Tokenizers load before binding: a bad --tokenizer fails the start, not the first request.
  let models: ServedModels;
  try {
    models = new ServedModels(config.tokenizers);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  applyGcScavenge(config.gcScavenge); // process-wide (router/gc.ts)
  const otel = tracingSettings(config); // OTLP export (docs/tracing.md); a bad OTEL_* value fails here
  const bus = new EventBus();
  const traces = new TraceStore(config.traceRingSize, config.traceFile);
  const metrics = new RouterMetrics(true);
  const telemetry = new Telemetry(bus, traces, metrics);
  // The OpenTelemetry SDK is loaded only when export is on.
  if (otel) telemetry.tracing = (await import('./otel/tracing.ts')).createTracing(otel);
  const pool = new WorkerPool(
    {
      circuit: { failureThreshold: config.circuitFailureThreshold, openMs: config.circuitOpenMs, successThreshold: config.circuitSuccessThreshold },
      connectTimeoutMs: config.connectTimeoutMs,
      healthIntervalMs: config.healthIntervalMs,
      healthTimeoutMs: config.healthTimeoutMs,
      healthFailureThreshold: config.healthFailureThreshold,
      benchMs: config.benchMs,
      spareConnections: config.spareConnections,
    },
    createPolicy(config.policy),
    (w) => telemetry.workerChanged(w.info()),
    (id) => telemetry.workerRemoved(id, null),
  );
  metrics.observe({ workers: () => pool.infos(), traceFileErrors: () => traces.fileErrors, spares: () => pool.spareStats() });
  const stalls = new StallWatch(config.interTokenTimeoutMs, config.firstTokenTimeoutMs);
  const loop: LoopContext = {
    settings: { migrationLimit: config.migrationLimit, migrationMaxSeqLen: config.migrationMaxSeqLen },
    pool,
    telemetry,
    stalls,
  };
  let inFlight = 0;
  const routes = new Routes();
  /** Logical requests in flight, by logical id: duplicate rids and /abort_request (sglang-api/registry.ts). */
  const registry = new RequestRegistry();
  addSglangRoutes(routes, { pool, registry, bodyTimeoutMs: config.bodyTimeoutMs, forwardTimeoutMs: Math.max(30_000, config.healthTimeoutMs), keys });

  // --- /generate ---------------------------------------------------------------------
  async function generate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readBody(req, config.maxBodyBytes, config.bodyTimeoutMs);
    } catch (err) {
      const e = err as BodyError;
      httpException(res, e.status ?? 400, e.message, { connection: 'close' });
      return;
    }
    // FastAPI reads the body as JSON only without a content type or with application/json (or
    // +json); any other body is validated as bytes, and an empty one is missing (SGLang: 400).
    if (raw.length === 0) return malformedBody(res, [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
    const contentType = req.headers['content-type'];
    if (!isJsonContentType(contentType)) {
      return malformedBody(res, [{ type: 'dataclass_type', loc: ['body'], msg: 'Input should be a dictionary or an instance of GenerateReqInput', input: new PyBytes(raw.toString('latin1', 0, 200)), ctx: { class_name: 'GenerateReqInput' } }]);
    }
    const text = raw.toString('utf8');
    // Python's json refuses bytes that are not UTF-8, and recursion past its limit; FastAPI then
    // says only this. The depth cap also keeps JSON.stringify (which recurses) from overflowing
    // when the body is forwarded (see jsonDepthExceeds).
    if ((text.includes('\uFFFD') && !raw.equals(Buffer.from(text, 'utf8'))) || jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
      return httpException(res, 400, BODY_PARSE_ERROR);
    }
    let parsed: GenerateRequest;
    try {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (err) {
        return malformedBody(res, [jsonInvalid(text, err as Error)]);
      }
      const lossyNumbers = mayHoldLossyNumber(json) && hasLossyNumber(text);
      parsed = parseGenerateRequest(json, { lossyNumbers, raw });
      if (!models.empty) parsed = withTokenizer(parsed, lossyNumbers);
    } catch (err) {
      if (err instanceof MalformedBody) return malformedBody(res, err.errors);
      throw err;
    }
    const headerId = REQUEST_ID_HEADERS.map((h) => req.headers[h]).find((v): v is string => typeof v === 'string' && v.length > 0 && v.length <= 256);
    const id = parsed.rid ?? headerId ?? randomUUID().replace(/-/g, '');
    // The id goes out as a header only if it can: a rid with CR/LF or non-Latin-1 characters is
    // valid for SGLang, and it still comes back in meta_info.id.
    const idHeaders: Record<string, string> = isHeaderSafe(id) && id.length <= 1024 ? { 'x-request-id': id } : {};

    // Batches, n > 1 and requests the router cannot read go to one worker as written.
    const passthrough = parsed.unparsed !== null || parsed.prompt.kind === 'batch' || (typeof parsed.sampling.n === 'number' && parsed.sampling.n > 1);
    // The rids this request holds, as one SGLang worker would: a body rid reused while its first
    // request is in flight is refused as SGLang refuses it (a ValueError). Ids from headers or
    // made up here claim nothing: clients share correlation headers.
    const rids = passthrough ? workerRids(parsed) : parsed.rid !== null ? [parsed.rid] : [];
    await serve(SGLANG, req, res, { parsed, text, id, idHeaders, passthrough, rids });
  }

  /**
   * With the model's tokenizer (--tokenizer; the workers serve one model), a native request gains
   * Baton's text: a `text` prompt is tokenized here and sent as `input_ids` (SGLang's
   * tokenizer_manager encodes it the same way), so it can migrate; the answer's `text` is
   * rendered from the logical output ids (format/sglang/detokenize.ts).
   */
  function withTokenizer(parsed: GenerateRequest, lossyNumbers: boolean): GenerateRequest {
    let tok;
    try {
      tok = models.lookup(undefined, reportedModels(pool)).tokenizer;
    } catch {
      return parsed; // no model, or several: the workers' own text
    }
    const body = parsed.body;
    if (parsed.prompt.kind === 'text' && parsed.unparsed === null && typeof body.text === 'string' && body.input_ids === undefined && body.input_embeds === undefined) {
      const { text, ...rest } = body;
      const ids = tok.encode(text);
      if (ids.length === 0) return parsed; // SGLang refuses an empty prompt itself
      const tokenized = parseGenerateRequest({ ...rest, input_ids: ids }, { lossyNumbers });
      tokenized.tokenizer = tok;
      tokenized.textPrompt = true;
      return tokenized;
    }
    parsed.tokenizer = tok;
    return parsed;
  }

  /**
   * A read request of either format: registered while in flight (duplicate rids, aborts), then
   * served by one worker as written (batches, n > 1, unparsed) or by the migration loop.
   */
  async function serve(format: WireFormat, req: IncomingMessage, res: ServerResponse, r: { parsed: FormatRequest; text: string; id: string; idHeaders: Record<string, string>; passthrough: boolean; rids: string[] }): Promise<void> {
    const { parsed, id, idHeaders } = r;
    let lr: LogicalRequest | null = null;
    const entry = new Entry(id, r.passthrough ? 'passthrough' : 'logical', r.rids);
    const duplicate = registry.add(entry);
    if (duplicate !== null) {
      req.resume();
      return writeValueError(res, parsed.stream, `Duplicate request ID detected: ${duplicate}`, idHeaders);
    }
    try {
      // A request every worker would fail alike (format/sglang/request.ts unknownSamplingKey):
      // refused here, after the rid checks as SGLang orders them, as the worker's request error.
      if (parsed.refusal) return format.writeRequestError(res, parsed.stream, 400, parsed.refusal, idHeaders);
      const trace = telemetry.inboundTrace(req, format.generatePath);
      if (r.passthrough) {
        await serveUnstitchable(parsed, r.text, id, res, idHeaders, entry, format, trace);
        return;
      }
      // The OpenAI front's answer is Baton's own; a native one carries its worker's content type.
      const sink = new ClientSink(res, parsed.stream, idHeaders, () => lr?.cancel(), format.errors, config.clientWriteTimeoutMs, format.name !== 'openai');
      lr = new LogicalRequest(loop, format, parsed, id, sink, trace);
      entry.lr = lr;
      await lr.run();
    } finally {
      registry.delete(entry);
    }
  }

  // --- /inference/v1/generate: vLLM's token-in/token-out API ----------------------------
  async function generateVllm(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readBody(req, config.maxBodyBytes, config.bodyTimeoutMs);
    } catch (err) {
      const e = err as BodyError;
      return VLLM.writeRequestError(res, false, e.status ?? 400, e.message, { connection: 'close' });
    }
    const text = raw.toString('utf8');
    if ((text.includes('\uFFFD') && !raw.equals(Buffer.from(text, 'utf8'))) || jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
      return VLLM.writeRequestError(res, false, 400, BODY_PARSE_ERROR);
    }
    let parsed: FormatRequest;
    try {
      const json: unknown = JSON.parse(text);
      parsed = VLLM.parse(json, { lossyNumbers: mayHoldLossyNumber(json) && hasLossyNumber(text), headers: req.headers });
    } catch (err) {
      const message = err instanceof VllmMalformedBody ? err.message : `JSON decode error: ${(err as Error).message}`;
      return VLLM.writeRequestError(res, false, 400, message);
    }
    // vLLM's request id: the X-Request-Id header, else the body's request_id (serving.py
    // `_base_request_id`), else a fresh one; the client sees `generate-tokens-<id>`.
    const header = req.headers['x-request-id'];
    const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? parsed.rid ?? randomUUID().replace(/-/g, '');
    const idHeaders: Record<string, string> = isHeaderSafe(id) && id.length <= 1024 ? { 'x-request-id': id } : {};
    // vLLM requests claim no ids here: whether a reused request_id is refused is the worker's call.
    await serve(VLLM, req, res, { parsed, text, id, idHeaders, passthrough: parsed.unparsed !== null || parsed.samples > 1, rids: [] });
  }

  /** vLLM's abort: `{"request_ids": ["generate-tokens-<id>", ...]}`, exact ids; an empty 200. */
  async function abortVllm(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let ids: unknown;
    try {
      ids = (JSON.parse((await readBody(req, 1 << 20, config.bodyTimeoutMs)).toString('utf8')) as { request_ids?: unknown }).request_ids;
    } catch {
      ids = undefined;
    }
    if (!Array.isArray(ids)) return VLLM.writeRequestError(res, false, 400, 'request_ids: Field required');
    const wanted = new Set(ids.filter((x): x is string => typeof x === 'string').map((x) => (x.startsWith('generate-tokens-') ? x.slice('generate-tokens-'.length) : x)));
    for (const e of registry.all()) if (wanted.has(e.id)) e.abort();
    res.writeHead(200, { 'content-length': '0' });
    res.end();
  }

  /**
   * Batches, n > 1 and unparsed requests: one attempt, the body forwarded as the client wrote it,
   * the answer passed back as the worker wrote it; traced, never migrated, never blamed on the
   * worker (its refusal of a bad value is the request's fault).
   */
  async function serveUnstitchable(parsed: FormatRequest, bodyText: string, id: string, res: ServerResponse, headers: Record<string, string>, entry: InFlight, format: WireFormat = SGLANG, trace: InboundTrace | null = null): Promise<void> {
    const worker = pool.pick(new Set(), null, format.workers);
    entry.worker = worker;
    const started = Date.now();
    const reason = parsed.prompt.kind === 'batch' ? 'batch' : typeof parsed.sampling.n === 'number' && parsed.sampling.n > 1 ? 'n_gt_1' : 'unparsed_field';
    const src = { id, trace, attemptIndex: () => 0, progress: () => ({ tokens: 0, completion: 0 }) };
    telemetry.requestAdmitted(src, { request_id: id, admitted: false, reason, stream: parsed.stream, prompt_tokens: parsed.promptLength ?? 0, max_new_tokens: typeof parsed.maxNewTokens === 'number' ? parsed.maxNewTokens : null });
    if (!worker) {
      // Still one request row, as for a stitchable request that found no worker.
      objectError(res, 503, 'no healthy worker available', '503', headers);
      const ended = Date.now();
      telemetry.requestFinished(src, { kind: 'request', format: format.name, request_id: id, attempts: 0, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: parsed.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome: 'failed', duration_ms: ended - started, started_at: started, ended_at: ended, stream: parsed.stream, max_new_tokens: null, error: null }, null, false);
      return;
    }
    const upstreamHeaders = telemetry.attemptStarted({ request_id: id, attempt: 0, rid: id, worker: worker.url, replayed_tokens: 0, budget_before: null });
    const ac = new AbortController();
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    worker.inFlight++;
    const failure = await passThrough(worker, bodyText, res, headers, ac.signal, classifyTransportError, format.generatePath, upstreamHeaders, config.clientWriteTimeoutMs);
    worker.inFlight--;
    const ended = Date.now();
    const outcome = failure === null ? 'finished' : failure.kind === 'client_cancel' ? 'cancelled' : 'failed';
    telemetry.attemptEnded({ kind: 'attempt', format: format.name, request_id: id, attempt: 0, rid: id, worker: worker.url, started_at: started, ended_at: ended, ttft_ms: null, prompt_tokens_sent: parsed.promptLength ?? 0, replayed_tokens: 0, tokens: 0, budget_before: null, budget_after: null, cached_tokens: null, outcome, error_kind: failure?.kind ?? null, error: failure?.message ?? null, error_evidence: failure?.evidence ?? null, finish_reason: null });
    telemetry.requestFinished(src, { kind: 'request', format: format.name, request_id: id, attempts: 1, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: parsed.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome, duration_ms: ended - started, started_at: started, ended_at: ended, stream: parsed.stream, max_new_tokens: null, error: failure?.message ?? null }, null, false);
  }

  const generateRoute = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (inFlight >= config.maxConcurrentRequests) {
      objectError(res, 503, `router is at its limit of ${config.maxConcurrentRequests} concurrent requests`, '503', { 'retry-after': '1' });
      req.resume();
      return;
    }
    inFlight++;
    try {
      await generate(req, res);
    } finally {
      inFlight--;
    }
  };
  // SGLang serves /generate on POST and PUT (http_server.py).
  routes.add('POST', '/generate', generateRoute, false);
  routes.add('PUT', '/generate', generateRoute, false);
  // vLLM's token-in/token-out generate and its abort (token_in_token_out/api_router.py).
  routes.add('POST', '/inference/v1/generate', async (req, res) => {
    if (inFlight >= config.maxConcurrentRequests) {
      VLLM.writeRequestError(res, false, 503, `router is at its limit of ${config.maxConcurrentRequests} concurrent requests`, { 'retry-after': '1' });
      req.resume();
      return;
    }
    inFlight++;
    try {
      await generateVllm(req, res);
    } finally {
      inFlight--;
    }
  }, false);
  routes.add('POST', '/inference/v1/abort_requests', abortVllm, false);
  routes.add('POST', '/abort_requests', abortVllm, false);

  routes.add('GET', '/health', (_req, res) => {
    const ok = pool.list().some((w) => w.eligible());
    res.writeHead(ok ? 200 : 503, { 'content-length': '0' });
    res.end();
  }, false);

  if (!models.empty) {
    addOpenAiRoutes(routes, {
      pool,
      models,
      maxBodyBytes: config.maxBodyBytes,
      bodyTimeoutMs: config.bodyTimeoutMs,
      admit: () => {
        if (inFlight >= config.maxConcurrentRequests) return null;
        inFlight++;
        return () => void inFlight--;
      },
      serve,
    });
  } else routes.add('GET', '/v1/models', async (_req, res) => {
    const w = pool.pick(new Set());
    if (!w) return httpError(res, 503, 'no healthy worker available', 'ServiceUnavailableError');
    try {
      const up = await w.pool.request({ path: '/v1/models', method: 'GET', signal: AbortSignal.timeout(config.healthTimeoutMs) });
      const body = await up.body.text();
      res.writeHead(up.statusCode, { 'content-type': 'application/json' });
      res.end(body);
    } catch (err) {
      httpError(res, 502, `worker ${w.url} did not answer /v1/models: ${(err as Error).message}`, 'BadGatewayError');
    }
  }, false);

  routes.add('GET', '/metrics', async (_req, res) => {
    const text = await metrics.exposition();
    res.writeHead(200, { 'content-type': metrics.registry.contentType });
    res.end(text);
  }, false);

  // --- worker API (SGLang gateway's shape) ---------------------------------------------
  routes.add('GET', '/workers', (_req, res) => sendJson(res, 200, { workers: pool.infos() }), true);
  routes.add('POST', '/workers', async (req, res) => {
    let url: unknown;
    try {
      url = JSON.parse((await readBody(req, 64 * 1024, config.bodyTimeoutMs)).toString('utf8')).url;
    } catch {
      return httpError(res, 400, 'body must be JSON {"url": "http://host:port"}');
    }
    if (typeof url !== 'string') return httpError(res, 400, 'body must be JSON {"url": "http://host:port"}');
    try {
      const w = await pool.add(url);
      sendJson(res, 200, w.info());
    } catch (err) {
      httpError(res, 400, (err as Error).message);
    }
  }, true);
  routes.add('GET', '/workers/:id', (_req, res, p) => {
    const w = pool.get(p.id!);
    if (!w) return httpError(res, 404, `no worker '${p.id}'`, 'NotFoundError');
    sendJson(res, 200, w.info());
  }, true);
  routes.add('PUT', '/workers/:id', async (req, res, p) => {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse((await readBody(req, 64 * 1024, config.bodyTimeoutMs)).toString('utf8'));
    } catch {
      return httpError(res, 400, 'body must be JSON {"draining": true|false}');
    }
    if (typeof body?.draining !== 'boolean') return httpError(res, 400, 'body must be JSON {"draining": true|false}');
    if (!pool.setDraining(p.id!, body.draining)) return httpError(res, 404, `no worker '${p.id}'`, 'NotFoundError');
    sendJson(res, 200, pool.get(p.id!)!.info());
  }, true);
  routes.add('DELETE', '/workers/:id', (_req, res, p) => {
    if (!pool.remove(p.id!)) return httpError(res, 404, `no worker '${p.id}'`, 'NotFoundError');
    sendJson(res, 200, { removed: p.id });
  }, true);

  // --- observability -----------------------------------------------------------------
  routes.add('GET', '/traces', async (req, res) => {
    let q;
    try {
      q = parseTraceQuery(new URL(req.url ?? '/', 'http://x').searchParams);
    } catch (err) {
      if (err instanceof TraceQueryError) return httpError(res, 400, err.message);
      throw err;
    }
    await streamTraces(traces.rows(q.filter), q.format, req, res);
  }, true);
  routes.add('GET', '/requests/:id/output', (_req, res, p) => {
    const out = telemetry.outputs.get(p.id!);
    if (!out) return httpError(res, 404, `no recent output for request '${p.id}' (only the last 512 finished requests are kept)`, 'NotFoundError');
    sendJson(res, 200, out);
  }, true);
  routes.add('GET', '/events', (req, res) => serveEvents(bus, req, res, { flushMs: 100, maxQueued: 20_000 }), true);
  // Settings the dashboard reads: the trace link (--trace-url-template, docs/tracing.md).
  routes.add('GET', '/config/ui', (_req, res) => sendJson(res, 200, { trace_url_template: config.traceUrlTemplate, tracing: telemetry.tracing !== null }), true);

  // --- server ------------------------------------------------------------------------
  // headersTimeout ends slowloris on the headers; Node enforces it on a sweep every
  // connectionsCheckingInterval, so that interval follows the timeout (else a short timeout
  // would only take effect after the default 30 s sweep).
  const server = createServer({
    requestTimeout: 0,
    headersTimeout: config.headersTimeoutMs,
    connectionsCheckingInterval: config.headersTimeoutMs > 0 ? Math.max(50, Math.min(30_000, Math.floor(config.headersTimeoutMs / 4))) : 30_000,
    keepAliveTimeout: 65_000,
  }, (req, res) => {
    void handle(req, res);
  });
  server.maxHeadersCount = 100;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let pathname: string;
    const requestTarget = req.url ?? '/';
    // A plain path (`/generate`) is its own pathname; anything else is parsed as a URL would be.
    if (PLAIN_PATH.test(requestTarget)) pathname = requestTarget;
    else {
      try {
        pathname = new URL(requestTarget, 'http://x').pathname;
      } catch {
        return httpError(res, 400, 'bad request target');
      }
    }
    const m = routes.match(req.method ?? 'GET', pathname);
    // Keys first, as SGLang's auth middleware runs before its routes: a path it does not serve
    // is the data plane's (guards.ts accessRefusal).
    const refusal = accessRefusal(req, pathname, m !== null && 'route' in m ? m.route.access : 'data', keys);
    if (refusal !== null) {
      req.resume();
      return sendJson(res, refusal.status, refusal.body, refusal.headers);
    }
    // Starlette's answers, as SGLang gives them for every path and method it does not serve.
    if (m === null) {
      req.resume();
      // Starlette's redirect_slashes: a known path with a trailing slash redirects to it.
      if (pathname.length > 1 && pathname.endsWith('/') && routes.match(req.method ?? 'GET', pathname.slice(0, -1)) !== null) {
        const target = new URL(req.url ?? '/', 'http://x');
        res.writeHead(307, { location: `http://${req.headers.host ?? `${shownHost}:${port}`}${pathname.slice(0, -1)}${target.search}`, 'content-length': '0' });
        return void res.end();
      }
      return notFound(res);
    }
    if ('allowed' in m) {
      req.resume();
      return methodNotAllowed(res, m.allowed);
    }
    try {
      await m.route.handler(req, res, m.params);
    } catch (err) {
      if (!res.headersSent) httpError(res, 500, `internal error: ${(err as Error).message}`, 'InternalServerError');
      else res.destroy();
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Node's default backlog (511) overflows when thousands of clients connect at once, which they
    // see as SYN retransmits (a second or more) or resets; the kernel caps it at somaxconn.
    server.listen({ port: config.port, host: config.host, backlog: config.listenBacklog }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${shownHost}:${port}`;

  for (const w of config.workers) await pool.add(w);
  pool.start();

  let closed = false;
  const handle_: RouterHandle = {
    url,
    host: config.host,
    port,
    subscribe: (l) => bus.subscribe(l),
    workers: () => pool.infos(),
    addWorker: async (u, o) => (await pool.add(u, o)).info(),
    removeWorker: (id) => pool.remove(id),
    drainWorker: (id, draining = true) => pool.setDraining(id, draining),
    requestOutput: (id: string) => telemetry.outputs.get(id),
    stats: () => telemetry.stats(pool.infos()),
    traceRows: (f?: TraceFilter): TraceRow[] => [...traces.rows(f)],
    addRoute: (method: string, path: string, handler: RouteHandler) => routes.add(method, path, handler, true),
    close: async () => {
      if (closed) return;
      closed = true;
      stalls.close();
      telemetry.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await pool.close();
      await telemetry.tracing?.shutdown(); // export what is queued (bounded wait)
      traces.close();
    },
  };
  return handle_;
}
