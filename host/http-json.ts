// JSON in and out for the host's HTTP API, with the checks every mutating route shares.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HostError } from './host-error.ts';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(text);
}

/**
 * Mutating routes accept only JSON from the page's own origin. A JSON content type forces a CORS
 * preflight on any other web page (which the router never answers), and the Origin check stops
 * the rest, so a site open in another tab cannot kill workers through the loopback port.
 */
export function checkMutation(req: IncomingMessage): void {
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let originHost: string;
    try {
      originHost = new URL(origin).host;
    } catch {
      throw new HostError(403, 'bad origin');
    }
    if (originHost !== req.headers.host) throw new HostError(403, 'cross-origin request refused');
  }
  const type = req.headers['content-type'] ?? '';
  if (!type.toLowerCase().startsWith('application/json')) {
    throw new HostError(415, 'content-type must be application/json');
  }
}

export async function readJson(req: IncomingMessage, limit = 64 * 1024): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new HostError(413, 'request body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HostError(400, 'body is not valid JSON');
  }
}

/** Runs a route body, turning thrown HostErrors (and surprises) into JSON error answers. */
export async function guarded(res: ServerResponse, body: () => Promise<void> | void): Promise<void> {
  try {
    await body();
  } catch (err) {
    const status = err instanceof HostError ? err.status : 500;
    if (!res.headersSent) sendJson(res, status, { error: { message: (err as Error).message } });
    else res.destroy();
  }
}
