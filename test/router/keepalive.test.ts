// Upstream connections and the worker's keep-alive (docs/architecture.md, "Idle connections and the
// worker's keep-alive"). uvicorn closes an idle connection exactly `timeout_keep_alive` (5 s in
// SGLang and vLLM) after it wrote a response's end, without a word, and resets a request that
// arrives after that. Here, on loopback with real sockets:
// - a request written in the same instant the worker closes its reused connection is sent again
//   once on a fresh connection, and neither its handler nor the router hears of it (the worker is
//   not blamed); only on a reused connection, only before any byte of answer, only once;
// - neither client (h1.ts for generate attempts, undici for health checks and probes) writes on a
//   connection idle past UPSTREAM_IDLE_MS, whatever the phase of the sweep.
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildConnector } from 'undici';
import { CLOSED, H1Pool, type H1Handler } from '../../router/upstream/h1.ts';
import { UPSTREAM_IDLE_MS, WORKER_KEEP_ALIVE_MS, Worker } from '../../router/pool/worker.ts';
import { checkHealth } from '../../router/core/probe.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { stream, waitUntil } from './harness/procs.ts';
import { onRequests } from './harness/raw-requests.ts';

const connector = buildConnector({ timeout: 2000 });
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

type CodedError = Error & { code?: string };

class Rec implements H1Handler {
  status = 0;
  body = '';
  ends = 0;
  errors: CodedError[] = [];
  private settle!: () => void;
  readonly settled = new Promise<void>((r) => (this.settle = r));
  onResponseStart(status: number): void {
    this.status = status;
  }
  onResponseData(chunk: Buffer): void {
    this.body += chunk.toString();
  }
  onResponseEnd(): void {
    this.ends++;
    this.settle();
  }
  onResponseError(err: Error): void {
    this.errors.push(err);
    this.settle();
  }
}

async function settled(rec: Rec, ms = 3000): Promise<Rec> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([rec.settled, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the exchange did not end (a hang)')), ms)))]);
  clearTimeout(timer);
  return rec;
}

interface Req {
  socket: Socket;
  socketIndex: number;
  head: string;
  path: string;
  /** How long the connection had been idle since its last response when this request arrived (-1: its first request). */
  idleMs: number;
}

/**
 * A worker's HTTP/1.1 server as the tests need it: it parses requests, answers them through
 * `respond` (OK by default), and keeps per connection when it last wrote a response's end.
 */
class Srv {
  readonly server: Server;
  sockets: Socket[] = [];
  requests: Req[] = [];
  lastResponse = new Map<Socket, number>();
  respond: (r: Req) => void = (r) => this.answer(r.socket, OK);
  onIdle: ((s: Socket) => void) | null = null;
  url!: URL;

  constructor() {
    this.server = createServer({ noDelay: true }, (s) => this.accept(s));
  }

  async start(): Promise<this> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = new URL(`http://127.0.0.1:${(this.server.address() as { port: number }).port}`);
    return this;
  }

  /** Write a whole response; the connection's idle clock starts now (uvicorn's on_response_complete). */
  answer(s: Socket, bytes: string): void {
    s.write(bytes);
    this.lastResponse.set(s, performance.now());
    this.onIdle?.(s);
  }

  private accept(s: Socket): void {
    const socketIndex = this.sockets.length;
    this.sockets.push(s);
    s.on('error', () => undefined);
    onRequests(s, (head) => {
      const last = this.lastResponse.get(s);
      const req: Req = { socket: s, socketIndex, head, path: head.split(' ')[1] ?? '', idleMs: last === undefined ? -1 : performance.now() - last };
      this.requests.push(req);
      this.respond(req);
    });
  }

  reset(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets = [];
    this.requests = [];
    this.lastResponse = new Map();
    this.onIdle = null;
    this.respond = (r) => this.answer(r.socket, OK);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

let srv: Srv;
const pools: H1Pool[] = [];
const workers: Worker[] = [];

function pool(connect: buildConnector.connector = connector, keepAliveMs = UPSTREAM_IDLE_MS): H1Pool {
  const p = new H1Pool(srv.url, connect, { connections: 8, keepAliveMs });
  pools.push(p);
  return p;
}

/** The server closes every connection; the pool has seen them go. */
async function resetBoth(p: H1Pool): Promise<void> {
  srv.reset();
  await waitUntil(() => p.size === 0, 3000, 'the pool seeing the server close its connections');
}

function send(p: H1Pool, path: string, oneShot = false, body: string | null = null): Rec {
  const rec = new Rec();
  p.request(body === null ? 'GET' : 'POST', path, '', body, rec, oneShot);
  return rec;
}

beforeAll(async () => {
  srv = await new Srv().start();
});

afterEach(async () => {
  for (const p of pools.splice(0)) await p.destroy();
  for (const w of workers.splice(0)) await w.destroy();
  srv.reset();
});

afterAll(async () => {
  await srv.stop();
});

describe('a request that crosses the worker closing its idle connection', () => {
  it.each([
    ['closes it (FIN, as uvicorn\'s transport.close())', (s: Socket) => s.destroy()],
    ['resets it (RST)', (s: Socket) => s.resetAndDestroy()],
  ])('the worker %s at exactly its idle timeout, as the request is written: sent again on a fresh connection, the handler hears only the answer', async (_name, close) => {
    // A worker whose idle timeout (1 s) is shorter than the router's limit: the router's write
    // and the worker's close cross on the wire at the same instant, every time.
    const p = pool();
    const first = await settled(send(p, '/a', false, '{"rid":"a"}'));
    expect(first.body).toBe('ok');
    expect(p.idleCount).toBe(1);
    let crossed: Rec | null = null;
    const idle = srv.sockets[0]!;
    setTimeout(() => {
      close(idle);
      // The router's loop has not read the close yet: this is the write that crosses it.
      crossed = send(p, '/b', false, '{"rid":"b"}');
    }, 1000);
    await waitUntil(() => crossed !== null, 3000, 'the crossing request');
    const rec = await settled(crossed!);
    expect(rec.errors).toEqual([]);
    expect([rec.status, rec.body, rec.ends]).toEqual([200, 'ok', 1]);
    // It went out again, whole, on a second connection the worker read it from.
    expect(srv.sockets).toHaveLength(2);
    expect(srv.requests.map((r) => [r.path, r.socketIndex])).toEqual([
      ['/a', 0],
      ['/b', 1],
    ]);
    expect(srv.requests[1]!.head).toContain('content-length: 11');
    // And the fresh connection is kept for the next request.
    const next = await settled(send(p, '/c'));
    expect(next.body).toBe('ok');
    expect(srv.requests.at(-1)!.socketIndex).toBe(1);
  });

  it('only on a reused connection, only before any byte of answer, only once', async () => {
    const p = pool();
    // Reused, no byte: retried (the case above), here for a one-shot exchange (a continuation
    // with no spare ready, on an idle keep-alive connection): again one-shot, `connection: close`.
    await settled(send(p, '/warm'));
    srv.respond = (r) => (r.path === '/cont' && r.socketIndex === 0 ? r.socket.destroy() : srv.answer(r.socket, OK));
    const cont = await settled(send(p, '/cont', true, '{}'));
    expect([cont.errors, cont.body]).toEqual([[], 'ok']);
    expect(srv.requests.slice(1).map((r) => [r.path, r.socketIndex, /connection: close/.test(r.head)])).toEqual([
      ['/cont', 0, true],
      ['/cont', 1, true],
    ]);
    await resetBoth(p);

    // Reused, no byte, and the fresh connection fails the same way: the error, after one retry.
    await settled(send(p, '/warm'));
    srv.respond = (r) => (r.path === '/twice' ? r.socket.destroy() : srv.answer(r.socket, OK));
    const twice = await settled(send(p, '/twice'));
    expect(twice.errors.map((e) => e.code)).toEqual([CLOSED]);
    expect(srv.requests.map((r) => r.path)).toEqual(['/warm', '/twice', '/twice']);
    await resetBoth(p);

    // A fresh connection that closes before any byte: the error at once, no retry.
    srv.respond = (r) => r.socket.destroy();
    const fresh = await settled(send(p, '/fresh'));
    expect(fresh.errors.map((e) => e.code)).toEqual([CLOSED]);
    expect(srv.requests).toHaveLength(1);
    await resetBoth(p);

    // A reused connection that closes after part of the answer (the head started): the error, no retry.
    await settled(send(p, '/warm'));
    srv.respond = (r) => (r.path === '/partial' ? r.socket.end('HTTP/1.1 200 OK\r\nContent-') : srv.answer(r.socket, OK));
    const partial = await settled(send(p, '/partial'));
    expect(partial.errors.map((e) => e.code)).toEqual([CLOSED]);
    // After an interim 1xx, too: a byte of answer came.
    srv.respond = (r) => (r.path === '/interim' ? r.socket.end('HTTP/1.1 100 Continue\r\n\r\n') : srv.answer(r.socket, OK));
    await settled(send(p, '/warm2'));
    const interim = await settled(send(p, '/interim'));
    expect(interim.errors.map((e) => e.code)).toEqual([CLOSED]);
    expect(srv.requests.map((r) => r.path)).toEqual(['/warm', '/partial', '/warm2', '/interim']);

  });

  it('an exchange aborted while its retry connects is never written again', async () => {
    // The retry's connect is held until the exchange is aborted.
    let dials = 0;
    let held: (() => void) | null = null;
    const p = pool((opts, cb) => {
      if (++dials !== 2) return connector(opts, cb);
      held = () => connector(opts, cb);
    });
    await settled(send(p, '/warm'));
    srv.respond = (r) => (r.path === '/abort' ? r.socket.destroy() : srv.answer(r.socket, OK));
    const rec = new Rec();
    const ex = p.request('GET', '/abort', '', null, rec);
    await waitUntil(() => held !== null, 3000, 'the retry connecting');
    ex.abort();
    held!();
    await waitUntil(() => srv.sockets.length === 2, 3000, 'the retry connection made');
    await sleep(100);
    expect([rec.ends, rec.errors.length]).toEqual([0, 0]);
    expect(srv.requests.map((r) => [r.path, r.socketIndex])).toEqual([
      ['/warm', 0],
      ['/abort', 0],
    ]);
  });
});

describe('idle connections are never written past UPSTREAM_IDLE_MS', () => {
  it('is well under the workers\' 5 s', () => {
    expect(WORKER_KEEP_ALIVE_MS).toBe(5_000);
    expect(UPSTREAM_IDLE_MS).toBeLessThanOrEqual(3_000);
  });

  it('generate attempts (h1.ts) and health checks (undici), with the worker closing idle connections at exactly 5 s', async () => {
    // The worker closes each connection 5 s after its last response's end, as uvicorn does.
    const closers = new Map<Socket, NodeJS.Timeout>();
    srv.onIdle = (s) => {
      clearTimeout(closers.get(s));
      closers.set(
        s,
        setTimeout(() => s.destroy(), WORKER_KEEP_ALIVE_MS),
      );
    };
    srv.respond = (r) => {
      clearTimeout(closers.get(r.socket));
      srv.answer(r.socket, r.path === '/health' ? 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n' : OK);
    };
    const worker = new Worker('w0', srv.url.origin, { failureThreshold: 5, openMs: 1000, successThreshold: 1 }, 2000);
    workers.push(worker);

    const h1 = async (): Promise<void> => {
      // Two connections at once: the sweep (once a second) starts when the first goes idle.
      const [a, b] = await Promise.all([settled(send(worker.h1, '/a')), settled(send(worker.h1, '/b'))]);
      expect([a.body, b.body]).toEqual(['ok', 'ok']);
      // Half a second later one is used again: its idle time starts half-way between sweeps, so
      // no sweep closes it in time for a request UPSTREAM_IDLE_MS + 200 ms later.
      await sleep(500);
      await settled(send(worker.h1, '/c'));
      await sleep(UPSTREAM_IDLE_MS + 200);
      const d = await settled(send(worker.h1, '/d'));
      expect(d.errors).toEqual([]);
    };
    const health = async (): Promise<void> => {
      // A health check every 5 s (--health-interval-ms's default): the one before left its
      // connection idle for 4.95-5 s, as in the 200 s run that found all 41 at 4.94-5.00 s.
      expect(await checkHealth(worker.pool, 2000)).toBe(true);
      await sleep(WORKER_KEEP_ALIVE_MS - 50);
      expect(await checkHealth(worker.pool, 2000)).toBe(true);
      await sleep(20);
      expect(await checkHealth(worker.pool, 2000)).toBe(true); // soon after: this one reuses
    };
    await Promise.all([h1(), health()]);
    for (const t of closers.values()) clearTimeout(t);

    // What the worker saw: every request came on a new connection or one idle under the limit.
    const seen = srv.requests.map((r) => ({ path: r.path, idleMs: Math.round(r.idleMs) }));
    for (const r of seen) expect({ ...r, underLimit: r.idleMs < UPSTREAM_IDLE_MS }).toEqual({ ...r, underLimit: true });
    // The health check right after another one reused its connection: keep-alive still works.
    const checks = srv.requests.filter((r) => r.path === '/health');
    expect(checks).toHaveLength(3);
    expect(checks[2]!.socket).toBe(checks[1]!.socket);
    expect(checks[1]!.socket).not.toBe(checks[0]!.socket);
  }, 20_000);
});

describe('a paused exchange', () => {
  it('counts its connection idle from its first pause: the worker wrote the end while the router held it back', async () => {
    // A limit of 300 ms stands for UPSTREAM_IDLE_MS; the worker writes its answer's end 50 ms
    // into a 400 ms pause (its idle clock starts then), and the router reads it after the pause.
    const p = pool(connector, 300);
    srv.respond = (r) => {
      if (r.path !== '/slow') return srv.answer(r.socket, OK);
      r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab');
      setTimeout(() => srv.answer(r.socket, 'cd'), 50);
    };
    const rec = new Rec();
    let ex: ReturnType<H1Pool['request']> | null = null;
    let resumed = false;
    rec.onResponseData = function (this: Rec, chunk: Buffer) {
      this.body += chunk.toString();
      if (!resumed && ex) {
        ex.pause();
        resumed = true;
        setTimeout(() => ex!.resume(), 400);
      }
    };
    ex = p.request('GET', '/slow', '', null, rec);
    await settled(rec);
    expect([rec.errors, rec.body]).toEqual([[], 'abcd']);
    // Not kept: the worker's clock says it has been idle 350 ms already.
    expect(p.idleCount).toBe(0);
    const next = await settled(send(p, '/next'));
    expect(next.body).toBe('ok');
    expect(srv.requests.map((r) => [r.path, r.socketIndex])).toEqual([
      ['/slow', 0],
      ['/next', 1],
    ]);

    // A short pause (well under the limit) leaves the connection reusable.
    srv.reset();
    await waitUntil(() => p.size === 0, 3000, 'the pool seeing the server close');
    const rec2 = new Rec();
    let ex2: ReturnType<H1Pool['request']> | null = null;
    let once2 = false;
    rec2.onResponseData = function (this: Rec, chunk: Buffer) {
      this.body += chunk.toString();
      if (!once2 && ex2) {
        once2 = true;
        ex2.pause();
        setTimeout(() => ex2!.resume(), 20);
      }
    };
    srv.respond = (r) => {
      r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab');
      setTimeout(() => srv.answer(r.socket, 'cd'), 10);
    };
    ex2 = p.request('GET', '/short', '', null, rec2);
    await settled(rec2);
    expect(rec2.body).toBe('abcd');
    expect(p.idleCount).toBe(1);
  });
});

describe('through the router: a worker whose idle close crosses every reuse', () => {
  let cluster: SimCluster | null = null;
  let router: RouterHandle | null = null;
  let proxy: Server | null = null;
  afterAll(async () => {
    await router?.close();
    await cluster?.stop();
    if (proxy) await new Promise((r) => proxy!.close(r));
  });

  it('a generate written on a reused connection the worker resets is answered whole from the same worker, which is not benched', async () => {
    cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 1 });
    const target = new URL(cluster.workers()[0]!.url);
    // A TCP proxy in front of the worker: a POST /generate written on a connection that has
    // already carried an answer is reset unread, as uvicorn resets a request that reaches a
    // connection it has just closed for idleness. Everything else passes.
    let resets = 0;
    proxy = createServer((client) => {
      const up = netConnect({ host: target.hostname, port: Number(target.port) });
      let answered = false;
      client.on('error', () => up.destroy());
      up.on('error', () => client.destroy());
      up.on('data', (d: Buffer) => {
        answered = true;
        client.write(d);
      });
      up.on('end', () => client.end());
      client.on('end', () => up.end());
      client.on('data', (d: Buffer) => {
        if (answered && d.subarray(0, 14).toString('latin1') === 'POST /generate') {
          resets++;
          up.destroy();
          client.resetAndDestroy();
          return;
        }
        up.write(d);
      });
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    const url = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
    router = await startRouter({ port: 0, workers: [url], healthIntervalMs: 0 });
    await waitUntil(() => router!.workers()[0]?.format !== null, 5000, 'the worker probed');

    for (let k = 0; k < 3; k++) {
      const body = { input_ids: [3, 1, 4, k], sampling_params: { max_new_tokens: 8, ignore_eos: true } };
      const r = await stream(router.url, body);
      expect({ k, status: r.status, error: r.error, done: r.done }).toEqual({ k, status: 200, error: null, done: true });
      expect(r.frames.at(-1)!.output_ids).toEqual(runModel(body.input_ids, body.sampling_params).output_ids);
      const id = (r.frames.at(-1)!.meta_info as { id: string }).id;
      // One attempt: the retry is the h1 client's, below the attempt layer.
      expect(router.traceRows({ kind: 'attempt', request: id })).toHaveLength(1);
    }
    // The second and third were each written on the connection the one before left, and reset.
    expect(resets).toBe(2);
    expect(router.workers()[0]!.health).toBe('healthy');
  }, 30_000);
});
