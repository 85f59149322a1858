// Reading a request body with a size cap and a time limit: a client that sends too much or too
// slowly gets a clear error instead of holding memory or a socket.
//
// The time limit is kept by one coarse sweep over the bodies being read (every SWEEP_MS), not by
// a timer per request: a /generate body nearly always arrives with its headers, and a timer set
// and cleared within the same turn cost the router a timer list's insert and removal for every
// request. The sweep runs only while some body is being read.
import type { IncomingMessage } from 'node:http';

export class BodyError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** How often bodies still being read are checked against their time limit. */
const SWEEP_MS = 50;

class BodyRead {
  readonly chunks: Buffer[] = [];
  size = 0;
  settled = false;
  /** The sweep count at which this read runs out of time. */
  deadline = 0;

  constructor(
    readonly req: IncomingMessage,
    readonly maxBytes: number,
    readonly timeoutMs: number,
    readonly resolve: (b: Buffer) => void,
    readonly reject: (e: BodyError) => void,
  ) {}
}

const reading = new Set<BodyRead>();
let sweeps = 0;
let sweeper: NodeJS.Timeout | null = null;

function sweep(): void {
  sweeps++;
  if (reading.size === 0) {
    clearInterval(sweeper!);
    sweeper = null;
    return;
  }
  for (const r of reading) if (sweeps >= r.deadline) finish(r, new BodyError(408, `request body not received within ${r.timeoutMs} ms`));
}

function finish(r: BodyRead, err: BodyError | null): void {
  if (r.settled) return;
  r.settled = true;
  reading.delete(r);
  if (err) {
    r.req.resume();
    r.reject(err);
  } else r.resolve(r.chunks.length === 1 ? r.chunks[0]! : Buffer.concat(r.chunks, r.size));
}

function onData(r: BodyRead, c: Buffer): void {
  r.size += c.length;
  if (r.size > r.maxBytes) finish(r, new BodyError(413, `request body is larger than ${r.maxBytes} bytes`));
  else if (!r.settled) r.chunks.push(c);
}

export function readBody(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) {
      reject(new BodyError(413, `request body is larger than ${maxBytes} bytes`));
      req.resume();
      return;
    }
    const r = new BodyRead(req, maxBytes, timeoutMs, resolve, reject);
    if (timeoutMs > 0) {
      // Whole sweeps that fit in the limit, and one more for the sweep already under way.
      r.deadline = sweeps + Math.ceil(timeoutMs / SWEEP_MS) + 1;
      reading.add(r);
      if (sweeper === null) {
        sweeper = setInterval(sweep, SWEEP_MS);
        sweeper.unref();
      }
    }
    req.on('data', (c: Buffer) => onData(r, c));
    req.on('end', () => finish(r, null));
    req.on('error', () => finish(r, new BodyError(400, 'request body could not be read')));
    req.on('aborted', () => finish(r, new BodyError(400, 'request body aborted')));
  });
}
