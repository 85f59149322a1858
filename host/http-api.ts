// Browser mode's HTTP API and the dashboard's files, added to the router's own server with
// addRoute, or to a dashboard hub's (host/hub/server.ts). Events travel on the router's `/events` (SSE) and exports on its `/traces`.
import type { RouteHandler, RouterHandle } from '../router/api.ts';
import type { HostActions } from './contract.ts';
import { checkMutation, guarded, readJson, sendJson } from './http-json.ts';
import { HostError } from './host-error.ts';
import { serveStatic } from './static.ts';
import type { PrefsFile } from './prefs.ts';

/** The routes this module adds, for docs and tests. */
export const HOST_ROUTES = [
  ['GET', '/api/snapshot'],
  ['GET', '/api/live'],
  ['GET', '/api/requests/:id/rows'],
  ['GET', '/api/requests/:id/body'],
  ['GET', '/api/sim'],
  ['POST', '/api/sim/:index/:action'],
  ['GET', '/api/traffic'],
  ['PUT', '/api/traffic'],
  ['POST', '/api/workers'],
  ['DELETE', '/api/workers/:id'],
  ['POST', '/api/workers/:id/drain'],
  ['GET', '/api/prefs'],
  ['PUT', '/api/prefs'],
] as const;

function field(body: unknown, name: string): unknown {
  return body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
}

/** `router`: a router (its admin-token routes) or a hub's server (host/hub/server.ts). */
export function addHostRoutes(router: Pick<RouterHandle, 'addRoute'>, actions: HostActions, staticRoot: string | null, prefs: PrefsFile | null = null): void {
  router.addRoute('GET', '/api/snapshot', (_req, res) => guarded(res, async () => sendJson(res, 200, await actions.snapshot())));

  const missing = (name: string) => new HostError(404, `this host does not offer ${name}`);
  router.addRoute('GET', '/api/live', (_req, res) => guarded(res, async () => {
    if (!actions.live) throw missing('live figures');
    sendJson(res, 200, await actions.live());
  }));

  router.addRoute('GET', '/api/requests/:id/rows', (_req, res, params) => guarded(res, () => {
    if (!actions.traceRows) throw missing('trace rows by request');
    sendJson(res, 200, { rows: actions.traceRows(params.id ?? '') });
  }));

  router.addRoute('GET', '/api/requests/:id/body', (_req, res, params) => guarded(res, () => {
    const body = actions.requestBody?.(params.id ?? '');
    if (!body) throw new HostError(404, `no body kept for request '${params.id}': only requests the traffic generator sent are kept`);
    sendJson(res, 200, body);
  }));

  router.addRoute('GET', '/api/sim', (_req, res) => guarded(res, () => sendJson(res, 200, { workers: actions.simWorkers() })));

  router.addRoute('POST', '/api/sim/:index/:action', (req, res, params) => guarded(res, async () => {
    checkMutation(req);
    await readJson(req);
    const index = Number(params.index);
    const workers = await actions.simAction(index, params.action as never);
    sendJson(res, 200, { workers });
  }));

  router.addRoute('GET', '/api/traffic', (_req, res) => guarded(res, () => {
    const status = actions.traffic();
    if (!status) throw new HostError(404, 'no traffic generator is running');
    sendJson(res, 200, status);
  }));

  router.addRoute('PUT', '/api/traffic', (req, res) => guarded(res, async () => {
    checkMutation(req);
    sendJson(res, 200, actions.setTraffic((await readJson(req)) as never));
  }));

  router.addRoute('POST', '/api/workers', (req, res) => guarded(res, async () => {
    checkMutation(req);
    const worker = await actions.addWorker(field(await readJson(req), 'url') as string);
    sendJson(res, 201, worker);
  }));

  router.addRoute('DELETE', '/api/workers/:id', (req, res, params) => guarded(res, () => {
    // A DELETE from another origin always needs a preflight, but the Origin check still applies.
    if (req.headers.origin !== undefined && new URL(req.headers.origin).host !== req.headers.host) {
      throw new HostError(403, 'cross-origin request refused');
    }
    actions.removeWorker(params.id ?? '');
    sendJson(res, 200, { removed: params.id });
  }));

  router.addRoute('POST', '/api/workers/:id/drain', (req, res, params) => guarded(res, async () => {
    checkMutation(req);
    const draining = field(await readJson(req), 'draining');
    actions.drainWorker(params.id ?? '', draining === undefined ? true : draining === true);
    sendJson(res, 200, { id: params.id, draining: draining !== false });
  }));

  // The dashboard's preferences, kept by the host so that a page on another port finds them.
  router.addRoute('GET', '/api/prefs', (_req, res) => guarded(res, async () => sendJson(res, 200, prefs ? await prefs.read() : {})));
  router.addRoute('PUT', '/api/prefs', (req, res) => guarded(res, async () => {
    checkMutation(req);
    if (!prefs) throw new HostError(404, 'this host keeps no preferences');
    sendJson(res, 200, await prefs.update(await readJson(req)));
  }));

  if (staticRoot !== null) {
    const page = (path: string): RouteHandler => (req, res) => serveStatic(staticRoot, path, res, req.method === 'HEAD');
    const asset: RouteHandler = (req, res, params) =>
      serveStatic(staticRoot, `/assets/${encodeURIComponent(params.file ?? '')}`, res, req.method === 'HEAD');
    for (const method of ['GET', 'HEAD']) {
      router.addRoute(method, '/', page('/index.html'));
      router.addRoute(method, '/index.html', page('/index.html'));
      router.addRoute(method, '/assets/:file', asset);
    }
  }
}
