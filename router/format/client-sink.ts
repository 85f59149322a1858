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

/**
 * Sinks holding frames for the end of this turn. A worker's read often holds several frames of
 * one stream (W1 at full load: ~7 a read), and each `res.write` costs the http layer ~1 µs of
 * JavaScript (the chunk's size line, its pieces, the cork), so the frames a turn brings are
 * written once, when its microtasks run: the same bytes, in the same order, in one chunk.
 */
const dirty: ClientSink[] = [];
/** Frames are joined into one chunk up to this many bytes, and written one by one above it. */
const COALESCE_MAX = 16 * 1024;
let flushQueued = false;

function flushDirty(): void {
  flushQueued = false;
  // A flush may add a sink (never here in practice); the live length covers it.
  for (let i = 0; i < dirty.length; i++) {
    const sink = dirty[i]!;
    try {
      sink.flush();
    } catch (err) {
      // Not expected (res.write reports its errors through 'error', not by throwing), but a
      // throw here would be uncaught: that client's stream is broken off instead ('close' then
      // cancels its request), and the other sinks are still written.
      sink.abandon(err as Error);
    }
  }
  dirty.length = 0;
}

export class ClientSink {
  started = false;
  ended = false;
  /** The client went away before the answer ended. */
  gone = false;
  private drainWaiters: (() => void)[] = [];
  private drainListened = false;
  /** Frames written this turn and not yet handed to `res` (see `dirty`). */
  private readonly pending: (Buffer | string)[] = [];
  /** Their length (a string's in UTF-16 units: only compared with COALESCE_MAX). */
  private pendingLength = 0;

  constructor(
    private readonly res: ServerResponse,
    readonly streaming: boolean,
    private readonly headers: Record<string, string>,
    onGone: () => void,
    private readonly errors: ErrorShapes,
  ) {
    res.on('close', () => {
      this.pending.length = 0;
      this.pendingLength = 0;
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
   * Write bytes of whole SSE frames: held until the end of this turn, then written with the
   * turn's other frames as one chunk. Returns false when the client's socket is full; the
   * caller pauses its upstream until `onDrain` fires, so a slow client cannot grow the router's
   * memory by more than a read. (`writableNeedDrain` stays set until 'drain' is emitted, so a
   * caller told "full" by a turn's later write still gets its drain.)
   */
  writeRaw(data: Buffer | string): boolean {
    if (this.gone || this.ended) return true;
    if (!this.started) this.start();
    if (this.pending.length === 0) {
      dirty.push(this);
      if (!flushQueued) {
        flushQueued = true;
        queueMicrotask(flushDirty);
      }
    }
    this.pending.push(data);
    this.pendingLength += data.length;
    return !this.res.writableNeedDrain;
  }

  /** Hand the frames held this turn to `res`: as one chunk when they are small. */
  flush(): void {
    const p = this.pending;
    if (p.length === 0) return;
    const n = p.length;
    const length = this.pendingLength;
    this.pendingLength = 0;
    if (this.gone || this.ended) {
      p.length = 0;
      return;
    }
    if (n === 1) {
      this.res.write(p[0]!);
    } else if (length <= COALESCE_MAX) {
      // One copy into a new chunk: cheaper than a write per frame, for frames this small.
      let strings = 0;
      for (let i = 0; i < n; i++) if (typeof p[i] === 'string') strings++;
      if (strings === n) this.res.write(p.join(''));
      else this.res.write(Buffer.concat(strings === 0 ? (p as Buffer[]) : p.map((x) => (typeof x === 'string' ? Buffer.from(x) : x))));
    } else {
      // Large frames (cumulative logprobs): copying them costs more than the writes.
      for (let i = 0; i < n; i++) this.res.write(p[i]!);
    }
    p.length = 0;
  }

  /** Break the response off (a flush that threw): the client sees its stream cut. */
  abandon(err: Error): void {
    this.pending.length = 0;
    this.pendingLength = 0;
    this.res.destroy(err);
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
    this.flush();
    this.ended = true;
    this.res.end(SSE_DONE);
  }

  /** A failure after the stream started: an in-band error frame (the format's), then [DONE]. */
  endStreamWithError(frame: unknown): void {
    if (this.gone || this.ended) return;
    if (!this.started) this.start();
    this.flush();
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
