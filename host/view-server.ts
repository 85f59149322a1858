// `baton view FILE`: the dashboard over one trace file, with no router. A small loopback server
// hands out the Vite build and the file itself (GET /api/file); the page, opened as
// /?file=NAME, reads the rows and shows the same views as live, without the live-only controls.
// It also keeps the dashboard's preferences (GET / PUT /api/prefs, the file `baton serve` uses):
// a view on a new port is a new origin, whose localStorage has no theme.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { basename } from 'node:path';
import { securityHeaders, serveStatic } from './static.ts';
import { listenEdge } from '../router/http/server.ts';
import { checkMutation, guarded, readJson, sendJson } from './http-json.ts';
import { HostError } from './host-error.ts';
import type { PrefsFile } from './prefs.ts';

export interface ViewServerOptions {
  /** The trace file: JSON Lines or CSV as Baton exports them. */
  file: string;
  port?: number;
  host?: string;
  /** The Vite build (dist/renderer). */
  staticRoot: string;
  /** Where the dashboard's preferences are kept (host/prefs.ts); absent: nowhere. */
  prefs?: PrefsFile | null;
}

export interface ViewServer {
  url: string;
  /** The page for the file. */
  pageUrl: string;
  close(): Promise<void>;
}

export async function startViewServer(opts: ViewServerOptions): Promise<ViewServer> {
  const info = await stat(opts.file);
  if (!info.isFile()) throw new Error(`${opts.file} is not a file`);
  const name = basename(opts.file);
  const type = /\.csv$/i.test(name) ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8';
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const head = req.method === 'HEAD';
    if (url.pathname === '/api/prefs' && (req.method === 'GET' || req.method === 'PUT')) {
      const prefs = opts.prefs ?? null;
      return void guarded(res, async () => {
        if (req.method === 'GET') return sendJson(res, 200, prefs ? await prefs.read() : {});
        checkMutation(req);
        if (!prefs) throw new HostError(404, 'this host keeps no preferences');
        sendJson(res, 200, await prefs.update(await readJson(req)));
      });
    }
    if (req.method !== 'GET' && !head) {
      res.writeHead(405, { allow: 'GET, HEAD', ...securityHeaders() });
      return void res.end();
    }
    if (url.pathname === '/' && !url.searchParams.has('file')) {
      res.writeHead(302, { location: `/?file=${encodeURIComponent(name)}`, ...securityHeaders() });
      return void res.end();
    }
    if (url.pathname === '/api/file') {
      res.writeHead(200, {
        'content-type': type, 'content-length': String(info.size), 'cache-control': 'no-store', 'x-baton-file': encodeURIComponent(name), ...securityHeaders(),
      });
      if (head) return void res.end();
      const stream = createReadStream(opts.file);
      stream.on('error', () => res.destroy());
      return void stream.pipe(res);
    }
    if (url.pathname === '/' || url.pathname === '/index.html') return void serveStatic(opts.staticRoot, '/index.html', res, head);
    if (url.pathname.startsWith('/assets/')) return void serveStatic(opts.staticRoot, url.pathname, res, head);
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', ...securityHeaders() });
    res.end('not found\n');
  });
  // Node's default backlog (511): the dashboard's own pages and API.
  const base = await listenEdge(server, { host: opts.host ?? '127.0.0.1', port: opts.port ?? 0, backlog: 511 });
  return {
    url: base,
    pageUrl: `${base}/?file=${encodeURIComponent(name)}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
