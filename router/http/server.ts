// The router's HTTP server: one request listener over the route table, keys first. index.ts makes
// one for the router's port; a replica (router/replicas/) makes a second on its own loopback port,
// serving the same routes.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo } from 'node:net';
import type { RouterConfig } from '../config.ts';
import type { Routes } from './routes.ts';
import { accessRefusal, type Keys } from './guards.ts';
import { httpError, sendJson } from './admin-api.ts';

/** Request targets whose URL pathname is the target itself: segments of these characters only (no dots, no %, no query). */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_-]+)+$/;

/** What the server answers for paths and methods no route serves (fronts/index.ts UNROUTED: Starlette's answers). */
export interface Unrouted {
  notFound(res: ServerResponse): void;
  methodNotAllowed(res: ServerResponse, allowed: string[]): void;
}

export function createEdgeServer(config: RouterConfig, routes: Routes, keys: Keys, UNROUTED: Unrouted): Server {
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
        const shownHost = config.host.includes(':') ? `[${config.host}]` : config.host;
        res.writeHead(307, { location: `http://${req.headers.host ?? `${shownHost}:${(server.address() as AddressInfo).port}`}${pathname.slice(0, -1)}${target.search}`, 'content-length': '0' });
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
  return server;
}

/**
 * Listen; the URL it answers on. `exclusive`: a cluster worker's own port, not the primary's
 * shared handle (node:cluster hands every worker that listens on port 0 the same port otherwise).
 * `reusePort`: SO_REUSEPORT (Node >= 22.12), so independent replica processes share the port.
 */
export async function listenEdge(server: Server, o: { host: string; port: number; backlog: number; exclusive?: boolean; reusePort?: boolean }): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Node's default backlog (511) overflows when thousands of clients connect at once, which they
    // see as SYN retransmits (a second or more) or resets; the kernel caps it at somaxconn.
    server.listen({ port: o.port, host: o.host, backlog: o.backlog, exclusive: o.exclusive ?? false, ...(o.reusePort ? { reusePort: true } : {}) }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`;
}

/**
 * Stop accepting on `server` but keep serving its open connections (a replica retiring in a
 * reload: the other replicas take the new connections). Not `server.close()`: Node's http close
 * also closes the idle keep-alive connections at once, and a client that has just written its
 * next request on one of them sees it reset. Left open, an idle connection ends by the client's
 * choice or at the keep-alive timeout the server announced (`Keep-Alive: timeout=5`), which
 * clients that honour the hint (undici, Node's agent) leave first. A request that still arrives on
 * one is served and answered `Connection: close`, so the client does not reuse it. Resolves once
 * every connection has ended.
 */
const netClose = NetServer.prototype.close;

export function stopAccepting(server: Server): Promise<void> {
  server.prependListener('request', (_req, res) => {
    res.shouldKeepAlive = false;
  });
  return new Promise<void>((resolve) => {
    // net.Server's close: the listening handle only (node:cluster's shared one is left to the
    // other replicas, with what waits in its accept queue); 'close' follows the last connection.
    netClose.call(server, () => resolve());
  });
}

/** Stop listening, now, and leave the open connections be (a replica's own port handed to its successor). */
export function closeListener(server: Server): void {
  if (server.listening) netClose.call(server);
}
