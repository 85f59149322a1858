// The client side of a logical request: one stable sink for the whole life of the request,
// whatever happens to the attempts underneath (after undici's RetryHandler, whose client-facing
// controller outlives each re-dispatch). It decides when the response starts: a stream starts
// with its first forwarded frame, so a failure before any output can still become a clean 5xx.
// SGLang and vLLM frame their streams alike (`data: <json>\n\n`, then `data: [DONE]\n\n`);
// the error bodies are the format's.
import type { ServerResponse } from 'node:http';

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

export class ClientSink {
  started = false;
  ended = false;
  /** The client went away before the answer ended. */
  gone = false;
  private drainWaiters: (() => void)[] = [];
  private drainListened = false;

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
    this.res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...this.headers,
    });
    // Headers go out with the first frame, in one packet.
  }

  /**
   * Write bytes of whole SSE frames. Returns false when the client's socket is full; the caller
   * pauses its upstream until `onDrain` fires, so a slow client cannot grow the router's memory.
   */
  writeRaw(data: Buffer | string): boolean {
    if (this.gone || this.ended) return true;
    if (!this.started) this.start();
    return this.res.write(data);
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
      this.res.on('drain', () => this.flushDrainWaiters());
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
    this.ended = true;
    this.res.write(sseFrame(JSON.stringify(frame)));
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
