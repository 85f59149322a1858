// The worker's HTTP answers in SGLang's shapes.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyError } from './request.ts';

const MAX_BODY = 64 << 20;

export function startStream(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  // Headers go out now, as Starlette sends them before the first body chunk.
  res.flushHeaders();
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** SGLang's non-/generate error shape (FastAPI's ErrorResponse). */
export function objectError(res: ServerResponse, status: number, message: string, type = String(status)): void {
  json(res, status, { object: 'error', message, type, param: null, code: status });
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new BodyError('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
