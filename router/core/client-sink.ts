// The client side of a logical request: one stable sink for the whole life of the request,
// whatever happens to the attempts underneath (after undici's RetryHandler, whose client-facing
// controller outlives each re-dispatch). It decides when the response starts: a stream starts
// with its first forwarded frame, so a failure before any output can still become a clean 5xx.
// SGLang and vLLM frame their streams alike (`data: <json>\n\n`, then `data: [DONE]\n\n`);
// the error bodies are the format's.
//
// A client that stops reading fills its socket; the caller pauses its upstream until the socket
// drains. One that never reads again would hold the request, its concurrency slot and the
// worker's paused call forever: after `writeTimeoutMs` with the socket full and nothing taken
// from it, the sink cuts the client off (nginx's `send_timeout`) and the request ends as if the
// client had hung up, its reason in `cut`. The timer is armed only when a write finds the socket
// full, and cleared when it drains: nothing per frame.
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Failure } from './failure.ts';

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

/**
 * The content type of a stream Baton writes itself, and the default of one it forwards: what
 * SGLang's and vLLM's streams carry. Both answer with Starlette's StreamingResponse and
 * `media_type="text/event-stream"` (SGLang http_server.py generate_request, vLLM
 * serve/disagg/api_router.py generate and its OpenAI server's completions), and Starlette's
 * Response.init_headers adds `; charset=utf-8` to every text/* media type.
 */
export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';

/** Bytes the kernel has taken from a socket: what was written to it, less what it still holds. */
function flushedBytes(s: Socket): number {
  return s.bytesWritten - s.writableLength;
}

/** What the request's rows say of a client the router cut off for reading nothing. */
export function writeTimeoutFailure(ms: number): Failure {
  return {
    kind: 'client_cancel',
    message: `client read nothing for ${ms} ms (--client-write-timeout-ms): cut off`,
    status: 499,
    evidence: `client write timeout: the client's socket stayed full for ${ms} ms with no byte taken`,
  };
}

/**
 * The write timeout of one full socket: `onStuck` runs once `ms` pass with no byte taken from it;
 * a client that reads, however slowly, restarts the wait. Armed when a write finds the socket
 * full, cleared when it drains: made only for clients that fill their socket, nothing per frame.
 */
class ReadWatch {
  private timer: NodeJS.Timeout | null = null;
  private flushedAtArm = 0;

  constructor(
    private readonly socket: Socket,
    private readonly ms: number,
    private readonly onStuck: () => void,
  ) {}

  arm(): void {
    if (this.timer !== null) return;
    this.flushedAtArm = flushedBytes(this.socket);
    this.timer = setTimeout(readWatchFired, this.ms, this);
  }

  clear(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.timer = null;
  }

  /** @internal */
  fired(): void {
    this.timer = null;
    const now = flushedBytes(this.socket);
    if (now !== this.flushedAtArm) {
      // It reads, slowly: it is served (its upstream stays paused meanwhile).
      this.arm();
      return;
    }
    this.onStuck();
  }
}

function readWatchFired(w: ReadWatch): void {
  w.fired();
}

/**
 * Wait for a full response to drain, for the client to leave, or for `timeoutMs` (0: no limit)
 * to pass with nothing taken from the socket (ReadWatch). For the answers written without a
 * ClientSink (upstream/passthrough.ts).
 */
export function drained(res: ServerResponse, timeoutMs: number): Promise<'drain' | 'close' | 'timeout'> {
  return new Promise((resolve) => {
    const s = res.socket;
    if (res.destroyed || s === null) return resolve('close');
    const watch = timeoutMs > 0 ? new ReadWatch(s, timeoutMs, () => done('timeout')) : null;
    const done = (how: 'drain' | 'close' | 'timeout') => {
      watch?.clear();
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(how);
    };
    const onDrain = () => done('drain');
    const onClose = () => done('close');
    res.on('drain', onDrain);
    res.on('close', onClose);
    watch?.arm();
  });
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
  /**
   * Set when the router cut the client off (it read nothing for `writeTimeoutMs`): what the
   * request's rows say instead of "client disconnected". Null while the client is connected or
   * left by itself.
   */
  cut: Failure | null = null;
  /**
   * Told when a write finds the client's socket full, whoever wrote (a format through the loop's
   * `write`, or the OpenAI front rendering its own chunks): the migration loop's current attempt,
   * which pauses its worker until the socket drains.
   */
  feeder: { clientFull(): void } | null = null;
  /** The write timeout, made when a write first finds the client's socket full. */
  private readWatch: ReadWatch | null = null;
  /**
   * The stream's content type: the worker's own once `offerContentType` has had it (a native
   * request's stream carries the head of the worker whose frame starts it), else SSE_CONTENT_TYPE.
   * A unary answer is always Baton's own JSON (every attempt streams upstream), and
   * `application/json` is what SGLang's and vLLM's JSONResponse send.
   */
  private streamType = SSE_CONTENT_TYPE;

  constructor(
    private readonly res: ServerResponse,
    readonly streaming: boolean,
    private readonly headers: Record<string, string>,
    onGone: () => void,
    private readonly errors: ErrorShapes,
    /** Cut a client whose socket stays full this long with nothing taken from it; 0: never. */
    private readonly writeTimeoutMs = 0,
    /** Whether the worker's content type is the client's (native formats; not the OpenAI front, whose answer is Baton's). */
    private readonly workerHead = false,
  ) {
    res.on('close', () => {
      this.clearWriteTimer();
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

  /**
   * The content type of the worker's answer, offered at each attempt's first frame: a stream's
   * head, while it has not gone out, carries it (an event stream's only).
   */
  offerContentType(type: string): void {
    if (this.workerHead && this.streaming && !this.started && type.toLowerCase().startsWith('text/event-stream')) this.streamType = type;
  }

  private flushDrainWaiters(): void {
    this.clearWriteTimer();
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  private start(): void {
    this.started = true;
    const res = this.res;
    res.writeHead(200, {
      'content-type': this.streamType,
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
    const ok = s !== null ? writeChunked(s, data) : this.res.write(data);
    if (!ok) {
      this.armWriteTimer();
      this.feeder?.clientFull();
    }
    return ok;
  }

  writeChunk(chunk: unknown): boolean {
    return this.writeJson(JSON.stringify(chunk));
  }

  /** A frame whose JSON the caller wrote already. */
  writeJson(json: string): boolean {
    return this.writeRaw(sseFrame(json));
  }

  onDrain(fn: () => void): void {
    this.listenDrain();
    this.drainWaiters.push(fn);
  }

  private listenDrain(): void {
    // Listened for only once a write has filled the socket (most streams never do).
    if (this.drainListened) return;
    this.drainListened = true;
    // Direct writes fill the socket, not the response: its 'drain' is the one that fires.
    if (this.direct !== null) this.direct.on('drain', this.onSocketDrain);
    else this.res.on('drain', this.onSocketDrain);
  }

  /** A write found the socket full: from now, the client has writeTimeoutMs to take a byte. */
  private armWriteTimer(): void {
    if (this.writeTimeoutMs <= 0) return;
    const s = this.res.socket;
    if (s == null) return;
    this.listenDrain();
    this.readWatch ??= new ReadWatch(s, this.writeTimeoutMs, () => this.cutOff());
    this.readWatch.arm();
  }

  /** After the last write: a whole answer still in a full socket is the client's to read in time. */
  private armIfFull(): void {
    const s = this.res.socket;
    // (A finished response emits no 'drain'; its 'close', once the socket took it all, clears the timer.)
    if (s != null && s.writableNeedDrain) this.armWriteTimer();
  }

  private clearWriteTimer(): void {
    this.readWatch?.clear();
  }

  /** The client took no byte for writeTimeoutMs: cut it off. */
  private cutOff(): void {
    const s = this.res.socket;
    if (s == null || s.destroyed || this.res.writableFinished) return;
    if (!this.ended) this.cut = writeTimeoutFailure(this.writeTimeoutMs);
    // The close that follows ends the request as a client's hang-up does (onGone: the upstream
    // call aborted, the worker's abort sent).
    this.res.destroy();
  }

  /** End a stream normally. */
  endStream(): void {
    if (this.gone || this.ended) return;
    if (!this.started) this.start();
    this.ended = true;
    this.res.end(SSE_DONE);
    this.armIfFull();
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
    this.armIfFull();
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
    this.armIfFull();
  }

  /** Fail the request: in-band if a stream has started, else a JSON error with `status`. */
  fail(status: number, message: string, type: string): void {
    if (this.started) this.endStreamWithError(this.errors.frame(status, message, type));
    else this.json(status, JSON.stringify(this.errors.body(status, message, type)));
  }
}
