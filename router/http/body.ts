// Reading a request body with a size cap and a time limit: a client that sends too much or too
// slowly gets a clear error instead of holding memory or a socket.
import type { IncomingMessage } from 'node:http';

export class BodyError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export function readBody(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) {
      reject(new BodyError(413, `request body is larger than ${maxBytes} bytes`));
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (err: BodyError | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        req.resume();
        reject(err);
      } else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const timer = timeoutMs > 0 ? setTimeout(() => finish(new BodyError(408, `request body not received within ${timeoutMs} ms`)), timeoutMs) : undefined;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) finish(new BodyError(413, `request body is larger than ${maxBytes} bytes`));
      else if (!settled) chunks.push(c);
    });
    req.on('end', () => finish(null));
    req.on('error', () => finish(new BodyError(400, 'request body could not be read')));
    req.on('aborted', () => finish(new BodyError(400, 'request body aborted')));
  });
}
