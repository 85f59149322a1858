// The router's own endpoints, the same whatever the fronts: /health and /metrics on the data
// plane; the worker API (SGLang gateway's shape), traces, outputs, events and the dashboard's
// settings behind the admin token (guards.ts Access).
import type { ServerResponse } from 'node:http';
import type { RouterConfig } from '../config.ts';
import type { EventBus } from '../events/bus.ts';
import type { RouterMetrics } from '../metrics.ts';
import type { Telemetry } from '../telemetry.ts';
import type { TraceStore } from '../trace/store.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { Drainer } from '../migration/drain.ts';
import type { DiscoveryStatus } from '../events/types.ts';
import type { Routes } from './routes.ts';
import { readBody } from './body.ts';
import { Lifecycle } from './lifecycle.ts';
import { serveEvents } from './events-endpoint.ts';
import { TraceQueryError, parseTraceQuery, streamTraces } from './traces-endpoint.ts';
import { sendWritten, shareWrite, type ReplicaWrites } from './worker-writes.ts';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** SGLang's error body for other endpoints. */
export function httpError(res: ServerResponse, status: number, message: string, type = 'BadRequestError'): void {
  sendJson(res, status, { object: 'error', message, type, param: null, code: status });
}

export interface AdminParts {
  config: RouterConfig;
  pool: WorkerPool;
  bus: EventBus;
  traces: TraceStore;
  metrics: RouterMetrics;
  telemetry: Telemetry;
  drainer: Drainer;
  /** Each discovery source's state, for GET /workers. */
  discovery: () => DiscoveryStatus[];
  /** Requests in flight at the router (readiness, shutdown). */
  inFlight: () => number;
  /** Why discovery has not listed the workers yet, or null (readiness). */
  discoveryPending?: () => string | null;
  /** Under `--replicas`: worker writes on the shared port go to every replica (worker-writes.ts). */
  replicas: ReplicaWrites | null;
}

const DRAIN_BODY = 'body must be empty or JSON {"grace_ms": N} or {"deadline_ms": EPOCH_MS}';

/** The deadline a POST /workers/:id/drain body asks for (epoch ms), or an error message. */
export function drainDeadline(text: string, now: number, defaultGraceMs: number): number | string {
  if (text.trim() === '') return now + defaultGraceMs;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return DRAIN_BODY;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return DRAIN_BODY;
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (k !== 'grace_ms' && k !== 'deadline_ms') return `unknown field '${k}': ${DRAIN_BODY}`;
  if (b.grace_ms !== undefined && b.deadline_ms !== undefined) return 'give grace_ms or deadline_ms, not both';
  const v = b.grace_ms ?? b.deadline_ms;
  if (v === undefined) return now + defaultGraceMs;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) return `${b.grace_ms !== undefined ? 'grace_ms' : 'deadline_ms'} must be a non-negative integer (ms), got ${JSON.stringify(v)}`;
  return b.grace_ms !== undefined ? now + v : v;
}

/** The router's own routes; returns its Lifecycle (/livez, /readyz, shutdown). */
export function addRouterRoutes(routes: Routes, p: AdminParts): Lifecycle {
  const { config, pool, bus, traces, metrics, telemetry, drainer, discovery } = p;
  const lifecycle = new Lifecycle(pool, p.inFlight, p.discoveryPending);
  lifecycle.addRoutes(routes);
  // Worker availability (readiness, /readyz, is the router's own): 200 when a worker may take requests.
  routes.add('GET', '/health', (_req, res) => {
    const ok = pool.list().some((w) => w.eligible());
    res.writeHead(ok ? 200 : 503, { 'content-length': '0' });
    res.end();
  }, false);

  routes.add('GET', '/metrics', async (_req, res) => {
    const text = await metrics.exposition();
    res.writeHead(200, { 'content-type': metrics.registry.contentType });
    res.end(text);
  }, false);

  // --- worker API (SGLang gateway's shape) ---------------------------------------------
  routes.add('GET', '/workers', (_req, res) => sendJson(res, 200, { workers: pool.infos(), discovery: discovery() }), true);
  routes.add('POST', '/workers', async (req, res) => {
    let url: unknown;
    try {
      url = JSON.parse((await readBody(req, 64 * 1024, config.bodyTimeoutMs)).toString('utf8')).url;
    } catch {
      return httpError(res, 400, 'body must be JSON {"url": "http://host:port"}');
    }
    if (typeof url !== 'string') return httpError(res, 400, 'body must be JSON {"url": "http://host:port"}');
    let info;
    try {
      info = (await pool.add(url)).info();
    } catch (err) {
      return httpError(res, 400, (err as Error).message);
    }
    sendWritten(res, info, await shareWrite(p.replicas, req, { op: 'add', url: info.url }));
  }, true);
  routes.add('GET', '/workers/:id', (_req, res, p) => {
    const w = pool.get(p.id!);
    if (!w) return httpError(res, 404, `no worker '${p.id}'`, 'NotFoundError');
    sendJson(res, 200, w.info());
  }, true);
  routes.add('PUT', '/workers/:id', async (req, res, params) => {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse((await readBody(req, 64 * 1024, config.bodyTimeoutMs)).toString('utf8'));
    } catch {
      return httpError(res, 400, 'body must be JSON {"draining": true|false}');
    }
    if (typeof body?.draining !== 'boolean') return httpError(res, 400, 'body must be JSON {"draining": true|false}');
    // Draining with no deadline (a drain's deadline comes from POST /workers/:id/drain); false calls any drain off.
    if (!(body.draining ? pool.setDraining(params.id!, true) : drainer.undrain(params.id!))) return httpError(res, 404, `no worker '${params.id}'`, 'NotFoundError');
    const info = pool.get(params.id!)!.info();
    sendWritten(res, info, await shareWrite(p.replicas, req, { op: 'draining', url: info.url, draining: body.draining }));
  }, true);
  // Drain toward a deadline: nothing new, streams moved off before it, removed at it (migration/drain.ts).
  routes.add('POST', '/workers/:id/drain', async (req, res, params) => {
    let text: string;
    try {
      text = (await readBody(req, 64 * 1024, config.bodyTimeoutMs)).toString('utf8');
    } catch {
      return httpError(res, 400, DRAIN_BODY);
    }
    const deadline = drainDeadline(text, Date.now(), config.drainGraceMs);
    if (typeof deadline === 'string') return httpError(res, 400, deadline);
    if (drainer.drain(params.id!, deadline, 'drained through the worker API') === false) return httpError(res, 404, `no worker '${params.id}'`, 'NotFoundError');
    const info = pool.get(params.id!)!.info();
    sendWritten(res, info, await shareWrite(p.replicas, req, { op: 'drain', url: info.url, deadline }));
  }, true);
  routes.add('DELETE', '/workers/:id', async (req, res, params) => {
    const url = pool.get(params.id!)?.url;
    drainer.forget(params.id!);
    if (url === undefined || !pool.remove(params.id!)) return httpError(res, 404, `no worker '${params.id}'`, 'NotFoundError');
    sendWritten(res, { removed: params.id }, await shareWrite(p.replicas, req, { op: 'remove', url }));
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
  routes.add('GET', '/events', (req, res) => serveEvents(bus, req, res, { flushMs: 100, maxQueued: 20_000, router: telemetry.instance }), true);
  // The router's identity and figures (RouterStats): what the dashboard hub polls of each router.
  routes.add('GET', '/stats', async (_req, res) => sendJson(res, 200, await telemetry.stats(pool.infos(), discovery())), true);
  // Settings the dashboard reads: the trace link (--trace-url-template, docs/tracing.md).
  routes.add('GET', '/config/ui', (_req, res) => sendJson(res, 200, { trace_url_template: config.traceUrlTemplate, tracing: telemetry.tracing !== null }), true);
  return lifecycle;
}
