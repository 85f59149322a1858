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
import { Telemetry } from './telemetry.ts';
import { WorkerPool, normalizeWorkerUrl } from './pool/worker-pool.ts';
import { createPolicy } from './pool/policies/index.ts';
import { StallWatch } from './upstream/stall-watch.ts';
import { Routes } from './http/routes.ts';
import { BodyError, readBody } from './http/body.ts';
import { MAX_JSON_DEPTH, bearerMatches, crossSiteRefusal, isGenerateContentType, isHeaderSafe, jsonDepthExceeds } from './http/guards.ts';
import { serveEvents } from './http/events-endpoint.ts';
import { TraceQueryError, parseTraceQuery, streamTraces } from './http/traces-endpoint.ts';
import { ValidationError, parseGenerateRequest, type GenerateRequest } from './format/sglang/request.ts';
import { ClientSink } from './format/sglang/client-sink.ts';
import { LogicalRequest, type LoopContext } from './migration/logical-request.ts';
import { passThrough } from './upstream/passthrough.ts';
import type { TraceRow } from './trace/row.ts';

export type { RouterHandle } from './api.ts';
export type { RouterConfig } from './config.ts';

const REQUEST_ID_HEADERS = ['x-request-id', 'x-correlation-id', 'x-trace-id', 'request-id'];

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** SGLang's error body for /generate. */
function generateError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: { message } }, headers);
}

/** SGLang's error body for other endpoints. */
function httpError(res: ServerResponse, status: number, message: string, type = 'BadRequestError'): void {
  sendJson(res, status, { object: 'error', message, type, param: null, code: status });
}

export async function startRouter(partial: Partial<RouterConfig> = {}): Promise<RouterHandle> {
  const config: RouterConfig = { ...DEFAULTS, ...partial, workers: partial.workers ?? [] };
  if (!isLoopback(config.host) && !config.adminToken) {
    throw new ConfigError(`binding to ${config.host} exposes the worker API, traces and events: set --admin-token (or bind to 127.0.0.1)`);
  }
  for (const w of config.workers) normalizeWorkerUrl(w); // fail before binding, not after
  const bus = new EventBus();
  const traces = new TraceStore(config.traceRingSize, config.traceFile);
  const metrics = new RouterMetrics(true);
  const telemetry = new Telemetry(bus, traces, metrics);
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
  const stalls = new StallWatch(config.interTokenTimeoutMs);
  const loop: LoopContext = {
    settings: { migrationLimit: config.migrationLimit, migrationMaxSeqLen: config.migrationMaxSeqLen },
    pool,
    telemetry,
    stalls,
  };
  let inFlight = 0;
  const routes = new Routes();

  // --- /generate ---------------------------------------------------------------------
  async function generate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A form, multipart, XML or binary body is not a generate request (FastAPI, so SGLang,
    // refuses them too); see isGenerateContentType for the one leniency.
    const contentType = req.headers['content-type'];
    if (!isGenerateContentType(contentType)) {
      req.resume();
      generateError(res, 415, `content-type must be application/json, got '${String(contentType).slice(0, 100)}'`);
      return;
    }
    let raw: Buffer;
    try {
      raw = await readBody(req, config.maxBodyBytes, config.bodyTimeoutMs);
    } catch (err) {
      const e = err as BodyError;
      generateError(res, e.status ?? 400, e.message, { connection: 'close' });
      return;
    }
    let parsed: GenerateRequest;
    try {
      const text = raw.toString('utf8');
      if (text.includes('\uFFFD') && !raw.equals(Buffer.from(text, 'utf8'))) throw new ValidationError('The request body is not valid UTF-8.');
      // Before parsing: JSON.parse takes any depth, but forwarding re-serialises the body and
      // JSON.stringify overflows the stack on deep nesting (see jsonDepthExceeds).
      if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) throw new ValidationError(`The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new ValidationError('The request body is not valid JSON.');
      }
      parsed = parseGenerateRequest(json);
    } catch (err) {
      if (err instanceof ValidationError) generateError(res, 400, err.message);
      else generateError(res, 400, 'invalid request');
      return;
    }
    const headerId = REQUEST_ID_HEADERS.map((h) => req.headers[h]).find((v): v is string => typeof v === 'string' && v.length > 0 && v.length <= 256);
    const id = parsed.rid ?? headerId ?? randomUUID().replace(/-/g, '');
    // The id goes out as a header only if it can: a rid with CR/LF or non-Latin-1 characters is
    // valid for SGLang, and it still comes back in meta_info.id.
    const idHeaders: Record<string, string> = isHeaderSafe(id) ? { 'x-request-id': id } : {};

    if (parsed.prompt.kind === 'batch' || (typeof parsed.sampling.n === 'number' && parsed.sampling.n > 1)) {
      await serveUnstitchable(parsed, id, res, idHeaders);
      return;
    }
    let lr: LogicalRequest | null = null;
    const sink = new ClientSink(res, parsed.stream, idHeaders, () => lr?.cancel());
    lr = new LogicalRequest(loop, parsed, id, sink);
    await lr.run();
  }

  /** Batches and n > 1: one attempt, passed through, traced, never migrated. */
  async function serveUnstitchable(parsed: GenerateRequest, id: string, res: ServerResponse, headers: Record<string, string>): Promise<void> {
    const worker = pool.pick(new Set());
    const started = Date.now();
    const reason = parsed.prompt.kind === 'batch' ? 'batch' : 'n_gt_1';
    const src = { id, attemptIndex: () => 0, progress: () => ({ tokens: 0, completion: 0 }) };
    telemetry.requestAdmitted(src, { request_id: id, admitted: false, reason, stream: parsed.stream, prompt_tokens: parsed.promptLength ?? 0, max_new_tokens: typeof parsed.maxNewTokens === 'number' ? parsed.maxNewTokens : null });
    if (!worker) {
      // Still one request row, as for a stitchable request that found no worker.
      generateError(res, 503, 'no healthy worker available', headers);
      const ended = Date.now();
      telemetry.requestFinished(src, { kind: 'request', request_id: id, attempts: 0, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: parsed.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome: 'failed', duration_ms: ended - started, started_at: started, ended_at: ended, stream: parsed.stream, max_new_tokens: null, error: null }, null, false);
      return;
    }
    telemetry.attemptStarted({ request_id: id, attempt: 0, rid: id, worker: worker.url, replayed_tokens: 0, budget_before: null });
    const ac = new AbortController();
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    worker.inFlight++;
    const failure = await passThrough(worker, JSON.stringify(parsed.body), res, headers, ac.signal);
    worker.inFlight--;
    const ended = Date.now();
    const outcome = failure === null ? 'finished' : failure.kind === 'client_cancel' ? 'cancelled' : 'failed';
    telemetry.attemptEnded({ kind: 'attempt', request_id: id, attempt: 0, rid: id, worker: worker.url, started_at: started, ended_at: ended, ttft_ms: null, prompt_tokens_sent: parsed.promptLength ?? 0, replayed_tokens: 0, tokens: 0, budget_before: null, budget_after: null, cached_tokens: null, outcome, error_kind: failure?.kind ?? null, error: failure?.message ?? null, finish_reason: null });
    telemetry.requestFinished(src, { kind: 'request', request_id: id, attempts: 1, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: parsed.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome, duration_ms: ended - started, started_at: started, ended_at: ended, stream: parsed.stream, max_new_tokens: null, error: failure?.message ?? null }, null, false);
  }

  routes.add('POST', '/generate', async (req, res) => {
    if (inFlight >= config.maxConcurrentRequests) {
      generateError(res, 503, `router is at its limit of ${config.maxConcurrentRequests} concurrent requests`, { 'retry-after': '1' });
      req.resume();
      return;
    }
    inFlight++;
    try {
      await generate(req, res);
    } finally {
      inFlight--;
    }
  }, false);

  routes.add('GET', '/health', (_req, res) => {
    const ok = pool.list().some((w) => w.eligible());
    res.writeHead(ok ? 200 : 503, { 'content-length': '0' });
    res.end();
  }, false);

  routes.add('GET', '/v1/models', async (_req, res) => {
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
    try {
      pathname = new URL(req.url ?? '/', 'http://x').pathname;
    } catch {
      return httpError(res, 400, 'bad request target');
    }
    const m = routes.match(req.method ?? 'GET', pathname);
    if (m === null) {
      req.resume();
      return httpError(res, 404, `no route for ${req.method} ${pathname}`, 'NotFoundError');
    }
    if ('allowed' in m) {
      req.resume();
      res.setHeader('allow', m.allowed.join(', '));
      return httpError(res, 405, `method ${req.method} not allowed on ${pathname}`, 'MethodNotAllowed');
    }
    if (m.route.admin && config.adminToken) {
      if (!bearerMatches(req.headers.authorization, config.adminToken)) {
        req.resume();
        res.setHeader('www-authenticate', 'Bearer');
        return httpError(res, 401, 'this endpoint needs the admin token (Authorization: Bearer ...)', 'Unauthorized');
      }
    } else if (m.route.admin) {
      // No token means loopback only, and loopback must also hold against web pages in a browser.
      const refusal = crossSiteRefusal(req);
      if (refusal) {
        req.resume();
        return httpError(res, refusal.status, refusal.message, 'Forbidden');
      }
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
      traces.close();
    },
  };
  return handle_;
}
