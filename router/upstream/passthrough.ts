// Requests the router cannot stitch per sample (batches, n > 1) go to one worker as they came,
// and the answer comes back as the worker wrote it, its head's content type included: no
// migration, but still traced. A client that stops reading pauses the worker's answer (the body
// is not read while the client's socket is full); one that reads nothing for `writeTimeoutMs` is
// cut off, which ends the upstream call (the worker sees its client go, as SGLang aborts a
// request whose connection closed). A transport error is named by the caller's `classify` (the
// loop's table, core/failure.ts classifyTransportError): the transport reports the fact.
import type { ServerResponse } from 'node:http';
import type { Worker } from '../pool/worker.ts';
import type { Failure } from '../trace/row.ts';
import { drained, writeTimeoutFailure } from '../core/client-sink.ts';

/** Names a transport error (`responseStarted`: the head had gone out to the client). */
export type ClassifyTransportError = (err: unknown, responseStarted: boolean) => Failure;

const CLIENT_GONE: Failure = { kind: 'client_cancel', message: 'client disconnected', status: 499 };

export async function passThrough(worker: Worker, body: string, res: ServerResponse, headers: Record<string, string>, signal: AbortSignal, classify: ClassifyTransportError, path = '/generate', upstreamHeaders: Record<string, string> | null = null, writeTimeoutMs = 0): Promise<Failure | null> {
  try {
    // upstreamHeaders: the attempt span's traceparent when the request is traced (telemetry).
    const up = await worker.pool.request({ path, method: 'POST', headers: upstreamHeaders ? { 'content-type': 'application/json', ...upstreamHeaders } : { 'content-type': 'application/json' }, body, signal });
    const ct = up.headers['content-type'];
    res.writeHead(up.statusCode, { ...(ct ? { 'content-type': String(ct) } : {}), ...headers });
    for await (const chunk of up.body) {
      if (res.write(chunk)) continue;
      // Leaving the loop (return) destroys the body, and with it the upstream connection.
      const how = await drained(res, writeTimeoutMs);
      if (how === 'close') return CLIENT_GONE;
      if (how === 'timeout') {
        res.destroy();
        return writeTimeoutFailure(writeTimeoutMs);
      }
    }
    res.end();
    // The answer is whole at the router; one the client leaves unread is cut off in time too.
    if (writeTimeoutMs > 0 && res.socket?.writableNeedDrain) void drained(res, writeTimeoutMs).then((how) => how === 'timeout' && res.destroy());
    return up.statusCode >= 500 ? { kind: 'http_5xx', message: `worker answered ${up.statusCode}`, status: up.statusCode } : null;
  } catch (err) {
    if (signal.aborted) return CLIENT_GONE;
    const failure = classify(err, res.headersSent);
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify({ error: { message: failure.message, type: failure.kind, code: 502 } }));
    } else res.destroy();
    return failure;
  }
}
