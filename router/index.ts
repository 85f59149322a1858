// startRouter(): the whole router behind one call, for the CLI, the Electron main process,
// `baton serve` and the tests alike. It builds the parts and wires them; the layers
// (docs/architecture.md "Layers"): edge (here, http/) → fronts (fronts/index.ts) → the loop
// (migration/) → pool and upstream → telemetry.
import type { AddressInfo } from 'node:net';
import type { RouterHandle, RouteHandler, TraceFilter } from './api.ts';
import { DEFAULTS, ConfigError, type RouterConfig } from './config.ts';
import { isLoopback } from './loopback.ts';
import { EventBus } from './events/bus.ts';
import { TraceStore } from './trace/store.ts';
import { RouterMetrics } from './metrics.ts';
import { Telemetry } from './telemetry.ts';
import { tracingSettings } from './otel/settings.ts';
import { WorkerPool } from './pool/worker-pool.ts';
import { normalizeWorkerUrl } from './worker-url.ts';
import { createPolicy } from './pool/policies/index.ts';
import { pdPolicies } from './pool/policies/names.ts';
import { StallWatch } from './upstream/stall-watch.ts';
import { Routes } from './http/routes.ts';
import { closeListener, createEdgeServer, listenEdge, stopAccepting } from './http/server.ts';
import { addReplicaRoutes, adoptIdentity, type ReplicaLink } from './replicas/identity.ts';
import { RequestPath } from './http/request-path.ts';
import { addRouterRoutes } from './http/admin-api.ts';
import { applyWrite, type ReplicaWrites } from './http/worker-writes.ts';
import { PrefixShare } from './pool/prefix-share.ts';
import { endEventStreams } from './http/events-endpoint.ts';
import { FRONTS, ServedModels, UNROUTED, clientFormats } from './fronts/index.ts';
import { FORMATS } from './formats/registry.ts';
import type { LoopContext } from './migration/logical-request.ts';
import type { TraceRow } from './trace/row.ts';
import { applyGcScavenge } from './gc.ts';
import { Drainer } from './migration/drain.ts';
import { Reconciler, startDiscovery } from './discovery/index.ts';
import { textOnlyWarner } from './pool/text-workers.ts';

export type { RouterHandle } from './api.ts';
export type { RouterConfig } from './config.ts';

/** `replica`: this router is one replica under the primary of `--replicas` (router/replicas/). */
export async function startRouter(partial: Partial<RouterConfig> = {}, opts: { replica?: ReplicaLink } = {}): Promise<RouterHandle> {
  const config: RouterConfig = { ...DEFAULTS, ...partial, workers: partial.workers ?? [], tokenizers: partial.tokenizers ?? [] };
  if (!isLoopback(config.host) && !config.adminToken) {
    // An api key does not stand in for it: every client holds the api key.
    throw new ConfigError(`binding to ${config.host} without --admin-token would open the worker API, traces, events, abort_all and flush_cache to anyone who reaches it: set --admin-token (or bind to 127.0.0.1)`);
  }
  if (config.apiKey !== null && config.apiKey === config.adminToken) {
    throw new ConfigError('--api-key and --admin-token must differ: every client holds the api key');
  }
  const keys = { apiKey: config.apiKey ?? null, adminToken: config.adminToken ?? null };
  for (const w of [...config.workers, ...config.decode, ...config.prefill.map((p) => p.split(/\s+/)[0]!)]) normalizeWorkerUrl(w); // fail before binding, not after
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
  const metrics = new RouterMetrics(true, clientFormats());
  const telemetry = new Telemetry(bus, traces, metrics);
  const identity = (telemetry.replica = adoptIdentity(opts.replica)); // the rids carry it
  // The OpenTelemetry SDK is loaded only when export is on.
  if (otel) telemetry.tracing = (await import('./otel/tracing.ts')).createTracing(otel, { formats: FORMATS });
  const cacheAware = { cacheThreshold: config.cacheThreshold, balanceAbsThreshold: config.balanceAbsThreshold, balanceRelThreshold: config.balanceRelThreshold, maxTreeSize: config.maxTreeSize };
  // P/D: the decode side's policy picks an attempt's worker (a decode server, or an aggregated
  // worker beside the pairs), the prefill side's its prefill leg (docs/pd.md, "Which pair").
  const sides = config.pdDisaggregation ? pdPolicies(config, partial.policy !== undefined) : null;
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
      spreadContinuations: opts.replica !== undefined, // docs/replicas.md "Herding"
    },
    () => createPolicy(sides?.decode ?? config.policy, cacheAware),
    (w) => telemetry.workerChanged(w.info()),
    (id, last) => telemetry.workerRemoved(id, last),
    sides ? () => createPolicy(sides.prefill, cacheAware) : null,
  );
  // Said once, as soon as the probes show it: text-mode workers and no tokenizer migrate nothing.
  const warnTextOnly = textOnlyWarner(() => pool.list(), !models.empty, (line) => console.error(line));
  pool.health.afterCheck = warnTextOnly;
  const drainer = new Drainer(pool, { marginMs: config.drainMarginMs });
  const reconciler = new Reconciler(pool, drainer, (s) => telemetry.discoveryState(s));
  // Replicas share cache_aware's prefixes and the worker writes made on the shared port (docs/replicas.md).
  const link = opts.replica;
  const share = link ? new PrefixShare(pool, (b, written) => link.sharePrefixes(b, written)) : null;
  if (share) pool.selector.sharePrefixes(share.note);
  const replicas: ReplicaWrites | null = link ? { shared: (req) => req.socket.localPort === port, fanOut: (op) => link.write(op) } : null;
  metrics.observe({ workers: () => pool.infos(), traceFileErrors: () => traces.fileErrors, spares: () => pool.spareUpkeep.stats(), discovery: () => reconciler.status(), prefixShare: share ? () => share.counts : undefined });
  const stalls = new StallWatch(config.interTokenTimeoutMs, config.firstTokenTimeoutMs);
  const loop: LoopContext = {
    settings: { migrationLimit: config.migrationLimit, migrationMaxSeqLen: config.migrationMaxSeqLen, pdFirstTokenTimeoutMs: config.pdFirstTokenTimeoutMs },
    pool,
    telemetry,
    stalls,
    drainer,
  };
  const routes = new Routes();
  const path = new RequestPath({ maxConcurrentRequests: config.maxConcurrentRequests, maxBodyBytes: config.maxBodyBytes, bodyTimeoutMs: config.bodyTimeoutMs, clientWriteTimeoutMs: config.clientWriteTimeoutMs }, loop);
  const replica = { id: identity.id, peers: link ? async () => (await link.list()).replicas : undefined };
  for (const addFront of FRONTS) addFront({ routes, path, pool, models, config, keys, replica, replicas });
  // Before the router's own routes: a replica's /metrics on the shared port is the aggregate.
  addReplicaRoutes(routes, { identity, link: opts.replica, metrics, startedAt: telemetry.startedAt, ownUrl: () => ownUrl, sharedPort: () => port });
  let sourceNames: readonly string[] = [];
  const lifecycle = addRouterRoutes(routes, { config, pool, bus, traces, metrics, telemetry, drainer, discovery: () => reconciler.status(), inFlight: () => path.inFlight, discoveryPending: () => reconciler.firstSyncPending(sourceNames), replicas });
  // Before binding: a bad --worker-file fails the start with nothing listening.
  const discovery = await startDiscovery(config, reconciler);
  sourceNames = discovery.sources.map((s) => s.name);

  // --- server: the router's port, and a replica's own loopback port besides -----------------
  const server = createEdgeServer(config, routes, keys, UNROUTED);
  const own = opts.replica ? createEdgeServer(config, routes, keys, UNROUTED) : null;
  let port = 0;
  let url = '';
  let ownUrl = '';
  try {
    url = await listenEdge(server, { host: config.host, port: config.port, backlog: config.listenBacklog, reusePort: opts.replica?.reusePort });
    port = (server.address() as AddressInfo).port;
    ownUrl = own ? await listenEdge(own, { host: '127.0.0.1', port: opts.replica!.ownPort, backlog: config.listenBacklog, exclusive: true }) : url;
  } catch (err) {
    server.close();
    await discovery.stop(); await pool.close(); throw err; // a failed bind leaves nothing running
  }

  await pool.addConfigured(config.workers, config.prefill, config.decode); // --worker, --prefill URL [PORT], --decode
  warnTextOnly(); // the configured workers are probed: before the CLI's `listening on` line
  pool.start();
  await link?.attach({ apply: (op) => applyWrite(pool, drainer, op), learnPrefixes: (b) => share!.receive(b) });
  opts.replica?.up(url, ownUrl, telemetry.startedAt, () => metrics.registry.getMetricsAsJSON());

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
    stopAccepting: () => stopAccepting(server),
    ownPort: async (listen) => {
      if (!own) return;
      if (!listen) return closeListener(own);
      if (!own.listening) await listenEdge(own, { host: '127.0.0.1', port: opts.replica!.ownPort, backlog: config.listenBacklog, exclusive: true });
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await discovery.stop().finally(() => drainer.close());
      stalls.close();
      share?.close();
      telemetry.close();
      await endEventStreams(bus, 1000); // a hub gets the last events before the connections close
      await Promise.all([server, own].map((srv) => srv && new Promise<void>((resolve) => {
        srv.close(() => resolve());
        srv.closeAllConnections();
      })));
      await pool.close();
      await telemetry.tracing?.shutdown(); // export what is queued (bounded wait)
      traces.close();
    },
  };
  return handle_;
}
