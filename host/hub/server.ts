// The hub's HTTP side: what a page reads from a host (GET /events with the same envelopes and
// replay as a router's, /api/snapshot, /api/live, rows and outputs by request, /traces, the
// dashboard's files), answered from the merged picture, and `startHub`, the entry point for
// `baton serve --router` and for checks such as `baton chaos --replicas`.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request } from 'undici';
import { serveEvents } from '../../router/http/events-endpoint.ts';
import { Routes } from '../../router/http/routes.ts';
import { streamTraces, TraceQueryError } from '../../router/http/traces-endpoint.ts';
import { localActions, recentFaults } from '../actions.ts';
import type { HostActions, LiveState, RequestOutput, RouterLinkStatus } from '../contract.ts';
import { FaultLog } from '../fault-log.ts';
import { HostError } from '../host-error.ts';
import { addHostRoutes } from '../http-api.ts';
import { guarded, sendJson } from '../http-json.ts';
import type { PrefsFile } from '../prefs.ts';
import type { SimControl } from '../sim-control.ts';
import type { TrafficGenerator } from '../traffic.ts';
import { Hub, type HubOptions } from './hub.ts';
import { hubRowMatches, parseHubTraceQuery } from './trace-query.ts';
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

/** What a hub's host runs beside the routers it follows (`baton serve --replicas`): none for `--router`. */
export interface HubLocal {
  sim: SimControl | null;
  traffic: TrafficGenerator | null;
}

/**
 * The host actions over a hub: worker actions go to every router; the simulated cluster and the
 * traffic generator, when the host runs them, as in a host of one router (actions.ts localActions).
 */
export function hubActions(hub: Hub, url: () => string, headers: Record<string, string> = {}, local: HubLocal = { sim: null, traffic: null }): HostActions {
  // Markers for the charts: dashboard actions, and workers the merged picture shows going down.
  const faults = new FaultLog();
  hub.bus.subscribe((e) => faults.observe(e));
  const own = localActions({
    ...local,
    faults,
    simWorker: (index) => hub.workers().find((w) => w.sim_index === index) ?? null,
    sentId: (id) => hub.owner(id)?.id ?? id,
  });
  const everyRouter = async (what: string, calls: { link: RouterLink; path: string; method: string; body?: unknown }[]) => {
    if (calls.length === 0) throw new HostError(404, `no router knows that worker`);
    const results = await Promise.allSettled(calls.map((c) => call(c.link, c.method, c.path, headers, c.body)));
    const failed = results.map((r, i) => (r.status === 'rejected' ? `${calls[i]!.link.label}: ${(r.reason as Error).message}` : r.value.status >= 300 ? `${calls[i]!.link.label}: ${r.value.status} ${JSON.stringify(r.value.json).slice(0, 200)}` : null)).filter((x) => x !== null);
    if (failed.length === calls.length) throw new HostError(502, `${what} failed on every router: ${failed.join('; ')}`);
    return results;
  };
  return {
    snapshot: () => ({ ...hub.snapshot(url()), sim: own.simWorkers(), traffic: own.traffic(), faults: recentFaults(faults) }),
    async live(): Promise<LiveState> {
      const router = hub.stats();
      faults.sync(router.workers);
      return { t: Date.now(), router, faults: recentFaults(faults), sim: own.simWorkers(), probes: [], hub: hub.state() };
    },
    traceRows(requestId: string) {
      if (typeof requestId !== 'string' || requestId === '') throw new HostError(400, 'request id must be a non-empty string');
      const owner = hub.owner(requestId);
      if (!owner) throw new HostError(404, `'${requestId}' is not a hub request id (<router>/<id>)`);
      return owner.rows();
    },
    ...own,
    async addWorker(workerUrl: string) {
      if (typeof workerUrl !== 'string' || workerUrl === '') throw new HostError(400, 'url must be a non-empty string');
      await everyRouter('adding the worker', hub.allLinks().map((link) => ({ link, method: 'POST', path: '/workers', body: { url: workerUrl } })));
      const w = hub.workers().find((x) => x.url === workerUrl.replace(/\/$/, ''));
      faults.record('add', w?.id ?? null, workerUrl);
      if (w) return w;
      throw new HostError(202, 'asked every router; the worker appears when they report it');
    },
    removeWorker(id: string) {
      const targets = hub.routerWorkerIds(String(id));
      if (targets.length === 0) throw new HostError(404, `no worker '${id}'`);
      faults.record('remove', String(id), hub.workers().find((w) => w.id === String(id))?.url ?? null);
      void everyRouter('removing the worker', targets.map((t) => ({ link: t.link, method: 'DELETE', path: `/workers/${encodeURIComponent(t.id)}` }))).catch(() => undefined);
      return true;
    },
    drainWorker(id: string, draining: boolean) {
      const targets = hub.routerWorkerIds(String(id));
      if (targets.length === 0) throw new HostError(404, `no worker '${id}'`);
      faults.record(draining ? 'drain' : 'undrain', String(id), hub.workers().find((w) => w.id === String(id))?.url ?? null);
      void everyRouter('draining the worker', targets.map((t) => ({ link: t.link, method: 'PUT', path: `/workers/${encodeURIComponent(t.id)}`, body: { draining: Boolean(draining) } }))).catch(() => undefined);
      return true;
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
  /** The host's own simulated cluster and traffic generator (`baton serve --replicas`). */
  local?: HubLocal;
  /** Where the dashboard's preferences are kept; absent: nowhere. */
  prefs?: PrefsFile | null;
  /**
   * The address clients send requests to, which pages name and put in their curl commands (a
   * `--replicas` primary's shared port); absent: the hub's own.
   */
  routerUrl?: string;
}

export interface HubHandle {
  url: string;
  dashboardUrl: string;
  hub: Hub;
  actions: HostActions;
  /** Each router's state and counts, and the merged totals. */
  status(): HubStatus;
  /** A request's output, from the router that owns it (GET /requests/:id/output); null when there is none. */
  requestOutput(id: string): Promise<RequestOutput | null>;
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
  const hub = new Hub({ ...opts, front: opts.routerUrl ?? null });
  const headers = opts.headers ?? {};
  let base = '';
  const actions = hubActions(hub, () => opts.routerUrl ?? base, headers, opts.local);
  const routes = new Routes();
  const add = (method: string, path: string, h: (req: IncomingMessage, res: ServerResponse, p: Record<string, string>) => void | Promise<void>) => routes.add(method, path, h, false);

  add('GET', '/events', (req, res) => serveEvents(hub.bus, req, res, { flushMs: 100, maxQueued: 20_000, router: hub.instance }));
  add('GET', '/hub', (_req, res) => sendJson(res, 200, hub.state()));
  add('GET', '/stats', (_req, res) => sendJson(res, 200, hub.stats()));
  // The same API and files as a host of one router (http-api.ts), without its admin token: the
  // hub's calls to its routers carry `headers`.
  addHostRoutes({ addRoute: add }, actions, opts.staticRoot ?? null, opts.prefs ?? null);
  // A request's rows and output come from its owner: the router whose label prefixes its id.
  add('GET', '/requests/:id/output', (_req, res, p) => guarded(res, async () => {
    const owner = hub.owner(p.id ?? '');
    if (!owner) throw new HostError(404, `'${p.id}' is not a hub request id (<router>/<id>)`);
    if (owner.link.state === 'lost') throw new HostError(503, `router ${owner.link.label} (${owner.link.url}) is lost: its outputs went with it`);
    const r = await call(owner.link, 'GET', `/requests/${encodeURIComponent(owner.id)}/output`, headers);
    if (r.status !== 200) throw new HostError(r.status === 404 ? 404 : 502, `router ${owner.link.label}: ${JSON.stringify(r.json).slice(0, 300)}`);
    sendJson(res, 200, { ...(r.json as object), request_id: p.id });
  }));
  // A router's /traces over the merged rows; request ids match the clients' (trace-query.ts).
  add('GET', '/traces', async (req, res) => {
    let q;
    try {
      q = parseHubTraceQuery(new URL(req.url ?? '/', 'http://x').searchParams, hub.routers().map((r) => r.label));
    } catch (err) {
      if (err instanceof TraceQueryError) return sendJson(res, 400, { error: { message: err.message } });
      throw err;
    }
    await streamTraces(hub.rows().filter((r) => hubRowMatches(r, q)), q.format, req, res, q.extras);
  });
  add('GET', '/config/ui', (_req, res) => sendJson(res, 200, { trace_url_template: null, tracing: false }));

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
    async requestOutput(id: string): Promise<RequestOutput | null> {
      const res = await fetch(`${base}/requests/${encodeURIComponent(id)}/output`);
      return res.ok ? ((await res.json()) as RequestOutput) : null;
    },
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
