// Serves the Vite build (dist/renderer) in browser mode. The request path is untrusted: it is
// decoded once, any `..`, backslash or NUL refuses it, and the resolved file must stay under root.
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import type { ServerResponse } from 'node:http';
import { DASHBOARD_CSP_HEADER } from './csp.ts';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** The file a URL path names under root, or null when the path is not acceptable. */
export function resolveStaticPath(root: string, urlPath: string): string | null {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath.split('?')[0] ?? '');
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return null;
  const segments = decoded.split('/').filter((s) => s !== '');
  // Dot files and parent segments are never part of a Vite build.
  if (segments.some((s) => s.startsWith('.'))) return null;
  const rel = segments.length === 0 ? 'index.html' : segments.join('/');
  if (!(extname(rel) in CONTENT_TYPES)) return null;
  const base = resolve(root);
  const file = resolve(base, rel);
  return file.startsWith(base + sep) ? file : null;
}

export function contentType(file: string): string {
  return CONTENT_TYPES[extname(file)] ?? 'application/octet-stream';
}

export function securityHeaders(): Record<string, string> {
  return {
    'content-security-policy': DASHBOARD_CSP_HEADER,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cross-origin-opener-policy': 'same-origin',
  };
}

function notFound(res: ServerResponse): void {
  res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', ...securityHeaders() });
  res.end('not found\n');
}

/** Answers one GET/HEAD for a file of the build; 404 for anything else. */
export async function serveStatic(root: string, urlPath: string, res: ServerResponse, head = false): Promise<void> {
  const file = resolveStaticPath(root, urlPath);
  if (!file) return notFound(res);
  try {
    // realpath: a symlink inside the build must not lead out of it.
    const [real, base] = await Promise.all([realpath(file), realpath(root)]);
    if (!real.startsWith(base + sep)) return notFound(res);
    const info = await stat(real);
    if (!info.isFile()) return notFound(res);
    // Vite's assets carry a content hash in their names; index.html must always be fresh.
    const immutable = real.startsWith(join(base, 'assets') + sep);
    res.writeHead(200, {
      'content-type': contentType(real),
      'content-length': String(info.size),
      'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      ...securityHeaders(),
    });
    if (head) return void res.end();
    await new Promise<void>((done) => {
      const stream = createReadStream(real);
      stream.on('error', () => { res.destroy(); done(); });
      stream.on('end', done);
      stream.pipe(res);
    });
  } catch {
    if (!res.headersSent) notFound(res);
    else res.destroy();
  }
}
