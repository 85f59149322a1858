// startRouter(): the whole router behind one call, for the CLI, the Electron main process,
// `baton serve` and the tests alike. It builds the parts and wires them; the layers
// (docs/architecture.md "Layers"): edge (here, http/) → fronts (format/fronts.ts) → the loop
// (migration/) → pool and upstream → telemetry.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RouterHandle, RouteHandler, TraceFilter } from './api.ts';
import { DEFAULTS, isLoopback, ConfigError, type RouterConfig } from './config.ts';
import { EventBus } from './events/bus.ts';
import { TraceStore } from './trace/store.ts';
import { RouterMetrics } from './metrics.ts';
import { Telemetry } from './telemetry.ts';
import { tracingSettings } from './otel/settings.ts';
import { WorkerPool, normalizeWorkerUrl } from './pool/worker-pool.ts';
import { createPolicy } from './pool/policies/index.ts';
import { StallWatch } from './upstream/stall-watch.ts';
import { Routes } from './http/routes.ts';
import { accessRefusal } from './http/guards.ts';
import { RequestPath } from './http/request-path.ts';
import { addRouterRoutes, httpError, sendJson } from './http/admin-api.ts';
import { FRONTS, ServedModels, UNROUTED } from './format/fronts.ts';
import type { LoopContext } from './migration/logical-request.ts';
import type { TraceRow } from './trace/row.ts';
import { applyGcScavenge } from './gc.ts';
import { Drainer } from './migration/drain.ts';
import { Reconciler, startDiscovery } from './discovery/index.ts';

export type { RouterHandle } from './api.ts';
export type { RouterConfig } from './config.ts';

/** Request targets whose URL pathname is the target itself: segments of these characters only (no dots, no %, no query). */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_-]+)+$/;

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
      loadIntervalMs: config.loadIntervalMs,
      continuationPlacement: config.continuationPlacement,
    },
    createPolicy(config.policy, { cacheThreshold: config.cacheThreshold, balanceAbsThreshold: config.balanceAbsThreshold, balanceRelThreshold: config.balanceRelThreshold, maxTreeSize: config.maxTreeSize }),
    (w) => telemetry.workerChanged(w.info()),
    (id, last) => telemetry.workerRemoved(id, last),
  );
  const drainer = new Drainer(pool, { marginMs: config.drainMarginMs });
  const reconciler = new Reconciler(pool, drainer, (s) => telemetry.discoveryState(s));
  metrics.observe({ workers: () => pool.infos(), traceFileErrors: () => traces.fileErrors, spares: () => pool.spareStats(), discovery: () => reconciler.status() });
  const stalls = new StallWatch(config.interTokenTimeoutMs, config.firstTokenTimeoutMs);
  const loop: LoopContext = {
    settings: { migrationLimit: config.migrationLimit, migrationMaxSeqLen: config.migrationMaxSeqLen },
    pool,
    telemetry,
    stalls,
    drainer,
  };
  const routes = new Routes();
  const path = new RequestPath({ maxConcurrentRequests: config.maxConcurrentRequests, maxBodyBytes: config.maxBodyBytes, bodyTimeoutMs: config.bodyTimeoutMs, clientWriteTimeoutMs: config.clientWriteTimeoutMs }, loop);
  for (const addFront of FRONTS) addFront({ routes, path, pool, models, config, keys });
  const lifecycle = addRouterRoutes(routes, { config, pool, bus, traces, metrics, telemetry, drainer, discovery: () => reconciler.status(), inFlight: () => path.inFlight });
  // Before binding: a bad --worker-file fails the start with nothing listening.
  const discovery = await startDiscovery(config, reconciler);

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
      return UNROUTED.notFound(res);
    }
    if ('allowed' in m) {
      req.resume();
      return UNROUTED.methodNotAllowed(res, m.allowed);
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
  }).catch(async (err: unknown) => { await discovery.stop(); await pool.close(); throw err; }); // a failed bind leaves nothing running
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
    drainWorker: (id, draining = true) => (draining ? pool.setDraining(id, true) : drainer.undrain(id)),
    requestOutput: (id: string) => telemetry.outputs.get(id),
    stats: () => telemetry.stats(pool.infos(), reconciler.status()),
    traceRows: (f?: TraceFilter): TraceRow[] => [...traces.rows(f)],
    addRoute: (method: string, path: string, handler: RouteHandler) => routes.add(method, path, handler, true),
    shutdown: async (graceMs = config.shutdownGraceMs) => lifecycle.shutdown(graceMs, discovery.stop).finally(() => handle_.close()),
    close: async () => {
      if (closed) return;
      closed = true;
      await discovery.stop().finally(() => drainer.close());
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
