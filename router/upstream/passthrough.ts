// Requests the router cannot stitch per sample (batches, n > 1) go to one worker as they came,
// and the answer comes back as the worker wrote it: no migration, but still traced.
import type { ServerResponse } from 'node:http';
import type { Worker } from '../pool/worker.ts';
import { classifyTransportError, type Failure } from '../migration/failure.ts';

export async function passThrough(worker: Worker, body: string, res: ServerResponse, headers: Record<string, string>, signal: AbortSignal, path = '/generate', upstreamHeaders: Record<string, string> | null = null): Promise<Failure | null> {
  try {
    // upstreamHeaders: the attempt span's traceparent when the request is traced (telemetry).
    const up = await worker.pool.request({ path, method: 'POST', headers: upstreamHeaders ? { 'content-type': 'application/json', ...upstreamHeaders } : { 'content-type': 'application/json' }, body, signal });
    const ct = up.headers['content-type'];
    res.writeHead(up.statusCode, { ...(ct ? { 'content-type': String(ct) } : {}), ...headers });
    for await (const chunk of up.body) {
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
    }
    res.end();
    return up.statusCode >= 500 ? { kind: 'http_5xx', message: `worker answered ${up.statusCode}`, status: up.statusCode } : null;
  } catch (err) {
    if (signal.aborted) return { kind: 'client_cancel', message: 'client disconnected', status: 499 };
    const failure = classifyTransportError(err, res.headersSent);
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify({ error: { message: failure.message, type: failure.kind, code: 502 } }));
    } else res.destroy();
    return failure;
  }
}
