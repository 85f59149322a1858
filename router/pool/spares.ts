// Spare connections: a few connected sockets per worker that have never carried a request, kept
// so that a continuation can be written to the survivor in the same event-loop turn in which the
// failure was seen.
//
// Why: a new connection needs a turn to connect, which on a busy router is tens of ms. A
// keep-alive socket that has carried a request is written at once too (upstream/h1.ts takes one
// when no spare is ready), but it may hold a FIN or bytes the worker sent while it sat idle that
// the router has not read yet (undici waits a setImmediate before reusing one for that reason:
// GHSA-35p6-xmwp-9g52), and a continuation that lands on a connection the worker is closing
// fails once more. A socket that never carried a request has nothing of that kind. Continuations
// are rare and come in bursts (every stream of a dead worker at once), so the spares are sized
// from the in-flight load of the other workers, exist only while there is traffic, and are
// replaced before any server's idle timeout can close them.
import type { Socket } from 'node:net';
import type { buildConnector } from 'undici';
import type { SpareSource } from '../upstream/h1.ts';

/**
 * A spare older than this is closed. uvicorn arms its 5 s keep-alive timer only when a response
 * completes (`on_response_complete`; measured: a connection that never carried a request is still
 * answered after 8 s, with h11 and httptools) and Node's http server likewise, so neither closes a
 * spare; this bound is for a server or proxy in between that counts idleness from the accept,
 * under the 5 s the workers use, and checked when a spare is taken (take()), not by a sweep.
 */
export const SPARE_MAX_AGE_MS = 4_000;
/**
 * A spare older than this no longer counts toward the target: its replacement is opened while it
 * can still be used, so that renewing never leaves a worker without spares for a turn.
 */
export const SPARE_RENEW_MS = 3_000;
/** After a failed connect, no new spare for this long: a worker that refuses is not hammered. */
export const SPARE_RETRY_MS = 1_000;

interface Spare {
  socket: Socket;
  at: number;
  onGone: () => void;
}

export class SpareConnections implements SpareSource {
  /** How many spares to keep; set by the pool from the load, 0 when there is no traffic. */
  target = 0;
  /**
   * Continuations sent on a spare, those that found none and went out on an idle keep-alive
   * connection, and those that found neither and connected anew (metrics).
   */
  taken = 0;
  reused = 0;
  missed = 0;
  private readonly idle: Spare[] = [];
  private connecting = 0;
  private closed = false;
  private failedAt = -Infinity;

  constructor(
    private readonly origin: URL,
    private readonly connect: buildConnector.connector,
  ) {}

  get size(): number {
    return this.idle.length;
  }

  /**
   * A spare for a continuation, counted, and the stash refilled. Null when none is ready (the
   * caller says where the continuation went instead: `noSpare`).
   */
  claim(): Socket | null {
    const socket = this.take();
    if (socket) {
      this.taken++;
      // The replacement connects once the caller has written the continuation on this one (it
      // does so at once, in the same run of code): a connect is a system call that also wakes
      // the worker, and on a busy box the scheduler may run the worker before the router's
      // continuation is out (W4's gap, docs/benchmarks.md).
      queueMicrotask(this.refillNow);
    }
    return socket;
  }

  private readonly refillNow = (): void => this.refill();

  /** A continuation found no spare: it went out on an idle keep-alive connection, or a new one. */
  noSpare(reused: boolean): void {
    if (reused) this.reused++;
    else this.missed++;
  }

  /** The newest usable spare, detached from the stash; null if none. */
  take(now = Date.now()): Socket | null {
    while (this.idle.length > 0) {
      const s = this.idle.pop()!;
      this.detach(s);
      // Anything read on a socket that never carried a request (a 408, a FIN) makes it unusable.
      if (!s.socket.destroyed && !s.socket.readableEnded && s.socket.readableLength === 0 && now - s.at < SPARE_MAX_AGE_MS) {
        return s.socket;
      }
      s.socket.destroy();
    }
    return null;
  }

  /**
   * Close spares that are too old (all of them with `closeAll`: the worker is out of service),
   * and open what the target lacks. Spares beyond a lowered target, a target of 0 (no traffic)
   * included, are left to age out: the load that set the target may come back, and a lull
   * followed by a burst and a failure is when they are needed (the bench's W4 lost a tenth of
   * its continuations' spares to the ~100 ms between its warm-up and its measured load, when
   * they were closed at once and the burst's connects took up to ~150 ms on the saturated box).
   */
  maintain(now = Date.now(), closeAll = false): void {
    for (let i = this.idle.length - 1; i >= 0; i--) {
      if (closeAll || now - this.idle[i]!.at >= SPARE_MAX_AGE_MS) this.drop(i);
    }
    this.refill(now);
  }

  /**
   * The worker answered its health check again: it accepts connections, so the pause after a
   * failed connect (SPARE_RETRY_MS) no longer applies. Without this, a worker back in service
   * within a second of its death got no spares until the pause ended, while, as the least loaded,
   * it was where the next burst of continuations went.
   */
  recovered(): void {
    this.failedAt = -Infinity;
  }

  private refill(now = Date.now()): void {
    if (now - this.failedAt < SPARE_RETRY_MS) return;
    let fresh = this.connecting;
    for (const s of this.idle) if (now - s.at < SPARE_RENEW_MS) fresh++;
    for (; !this.closed && fresh < this.target; fresh++) this.open();
  }

  private open(): void {
    this.connecting++;
    const { protocol, host, port } = this.origin;
    // An IPv6 origin's hostname comes in brackets; the socket wants the bare address (as undici does).
    const hostname = this.origin.hostname.replace(/^\[(.*)\]$/, '$1');
    this.connect({ protocol, hostname, host, port }, (err, socket) => {
      this.connecting--;
      if (err || !socket) {
        // Tried again after SPARE_RETRY_MS; a dead worker is the pool's to notice.
        this.failedAt = Date.now();
        return;
      }
      if (this.closed || this.target === 0) {
        socket.destroy();
        return;
      }
      const spare: Spare = { socket: socket as Socket, at: Date.now(), onGone: () => this.forget(spare) };
      socket.on('end', spare.onGone).on('close', spare.onGone).on('error', spare.onGone);
      this.idle.push(spare);
    });
  }

  private forget(spare: Spare): void {
    const i = this.idle.indexOf(spare);
    if (i >= 0) this.drop(i);
  }

  private drop(i: number): void {
    const [s] = this.idle.splice(i, 1);
    if (!s) return;
    this.detach(s);
    s.socket.destroy();
  }

  private detach(s: Spare): void {
    s.socket.off('end', s.onGone).off('close', s.onGone).off('error', s.onGone);
  }

  close(): void {
    this.closed = true;
    this.target = 0;
    while (this.idle.length > 0) this.drop(0);
  }
}
