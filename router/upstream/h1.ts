// A lean HTTP/1.1 client for the one upstream call on the per-token path: a generate attempt to
// a worker (a POST with a JSON body, answered with an SSE stream or a JSON body). Every other
// call to a worker (probes, health checks, aborts, the endpoints passed through) still goes
// through undici, which is the general client.
//
// Why a client of our own here (docs/benchmarks.md, "Baton's own upstream client"): in W1's
// profiles undici was the largest share of Baton's CPU after the kernel's writev, about as much
// as all of Baton's own code: per request a Request object with its validations, the header
// object built from llhttp's arrays, handler wrappers for the controller API, and per read a
// trip through llhttp's wasm whose body callbacks copy every piece out of wasm memory. What a
// generate attempt needs is much less: one write (head and body), a response head parsed once,
// and the body de-chunked into views of the socket's own reads (Node allocates every read anew,
// so a view stays valid as long as anyone holds it). Nothing is copied on the way to the SSE
// splitter.
//
// What it does: keep-alive connections per worker (LIFO, so the warm ones are reused), a cap on
// them with a queue beyond it, one request per connection at a time (no pipelining), an idle
// limit checked when a connection is taken (never written past it, whatever the sweep's phase;
// the server's `Keep-Alive: timeout` hint less KEEP_ALIVE_MARGIN_MS when it gives one), one retry
// on a fresh connection of a request whose reused connection closed before any byte of answer
// (the worker's idle close crossed our write), one-shot exchanges on a spare or a new connection
// (continuations: pool/spares.ts), pause/resume by the socket's flow, abort by destroying the
// socket. Responses: status line and headers (1xx skipped; obs-fold and bare-LF lines accepted as
// RFC 9112 §5.2 and §2.2 allow), then a chunked, a Content-Length or a close-delimited body (RFC
// 9112 §6.3, in that order); anything else a server sends is a protocol error and the connection
// is closed, never reused, so no byte of one answer can be read as the next one's.
import { channel } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import type { buildConnector } from 'undici';
import { parseHead, responseHead } from './h1-head.ts';

/**
 * Diagnostics channels, as undici has its own (each published only while someone subscribes; the
 * bench's W4 probe times migrations with them): `baton:h1:create` `{ exchange }` when a request is
 * handed to the client, `baton:h1:send` `{ exchange }` when it is handed to its socket (just
 * before the write), `baton:h1:data` `{ exchange, chunk }` for every piece of a response body,
 * `baton:h1:error` `{ exchange, error }` when an exchange fails.
 */
export const createChannel = channel('baton:h1:create');
export const sendChannel = channel('baton:h1:send');
export const dataChannel = channel('baton:h1:data');
export const errorChannel = channel('baton:h1:error');

export interface H1Handler {
  /** The response's status and Content-Type (interim 1xx responses are skipped). */
  onResponseStart(status: number, contentType: string): void;
  /** A piece of the body, de-chunked: a view of one socket read (never reused by the client). */
  onResponseData(chunk: Buffer): void;
  /** The body is complete. */
  onResponseEnd(): void;
  /** The exchange failed: connect, transport, or a response that is not HTTP/1.1. At most once, never after onResponseEnd. */
  onResponseError(err: Error): void;
}

/** A transport or protocol failure of this client; `code` as Node's and undici's errors carry one. */
export class H1Error extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'H1Error';
  }
}

/** The worker closed the connection before the response was complete. */
export const CLOSED = 'ERR_WORKER_CLOSED';
/** The worker's bytes are not an HTTP/1.1 response this client can read. */
export const PROTOCOL = 'ERR_WORKER_PROTOCOL';

/** The most a response head (status line and headers), a chunk-size line or the trailers may take. */
const MAX_HEAD = 64 * 1024;

/**
 * How much sooner than the server's own idle timeout an idle connection is retired (the default
 * limit itself is the pool's `keepAliveMs`, set by pool/worker.ts). The server's idle clock starts
 * when it hands the response's last bytes to its socket; ours when we have read them, later by
 * our event loop's lag, and our next request reaches the server's loop later again. Two seconds
 * cover a router whose loop is held up for most of that (docs/architecture.md, "Idle connections
 * and the worker's keep-alive", has the measurements against uvicorn).
 */
export const KEEP_ALIVE_MARGIN_MS = 2_000;

// Parser states.
const IDLE = 0;
const HEAD = 1;
const CHUNK_SIZE = 2;
const CHUNK_DATA = 3;
const CHUNK_END = 4; // the CRLF after a chunk's data
const TRAILERS = 5;
const LENGTH = 6;
const UNTIL_CLOSE = 7;

const CR = 13;
const LF = 10;

/** The head parseHead fills, one for all connections: each head is read and acted on in one go. */
const HEAD_FIELDS = responseHead();

/** One request and its response: the controller its handler gets. */
export class H1Exchange {
  /** Set when the exchange has ended: completed, failed or aborted. */
  done = false;
  paused = false;
  /**
   * When pause() was first called (0: never). The worker may have written the response's end while
   * we held its bytes back, so its idle clock may have started as early as this (H1Connection.complete).
   */
  pausedAt = 0;
  /** Written on a connection that had carried a request before (retry: H1Connection.onClose). */
  reused = false;
  /** Sent again once already, on a fresh connection: never again. */
  retried = false;
  conn: H1Connection | null = null;

  constructor(
    readonly pool: H1Pool,
    readonly head: string,
    readonly body: Buffer | string | null,
    readonly handler: H1Handler,
    /** One request on its connection, closed after it (continuations). */
    readonly oneShot: boolean,
  ) {}

  /** Stop reading the response (the socket's flow: the worker's writes back up). */
  pause(): void {
    if (this.done || this.paused) return;
    this.paused = true;
    if (this.pausedAt === 0) this.pausedAt = Date.now();
    this.conn?.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    if (!this.done) this.conn?.socket.resume();
  }

  /** End the exchange now, without a call to its handler; its connection is closed. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    const conn = this.conn;
    if (conn) {
      this.conn = null;
      conn.exchange = null;
      conn.close();
    } else {
      this.pool.dequeue(this);
    }
  }

  /** Write the request on `conn`, which is now this exchange's. */
  send(conn: H1Connection): void {
    this.conn = conn;
    conn.exchange = this;
    conn.begin();
    const s = conn.socket;
    if (s.destroyed) {
      // Gone between its last look and now (a spare the worker closed): no write can tell.
      conn.exchange = null;
      this.conn = null;
      if (this.reused && !this.retried && this.pool.retry(this)) {
        conn.close();
        return;
      }
      conn.close();
      this.fail(new H1Error('the worker closed the connection before the request was written', CLOSED));
      return;
    }
    // Published as the bytes are handed to the socket, before the write (as undici publishes its
    // sendHeaders): a write that wakes the worker may let the scheduler run it first, and that
    // time is the worker's, not the router's.
    if (sendChannel.hasSubscribers) sendChannel.publish({ exchange: this });
    if (this.body === null) {
      s.write(this.head, 'latin1');
    } else if (typeof this.body === 'string') {
      s.write(this.head + this.body);
    } else {
      // Corked: head and body leave in one writev.
      s.cork();
      s.write(this.head, 'latin1');
      s.write(this.body);
      s.uncork();
    }
    if (this.paused) s.pause();
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.conn = null;
    if (errorChannel.hasSubscribers) errorChannel.publish({ exchange: this, error: err });
    this.handler.onResponseError(err);
  }
}

/** One connection to a worker and the parser of the responses read on it. */
export class H1Connection {
  exchange: H1Exchange | null = null;
  /** When it last went idle (for the idle timeout). */
  idleSince = 0;
  /** How long it may sit idle; lowered by the server's Keep-Alive hint. */
  keepAliveMs: number;
  private state = IDLE;
  /** Bytes left of the current chunk or of a Content-Length body. */
  private remaining = 0;
  /** A line (head, chunk size, trailers) cut by the end of a read. */
  private partial: Buffer | null = null;
  /** The response lets the connection carry another request. */
  private reusable = true;
  private closed = false;
  /** It has carried a request (a write on it may cross the worker's idle close). */
  private used = false;
  /** A byte of the current exchange's answer has been read (a 1xx included). */
  private heard = false;
  /** Where the head found by headEnd() stops (its last line's terminator excluded). */
  private headText = 0;

  constructor(
    readonly pool: H1Pool,
    readonly socket: Socket,
  ) {
    this.keepAliveMs = pool.keepAliveMs;
    socket.on('data', (b: Buffer) => this.onData(b));
    socket.on('end', () => this.onEnd());
    socket.on('error', (e: Error) => this.onClose(e));
    socket.on('close', () => this.onClose(null));
  }

  /** A request is about to be written on it. */
  begin(): void {
    const ex = this.exchange!;
    this.state = HEAD;
    this.partial = null;
    this.heard = false;
    this.reusable = !ex.oneShot;
    ex.reused = this.used;
    this.used = true;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pool.forget(this);
    this.socket.destroy();
  }

  private onEnd(): void {
    const ex = this.exchange;
    if (ex !== null && this.state === UNTIL_CLOSE) this.complete(ex);
    this.onClose(null);
  }

  private onClose(err: Error | null): void {
    const ex = this.exchange;
    this.exchange = null;
    // A reused connection that closed before any byte of answer: the worker's idle timeout closed
    // it as our request crossed the close (uvicorn closes an idle connection without a word, and
    // a request that reaches it after that is reset unread). Sent again once, on a fresh
    // connection, with no word to the handler: Go's net/http does the same for a reused
    // connection's `errServerClosedIdle` ("probably an unfortunately keep-alive timeout, just as
    // the client was writing a request", transport.go, persistConn.shouldRetryRequest), for
    // requests it may replay. A generate may be (RFC 9112 §9.3.1): it changes nothing on the
    // worker but its answer. Never on a fresh connection (a worker that hangs up on this request
    // would be asked forever), never after a byte of answer, never twice. The fresh connection is
    // dialled before this one is forgotten, so the cap holds.
    if (ex !== null && this.state === HEAD && !this.heard && ex.reused && !ex.retried && !ex.done) {
      ex.conn = null;
      if (this.pool.retry(ex)) {
        this.close();
        return;
      }
    }
    this.close();
    if (ex !== null) {
      const cause = err ?? new H1Error(this.state === HEAD && this.partial === null ? 'the worker closed the connection before answering' : 'the worker closed the connection before the response ended', CLOSED);
      ex.fail(cause);
    }
  }

  private protocolError(message: string): void {
    const ex = this.exchange;
    this.exchange = null;
    this.close();
    ex?.fail(new H1Error(message, PROTOCOL));
  }

  private onData(chunk: Buffer): void {
    const ex = this.exchange;
    if (ex === null) {
      // Bytes on an idle connection (a 408, a stray answer): never read them as the next one's.
      this.close();
      return;
    }
    let buf = chunk;
    let i = 0;
    if (this.partial !== null) {
      buf = Buffer.concat([this.partial, chunk]);
      this.partial = null;
    }
    const n = buf.length;
    while (i < n) {
      switch (this.state) {
        case CHUNK_DATA:
        case LENGTH: {
          const take = Math.min(this.remaining, n - i);
          const end = i + take;
          const piece = i === 0 && end === n ? buf : buf.subarray(i, end);
          if (dataChannel.hasSubscribers) dataChannel.publish({ exchange: ex, chunk: piece });
          ex.handler.onResponseData(piece);
          if (ex.done) return;
          i = end;
          this.remaining -= take;
          if (this.remaining === 0) {
            if (this.state === LENGTH) {
              this.finish(ex, i < n);
              return;
            }
            this.state = CHUNK_END;
          }
          break;
        }
        case CHUNK_SIZE: {
          // chunk-size [ chunk-ext ] CRLF, parsed from the bytes (the line is nearly always whole).
          const lf = buf.indexOf(LF, i);
          if (lf < 0) return this.keep(buf, i);
          let size = 0;
          let j = i;
          for (; j < lf; j++) {
            const c = buf[j]!;
            const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
            if (d < 0) break;
            size = size * 16 + d;
          }
          // At least one digit, then a chunk extension (';', after optional whitespace) or the CR.
          const c = buf[j];
          if (j === i || j - i > 12 || buf[lf - 1] !== CR || (j !== lf - 1 && c !== 0x3b && c !== 0x20 && c !== 0x09)) {
            return this.protocolError('invalid chunk size line');
          }
          i = lf + 1;
          if (size === 0) {
            this.state = TRAILERS;
          } else {
            this.remaining = size;
            this.state = CHUNK_DATA;
          }
          break;
        }
        case CHUNK_END: {
          if (n - i < 2) return this.keep(buf, i);
          if (buf[i] !== CR || buf[i + 1] !== LF) return this.protocolError('chunk data not followed by CRLF');
          i += 2;
          this.state = CHUNK_SIZE;
          break;
        }
        case TRAILERS: {
          // Trailer fields, ignored, up to the empty line.
          const lf = buf.indexOf(LF, i);
          if (lf < 0) return this.keep(buf, i);
          if (buf[lf - 1] !== CR || lf - 1 < i) return this.protocolError('invalid trailer line');
          const empty = lf - 1 === i;
          i = lf + 1;
          if (empty) {
            this.finish(ex, i < n);
            return;
          }
          break;
        }
        case HEAD: {
          this.heard = true;
          const after = this.headEnd(buf, i);
          if (after < 0) return this.keep(buf, i);
          const next = this.onHead(ex, buf.toString('latin1', i, this.headText));
          if (next < 0 || ex.done) return;
          i = after;
          if (next === IDLE) {
            this.finish(ex, i < n); // no body (204, 304)
            return;
          }
          this.state = next;
          break;
        }
        case UNTIL_CLOSE: {
          const piece = i === 0 ? buf : buf.subarray(i);
          if (dataChannel.hasSubscribers) dataChannel.publish({ exchange: ex, chunk: piece });
          ex.handler.onResponseData(piece);
          return;
        }
        default:
          return this.protocolError('data after the response');
      }
    }
  }

  /**
   * Where the body after the head that starts at `from` begins, -1 if the head's empty line has not
   * arrived yet; `headText` is set to where the head's text stops. Lines end in CRLF or in a bare LF
   * (RFC 9112 §2.2: a recipient may take a single LF for a line terminator and ignore a CR before
   * it), so the empty line is LF LF or LF CR LF, whichever comes first. One indexOf per header line,
   * once per response: never on the body's path.
   */
  private headEnd(buf: Buffer, from: number): number {
    const n = buf.length;
    let p = from;
    for (;;) {
      const lf = buf.indexOf(LF, p);
      if (lf < 0) return -1;
      let q = lf + 1;
      if (q < n && buf[q] === CR) q++;
      if (q >= n) return -1; // the next line's first bytes have not arrived: it may be the empty one
      if (buf[q] === LF) {
        this.headText = lf > from && buf[lf - 1] === CR ? lf - 1 : lf;
        return q + 1;
      }
      p = q;
    }
  }

  /** Keep a cut line for the next read (bounded: a line never grows without end). */
  private keep(buf: Buffer, from: number): void {
    if (buf.length - from > MAX_HEAD) return this.protocolError('response head or chunk line over 64 KiB');
    this.partial = from === 0 ? buf : buf.subarray(from);
  }

  /**
   * The status line and header fields: the body's state, IDLE for none, HEAD again after an
   * interim 1xx, -1 after a protocol error (the exchange has failed).
   */
  private onHead(ex: H1Exchange, head: string): number {
    const h = HEAD_FIELDS;
    const fault = parseHead(head, h);
    if (h.keepAliveS >= 0) this.keepAliveMs = Math.min(this.pool.keepAliveMs, Math.max(0, h.keepAliveS * 1000 - KEEP_ALIVE_MARGIN_MS));
    if (fault !== null) {
      this.protocolError(fault);
      return -1;
    }
    // Read out before the handler runs, which may parse another head into HEAD_FIELDS.
    const { status, http10, contentType, te, chunked, length, connection } = h;
    if (status < 200) return status === 101 ? (this.protocolError('unexpected protocol switch'), -1) : HEAD;
    if (connection.includes('close') || (http10 && !connection.includes('keep-alive'))) this.reusable = false;
    ex.handler.onResponseStart(status, contentType);
    if (ex.done) return -1;
    if (status === 204 || status === 304) return IDLE;
    if (te) {
      // A message with both is a smuggling risk (RFC 9112 §6.1): read it as chunked, never reuse.
      // Transfer-Encoding in an HTTP/1.0 response is faulty framing (§6.1: close the connection
      // after the message, whatever Connection says): the sender may have kept part of it back.
      if (length >= 0 || http10) this.reusable = false;
      if (chunked) return CHUNK_SIZE;
      this.reusable = false;
      return UNTIL_CLOSE;
    }
    if (length >= 0) {
      if (length === 0) return IDLE;
      this.remaining = length;
      return LENGTH;
    }
    this.reusable = false;
    return UNTIL_CLOSE;
  }

  /** The response is complete; `extra`: more bytes followed it, which no request asked for. */
  private finish(ex: H1Exchange, extra: boolean): void {
    this.state = IDLE;
    if (extra) this.reusable = false;
    this.complete(ex);
  }

  private complete(ex: H1Exchange): void {
    this.state = IDLE;
    this.exchange = null;
    ex.conn = null;
    ex.done = true;
    // Released before the handler hears of the end, so that a request it sends can take this connection.
    // Idle since now, or since the first pause: the worker may have written the end of its answer
    // while we held it back, and its idle clock runs from that write (uvicorn's
    // on_response_complete), not from our read. A pause that long leaves nothing to reuse.
    const now = Date.now();
    this.idleSince = ex.pausedAt > 0 && ex.pausedAt < now ? ex.pausedAt : now;
    if (this.reusable && !this.closed && now - this.idleSince < this.keepAliveMs) {
      if (ex.paused) this.socket.resume();
      this.pool.release(this);
    } else {
      this.close();
    }
    ex.handler.onResponseEnd();
  }
}

export interface H1PoolOptions {
  /** Most keep-alive connections (open or connecting); requests beyond wait in order. */
  connections: number;
  /** How long a connection may sit idle before it is closed. */
  keepAliveMs: number;
  /** Where one-shot exchanges (continuations) get a connected socket first (pool/spares.ts). */
  spares?: SpareSource | null;
}

/** Sockets connected in advance for one-shot exchanges, and where the others went (its counts). */
export interface SpareSource {
  /** A connected socket that never carried a request, or null when none is ready. */
  claim(): Socket | null;
  /** No spare was ready: the exchange went out on an idle keep-alive connection (`reused`), or a new one. */
  noSpare(reused: boolean): void;
}

/** The connections to one worker. */
export class H1Pool {
  readonly keepAliveMs: number;
  private readonly idle: H1Connection[] = [];
  private readonly queue: H1Exchange[] = [];
  /** Keep-alive connections connecting (one-shot ones are not counted: no cap). */
  private open = 0;
  /** Connects in flight, of either kind (close() waits for them too). */
  private dialing = 0;
  private readonly all = new Set<H1Connection>();
  private readonly keepAlive = new Set<H1Connection>();
  private sweeper: NodeJS.Timeout | null = null;
  private closing = false;
  private destroyed = false;
  private drained: (() => void) | null = null;
  private readonly origin: { protocol: string; hostname: string; host: string; port: string };

  constructor(
    url: URL,
    private readonly connect: buildConnector.connector,
    private readonly opts: H1PoolOptions,
  ) {
    this.keepAliveMs = opts.keepAliveMs;
    // An IPv6 origin's hostname comes in brackets; the socket wants the bare address (as undici does).
    this.origin = { protocol: url.protocol, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), host: url.host, port: url.port || (url.protocol === 'https:' ? '443' : '80') };
  }

  /** Connections open now (idle, busy, one-shot), for tests and metrics. */
  get size(): number {
    return this.all.size;
  }

  get idleCount(): number {
    return this.idle.length;
  }

  /**
   * Send a request: the head is built here; `headers` are extra header lines, each `name: value\r\n`.
   * One-shot exchanges take a spare when one is ready and close their connection after the answer.
   */
  request(method: string, path: string, headers: string, body: Buffer | string | null, handler: H1Handler, oneShot = false): H1Exchange {
    const length = body === null ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    const head = `${method} ${path} HTTP/1.1\r\nhost: ${this.origin.host}\r\n${headers}${oneShot ? 'connection: close\r\n' : ''}content-length: ${length}\r\n\r\n`;
    const ex = new H1Exchange(this, head, body, handler, oneShot);
    if (createChannel.hasSubscribers) createChannel.publish({ exchange: ex });
    if (this.closing || this.destroyed) {
      queueMicrotask(() => ex.fail(new H1Error('the connection pool is closed', 'ERR_POOL_CLOSED')));
      return ex;
    }
    if (oneShot) {
      const spare = this.opts.spares?.claim() ?? null;
      if (spare) {
        ex.send(this.adopt(spare, false));
        return ex;
      }
      // No spare ready: an idle keep-alive connection is written at once too (this client does
      // not wait a turn before reusing one, and the idle timeout keeps it under the worker's),
      // and closed after this answer; a new connection needs a turn to connect, tens of ms on a
      // saturated router.
      const idle = this.takeIdle();
      this.opts.spares?.noSpare(idle !== null);
      if (idle) ex.send(idle);
      else this.dial(ex, false);
      return ex;
    }
    const idle = this.takeIdle();
    if (idle) {
      ex.send(idle);
      return ex;
    }
    if (this.open + this.keepAlive.size < this.opts.connections) this.dial(ex, true);
    else this.queue.push(ex);
    return ex;
  }

  /**
   * The most recently idle connection still open and under its idle limit, out of the idle list;
   * null if none. The limit is checked here, not only by the sweep: a sweep each second let a
   * connection be taken up to a second past it, which at 4 s was uvicorn's 5 s.
   */
  private takeIdle(): H1Connection | null {
    let now = 0;
    while (this.idle.length > 0) {
      const conn = this.idle.pop()!;
      if (now === 0) now = Date.now();
      // A FIN or bytes read while it sat idle have closed it already; this is the last look.
      if (conn.socket.destroyed || conn.socket.readableEnded || now - conn.idleSince >= conn.keepAliveMs) {
        conn.close();
        continue;
      }
      return conn;
    }
    return null;
  }

  /**
   * Send `ex` again on a fresh connection (its reused one closed before any byte of answer: the
   * worker's idle close crossed our write). False when the pool is closing: the caller fails it.
   */
  retry(ex: H1Exchange): boolean {
    if (this.closing || this.destroyed) return false;
    ex.retried = true;
    this.dial(ex, !ex.oneShot);
    return true;
  }

  private adopt(socket: Socket, keepAlive: boolean): H1Connection {
    const conn = new H1Connection(this, socket);
    this.all.add(conn);
    if (keepAlive) this.keepAlive.add(conn);
    return conn;
  }

  private dial(ex: H1Exchange, keepAlive: boolean): void {
    if (keepAlive) this.open++;
    this.dialing++;
    this.connect(this.origin, (err, socket) => {
      this.dialing--;
      if (keepAlive) this.open--; // counted in keepAlive from here on
      if (err || !socket) {
        ex.fail(err ?? new H1Error('connect failed', 'ECONNREFUSED'));
        this.checkDrained();
        // A request that waited for a free connection may try its own.
        if (keepAlive) this.pump();
        return;
      }
      const conn = this.adopt(socket as Socket, keepAlive);
      if (this.destroyed) {
        conn.close();
        ex.fail(new H1Error('the connection pool was destroyed', 'ERR_POOL_CLOSED'));
        return;
      }
      if (ex.done) {
        conn.idleSince = Date.now();
        if (keepAlive) this.release(conn);
        else conn.close();
        return;
      }
      ex.send(conn);
    });
  }

  /** A connection's response is complete (idle since `conn.idleSince`, under its limit) and it may carry another request. */
  release(conn: H1Connection): void {
    if (!this.keepAlive.has(conn) || this.closing || this.destroyed) {
      conn.close();
      return;
    }
    const next = this.queue.shift();
    if (next) {
      next.send(conn);
      return;
    }
    this.idle.push(conn);
    if (this.sweeper === null) {
      this.sweeper = setInterval(() => this.sweep(), 1000);
      this.sweeper.unref();
    }
  }

  /** A queued request whose exchange was aborted before it got a connection. */
  dequeue(ex: H1Exchange): void {
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
  }

  /** A connection closed: out of every list. */
  forget(conn: H1Connection): void {
    this.all.delete(conn);
    this.keepAlive.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    this.checkDrained();
    this.pump();
  }

  private checkDrained(): void {
    if (this.drained !== null && this.all.size === 0 && this.dialing === 0) this.drained();
  }

  /** Start connections for queued requests while there is room under the cap. */
  private pump(): void {
    while (this.queue.length > 0 && this.open + this.keepAlive.size < this.opts.connections && !this.closing && !this.destroyed) {
      this.dial(this.queue.shift()!, true);
    }
  }

  private sweep(now = Date.now()): void {
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const conn = this.idle[i]!;
      if (now - conn.idleSince >= conn.keepAliveMs) conn.close();
    }
    if (this.idle.length === 0 && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** Take no new requests; idle connections close now, busy ones after their response. */
  close(): Promise<void> {
    this.closing = true;
    for (const ex of this.queue.splice(0)) ex.fail(new H1Error('the connection pool is closed', 'ERR_POOL_CLOSED'));
    for (const conn of this.idle.slice()) conn.close();
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
    if (this.all.size === 0 && this.dialing === 0) return Promise.resolve();
    return new Promise((resolve) => (this.drained = resolve));
  }

  /** Close every connection now; exchanges in flight fail. */
  destroy(): Promise<void> {
    this.destroyed = true;
    const done = this.close();
    for (const conn of [...this.all]) conn.socket.destroy();
    return done;
  }
}
