// The hub's HTTP side: what a page reads from a host (GET /events with the same envelopes and
// replay as a router's, /api/snapshot, /api/live, rows and outputs by request, /traces, the
// dashboard's files), answered from the merged picture, and `startHub`, the entry point for
// `baton serve --router` and for checks such as `baton chaos --replicas`.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request } from 'undici';
import { serveEvents } from '../../router/http/events-endpoint.ts';
import { Routes } from '../../router/http/routes.ts';
import { matches } from '../../router/trace/store.ts';
import { parseTraceQuery, streamTraces, TraceQueryError } from '../../router/http/traces-endpoint.ts';
import type { HostActions, LiveState, RouterLinkStatus } from '../contract.ts';
import { HostError } from '../host-error.ts';
import { checkMutation, guarded, readJson, sendJson } from '../http-json.ts';
import { serveStatic } from '../static.ts';
import { Hub, type HubOptions } from './hub.ts';
import type { RouterLink } from './link.ts';
import type { DiscoverySource } from '../../router/discovery/types.ts';
import { listenEdge } from '../../router/http/server.ts';

async function call(link: RouterLink, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await request(`${link.url}${path}`, {
    method: method as 'GET',
    headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    headersTimeout: 3000,
    bodyTimeout: 10_000,
  });
  const text = await res.body.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.statusCode, json };
}

/** The host actions over a hub: no simulated cluster or traffic of its own; worker actions go to every router. */
export function hubActions(hub: Hub, url: () => string, headers: Record<string, string> = {}): HostActions {
  const noSim = () => {
    throw new HostError(404, 'no simulated cluster is running (the hub follows routers; act on their workers)');
  };
  const everyRouter = async (what: string, calls: { link: RouterLink; path: string; method: string; body?: unknown }[]) => {
    if (calls.length === 0) throw new HostError(404, `no router knows that worker`);
    const results = await Promise.allSettled(calls.map((c) => call(c.link, c.method, c.path, headers, c.body)));
    const failed = results.map((r, i) => (r.status === 'rejected' ? `${calls[i]!.link.label}: ${(r.reason as Error).message}` : r.value.status >= 300 ? `${calls[i]!.link.label}: ${r.value.status} ${JSON.stringify(r.value.json).slice(0, 200)}` : null)).filter((x) => x !== null);
    if (failed.length === calls.length) throw new HostError(502, `${what} failed on every router: ${failed.join('; ')}`);
    return results;
  };
  return {
    snapshot: () => hub.snapshot(url()),
    async live(): Promise<LiveState> {
      return { t: Date.now(), router: hub.stats(), faults: [], sim: null, probes: [], hub: hub.state() };
    },
    traceRows(requestId: string) {
      if (typeof requestId !== 'string' || requestId === '') throw new HostError(400, 'request id must be a non-empty string');
      const owner = hub.owner(requestId);
      if (!owner) throw new HostError(404, `'${requestId}' is not a hub request id (<router>/<id>)`);
      return owner.rows();
    },
    requestBody: () => null,
    simWorkers: () => null,
    simAction: async () => noSim(),
    async addWorker(workerUrl: string) {
      if (typeof workerUrl !== 'string' || workerUrl === '') throw new HostError(400, 'url must be a non-empty string');
      await everyRouter('adding the worker', hub.allLinks().map((link) => ({ link, method: 'POST', path: '/workers', body: { url: workerUrl } })));
      const w = hub.workers().find((x) => x.url === workerUrl.replace(/\/$/, ''));
      if (w) return w;
      throw new HostError(202, 'asked every router; the worker appears when they report it');
    },
    removeWorker(id: string) {
      const targets = hub.routerWorkerIds(String(id));
      if (targets.length === 0) throw new HostError(404, `no worker '${id}'`);
      void everyRouter('removing the worker', targets.map((t) => ({ link: t.link, method: 'DELETE', path: `/workers/${encodeURIComponent(t.id)}` }))).catch(() => undefined);
      return true;
    },
    drainWorker(id: string, draining: boolean) {
      const targets = hub.routerWorkerIds(String(id));
      if (targets.length === 0) throw new HostError(404, `no worker '${id}'`);
      void everyRouter('draining the worker', targets.map((t) => ({ link: t.link, method: 'PUT', path: `/workers/${encodeURIComponent(t.id)}`, body: { draining: Boolean(draining) } }))).catch(() => undefined);
      return true;
    },
    traffic: () => null,
    setTraffic: () => {
      throw new HostError(404, 'no traffic generator is running');
    },
  };
}

export interface StartHubOptions extends HubOptions {
  port?: number;
  host?: string;
  /** The Vite build to serve at `/`; null or absent: no pages, the API only. */
  staticRoot?: string | null;
  /** Discovery sources that find routers (the Kubernetes sources set to select router pods). */
  sources?: DiscoverySource[];
}

export interface HubHandle {
  url: string;
  dashboardUrl: string;
  hub: Hub;
  actions: HostActions;
  /** Each router's state and counts, and the merged totals. */
  status(): HubStatus;
  close(): Promise<void>;
}

export interface HubStatus {
  routers: RouterLinkStatus[];
  merged: {
    /** Request rows the hub holds of the routers' current lives (the sum of their /traces request counts). */
    requests: number;
    events: number;
    gaps: number;
  };
}

export async function startHub(opts: StartHubOptions): Promise<HubHandle> {
  if (opts.routers.length === 0 && (opts.sources ?? []).length === 0) throw new HostError(400, 'the hub needs at least one router URL or a discovery source');
  for (const u of opts.routers) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new HostError(400, `not a router URL: '${u}'`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new HostError(400, `router URL must be http or https: '${u}'`);
  }
  const hub = new Hub(opts);
  const headers = opts.headers ?? {};
  let base = '';
  const actions = hubActions(hub, () => base, headers);
  const routes = new Routes();
  const add = (method: string, path: string, h: (req: IncomingMessage, res: ServerResponse, p: Record<string, string>) => void | Promise<void>) => routes.add(method, path, h, false);

  add('GET', '/events', (req, res) => serveEvents(hub.bus, req, res, { flushMs: 100, maxQueued: 20_000, router: hub.instance }));
  add('GET', '/hub', (_req, res) => sendJson(res, 200, hub.state()));
  add('GET', '/stats', (_req, res) => sendJson(res, 200, hub.stats()));
  add('GET', '/api/snapshot', (_req, res) => guarded(res, async () => sendJson(res, 200, await actions.snapshot())));
  add('GET', '/api/live', (_req, res) => guarded(res, async () => sendJson(res, 200, await actions.live!())));
  add('GET', '/api/requests/:id/rows', (_req, res, p) => guarded(res, () => sendJson(res, 200, { rows: actions.traceRows!(p.id ?? '') })));
  add('GET', '/api/requests/:id/body', (_req, res, p) => guarded(res, () => {
    throw new HostError(404, `no body kept for request '${p.id}': the hub sends no traffic of its own`);
  }));
  add('GET', '/api/sim', (_req, res) => sendJson(res, 200, { workers: null }));
  add('GET', '/api/traffic', (_req, res) => guarded(res, () => {
    throw new HostError(404, 'no traffic generator is running');
  }));
  add('POST', '/api/workers', (req, res) => guarded(res, async () => {
    checkMutation(req);
    const body = (await readJson(req)) as { url?: unknown };
    sendJson(res, 201, await actions.addWorker(body.url as string));
  }));
  add('DELETE', '/api/workers/:id', (_req, res, p) => guarded(res, () => {
    actions.removeWorker(p.id ?? '');
    sendJson(res, 200, { removed: p.id });
  }));
  add('POST', '/api/workers/:id/drain', (req, res, p) => guarded(res, async () => {
    checkMutation(req);
    const draining = ((await readJson(req)) as { draining?: unknown }).draining;
    actions.drainWorker(p.id ?? '', draining !== false);
    sendJson(res, 200, { id: p.id, draining: draining !== false });
  }));
  // A request's rows and output come from its owner: the router whose label prefixes its id.
  add('GET', '/requests/:id/output', (_req, res, p) => guarded(res, async () => {
    const owner = hub.owner(p.id ?? '');
    if (!owner) throw new HostError(404, `'${p.id}' is not a hub request id (<router>/<id>)`);
    if (owner.link.state === 'lost') throw new HostError(503, `router ${owner.link.label} (${owner.link.url}) is lost: its outputs went with it`);
    const r = await call(owner.link, 'GET', `/requests/${encodeURIComponent(owner.id)}/output`, headers);
    if (r.status !== 200) throw new HostError(r.status === 404 ? 404 : 502, `router ${owner.link.label}: ${JSON.stringify(r.json).slice(0, 300)}`);
    sendJson(res, 200, { ...(r.json as object), request_id: p.id });
  }));
  add('GET', '/traces', async (req, res) => {
    let q;
    try {
      q = parseTraceQuery(new URL(req.url ?? '/', 'http://x').searchParams);
    } catch (err) {
      if (err instanceof TraceQueryError) return sendJson(res, 400, { error: { message: err.message } });
      throw err;
    }
    await streamTraces(hub.rows().filter((r) => matches(r, q.filter)), q.format, req, res);
  });
  add('GET', '/config/ui', (_req, res) => sendJson(res, 200, { trace_url_template: null, tracing: false }));
  const staticRoot = opts.staticRoot ?? null;
  if (staticRoot !== null) {
    for (const method of ['GET', 'HEAD']) {
      add(method, '/', (req, res) => serveStatic(staticRoot, '/index.html', res, req.method === 'HEAD'));
      add(method, '/index.html', (req, res) => serveStatic(staticRoot, '/index.html', res, req.method === 'HEAD'));
      add(method, '/assets/:file', (req, res, p) => serveStatic(staticRoot, `/assets/${encodeURIComponent(p.file ?? '')}`, res, req.method === 'HEAD'));
    }
  }

  const server: Server = createServer((req, res) => {
    let pathname: string;
    try {
      pathname = new URL(req.url ?? '/', 'http://x').pathname;
    } catch {
      return sendJson(res, 400, { error: { message: 'bad request target' } });
    }
    const m = routes.match(req.method ?? 'GET', pathname);
    if (!m) return sendJson(res, 404, { error: { message: `no route ${req.method} ${pathname} on the hub` } });
    if ('allowed' in m) {
      res.setHeader('allow', m.allowed.join(', '));
      return sendJson(res, 405, { error: { message: `${req.method} not allowed on ${pathname}` } });
    }
    Promise.resolve(m.route.handler(req, res, m.params)).catch((err: Error) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: err.message } });
      else res.destroy();
    });
  });
  // Node's default backlog (511): the dashboard's own pages and API.
  base = await listenEdge(server, { host: opts.host ?? '127.0.0.1', port: opts.port ?? 0, backlog: 511 });
  await hub.start();
  for (const source of opts.sources ?? []) await hub.addSource(source);
  return {
    url: base,
    dashboardUrl: `${base}/`,
    hub,
    actions,
    status(): HubStatus {
      const routers = hub.routers();
      return {
        routers,
        merged: {
          requests: routers.reduce((n, r) => n + r.requests, 0),
          events: routers.reduce((n, r) => n + r.events, 0),
          gaps: routers.reduce((n, r) => n + r.gaps, 0),
        },
      };
    },
    async close() {
      await hub.stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
