// Helpers for the router-front tests: one raw exchange with whatever answers (router or worker),
// read the way a client reads it, so that the router's answer can be compared with the worker's
// own answer to the same request.
import { request } from 'undici';

export interface Exchange {
  status: number;
  contentType: string | null;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export async function send(url: string, path: string, opts: { method?: string; body?: string | Buffer; contentType?: string | null; headers?: Record<string, string> } = {}): Promise<Exchange> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.contentType !== null && opts.body !== undefined) headers['content-type'] = opts.contentType ?? 'application/json';
  const res = await request(url + path, { method: (opts.method ?? (opts.body === undefined ? 'GET' : 'POST')) as 'GET', headers, body: opts.body });
  const text = await res.body.text();
  const ct = res.headers['content-type'];
  return { status: res.statusCode, contentType: ct === undefined ? null : String(ct), headers: res.headers, text };
}

export const post = (url: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  send(url, path, { body: typeof body === 'string' ? body : JSON.stringify(body), headers });

/** The JSON frames of an SSE body, and whether it ended with [DONE]. */
export function frames(text: string): { chunks: Record<string, unknown>[]; done: boolean } {
  const parts = text.split('\n\n').filter(Boolean);
  const done = parts.at(-1) === 'data: [DONE]';
  const chunks = parts.filter((p) => p !== 'data: [DONE]').map((p) => {
    if (!p.startsWith('data: ')) throw new Error(`not an SSE data frame: ${p.slice(0, 80)}`);
    return JSON.parse(p.slice(6)) as Record<string, unknown>;
  });
  return { chunks, done };
}

/** The keys of a JSON object, in order (shape comparisons). */
export function keysOf(text: string): string[] {
  return Object.keys(JSON.parse(text) as Record<string, unknown>);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function until<T>(fn: () => T | Promise<T>, ms = 5000, what = 'condition'): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

export interface Recorded {
  method: string;
  path: string;
  body: string;
}

/**
 * A transparent proxy in front of one worker that records every request as it arrived (raw body
 * text), so a test can see exactly what the router sent upstream. Streams pass through as they come.
 */
export async function recordingProxy(upstream: string): Promise<{ url: string; calls: Recorded[]; close(): Promise<void> }> {
  const { createServer } = await import('node:http');
  const calls: Recorded[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      calls.push({ method: req.method ?? 'GET', path: req.url ?? '/', body: body.toString('utf8') });
      const ac = new AbortController();
      res.on('close', () => ac.abort());
      void request(upstream + (req.url ?? '/'), {
        method: (req.method ?? 'GET') as 'GET',
        headers: req.headers['content-type'] ? { 'content-type': String(req.headers['content-type']) } : {},
        body: body.length > 0 ? body : undefined,
        signal: ac.signal,
      }).then(async (up) => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(up.headers)) if (typeof v === 'string' && k !== 'transfer-encoding' && k !== 'connection') headers[k] = v;
        res.writeHead(up.statusCode, headers);
        for await (const c of up.body) res.write(c);
        res.end();
      }).catch(() => res.destroy()); // the upstream refused, or the client left mid-body (the abort above)
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
