// The client side of a logical request: one stable sink for the whole life of the request,
// whatever happens to the attempts underneath (after undici's RetryHandler, whose client-facing
// controller outlives each re-dispatch). It decides when the response starts: a stream starts
// with its first forwarded frame, so a failure before any output can still become a clean 5xx.
// SGLang and vLLM frame their streams alike (`data: <json>\n\n`, then `data: [DONE]\n\n`);
// the error bodies are the format's.
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export const SSE_DONE = Buffer.from('data: [DONE]\n\n');

export function sseFrame(json: string): string {
  return `data: ${json}\n\n`;
}

/** The shapes of the errors the router writes itself, in the client's format. */
export interface ErrorShapes {
  /** A JSON error body (no stream started). */
  body(status: number, message: string, type: string): unknown;
  /** An in-band error frame's object (a stream started). */
  frame(status: number, message: string, type: string): unknown;
}

/** A frame longer than this goes out as three writes (size line, frame, CRLF) instead of one copy. */
const COPY_MAX = 16 * 1024;

function uncork(s: Socket): void {
  s.uncork();
}

/**
 * One frame as one HTTP/1.1 chunk, written on the client's socket itself. Node's `res.write`
 * does the same in four writes (the size's hex, CRLF, the data, CRLF), each an entry in the
 * corked socket's buffer and an iovec of its writev, with its checks on the way (in W1's heap
 * profile Node's writeOrBuffer and clearBuffer were 30 % of the bytes allocated, 11 % after:
 * docs/benchmarks.md, "Baton's own upstream client"). The
 * socket is corked for the rest of the turn as Node does it, so the frames of one upstream read
 * still leave in one writev.
 */
function writeChunked(s: Socket, data: Buffer | string): boolean {
  if (s.destroyed) return true;
  if (!s.writableCorked) {
    s.cork();
    process.nextTick(uncork, s);
  }
  const len = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
  if (len === 0) return true; // an empty chunk would end the body
  const hex = len.toString(16);
  if (len > COPY_MAX) {
    s.write(`${hex}\r\n`, 'latin1');
    s.write(data);
    return s.write('\r\n', 'latin1');
  }
  const h = hex.length;
  const out = Buffer.allocUnsafe(h + len + 4);
  out.write(hex, 0, 'latin1');
  out[h] = 0x0d;
  out[h + 1] = 0x0a;
  if (typeof data === 'string') out.write(data, h + 2, 'utf8');
  else data.copy(out, h + 2);
  out[h + 2 + len] = 0x0d;
  out[h + 3 + len] = 0x0a;
  return s.write(out);
}

export class ClientSink {
  started = false;
  ended = false;
  /** The client went away before the answer ended. */
  gone = false;
  private drainWaiters: (() => void)[] = [];
  private drainListened = false;
  /**
   * The client's socket, once the stream's head is out and the socket is this response's alone
   * (not a pipelined answer queued behind another, chunked as HTTP/1.1 allows): frames are then
   * written on it directly (writeChunked). Null: through `res.write`.
   */
  private direct: Socket | null = null;
  private readonly onSocketDrain = (): void => this.flushDrainWaiters();

  constructor(
    private readonly res: ServerResponse,
    readonly streaming: boolean,
    private readonly headers: Record<string, string>,
    onGone: () => void,
    private readonly errors: ErrorShapes,
  ) {
    res.on('close', () => {
      if (!this.ended) {
        this.gone = true;
        onGone();
      }
      // A keep-alive socket outlives the response: take back what this one listened for.
      if (this.direct !== null && this.drainListened) this.direct.off('drain', this.onSocketDrain);
      this.direct = null;
      this.flushDrainWaiters();
    });
  }

  private flushDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  private start(): void {
    this.started = true;
    const res = this.res;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...this.headers,
    });
    const s = res.socket;
    // Only while this response owns the socket and Node has nothing of it buffered; chunked is
    // Node's choice for an HTTP/1.1 client (an HTTP/1.0 one gets the body raw until the close).
    const owned = s != null && (s as Socket & { _httpMessage?: unknown })._httpMessage === res && res.chunkedEncoding && s.writable;
    if (!owned) return; // headers go out with the first frame, through res.write
    // Corked for the turn, so that the head and the first frame leave in one packet.
    if (!s.writableCorked) {
      s.cork();
      process.nextTick(uncork, s);
    }
    res.flushHeaders();
    if ((res as ServerResponse & { outputData?: unknown[] }).outputData?.length === 0) this.direct = s;
  }

  /**
   * Write bytes of whole SSE frames. Returns false when the client's socket is full; the caller
   * pauses its upstream until `onDrain` fires, so a slow client cannot grow the router's memory.
   */
  writeRaw(data: Buffer | string): boolean {
    if (this.gone || this.ended) return true;
    if (!this.started) this.start();
    const s = this.direct;
    return s !== null ? writeChunked(s, data) : this.res.write(data);
  }

  writeChunk(chunk: unknown): boolean {
    return this.writeJson(JSON.stringify(chunk));
  }

  /** A frame whose JSON the caller wrote already. */
  writeJson(json: string): boolean {
    return this.writeRaw(sseFrame(json));
  }

  onDrain(fn: () => void): void {
    // Listened for only once a write has filled the socket (most streams never do).
    if (!this.drainListened) {
      this.drainListened = true;
      // Direct writes fill the socket, not the response: its 'drain' is the one that fires.
      if (this.direct !== null) this.direct.on('drain', this.onSocketDrain);
      else this.res.on('drain', () => this.flushDrainWaiters());
    }
    this.drainWaiters.push(fn);
  }

  /** End a stream normally. */
  endStream(): void {
    if (this.gone || this.ended) return;
    if (!this.started) this.start();
    this.ended = true;
    this.res.end(SSE_DONE);
  }

  /** A failure after the stream started: an in-band error frame (the format's), then [DONE]. */
  endStreamWithError(frame: unknown): void {
    if (this.gone || this.ended) return;
    if (!this.started) this.start();
    const s = this.direct;
    const f = sseFrame(JSON.stringify(frame));
    this.ended = true;
    if (s !== null) writeChunked(s, f);
    else this.res.write(f);
    this.res.end(SSE_DONE);
  }

  /** A whole JSON answer (unary success, or any error before a stream started). */
  json(status: number, body: string | Buffer, extraHeaders: Record<string, string> = {}): void {
    if (this.gone || this.ended) return;
    this.ended = true;
    this.res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      ...this.headers,
      ...extraHeaders,
    });
    this.res.end(body);
  }

  /** Fail the request: in-band if a stream has started, else a JSON error with `status`. */
  fail(status: number, message: string, type: string): void {
    if (this.started) this.endStreamWithError(this.errors.frame(status, message, type));
    else this.json(status, JSON.stringify(this.errors.body(status, message, type)));
  }
}
