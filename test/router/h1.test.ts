// The lean HTTP/1.1 client of generate attempts (router/upstream/h1.ts), against raw `node:net`
// servers on loopback that write their answers byte for byte: every framing RFC 9112 allows a
// worker (chunked with extensions and trailers, Content-Length, close-delimited, after interim
// 1xx), cut at random read boundaries; malformed answers; a worker that goes away; the cap and
// its queue; abort, pause/resume, one-shot exchanges on a spare, the idle timeout, close().
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildConnector } from 'undici';
import { CLOSED, H1Pool, PROTOCOL, type H1Handler } from '../../router/upstream/h1.ts';
import { waitUntil } from './harness/procs.ts';
import { onRequests } from './harness/raw-requests.ts';

const connector = buildConnector({ timeout: 2000 });
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const tick = () => new Promise<void>((r) => setImmediate(r));


type CodedError = Error & { code?: string };

/** A handler that records every call, and any call after the exchange ended. */
class Rec implements H1Handler {
  status: number | null = null;
  contentType: string | null = null;
  starts = 0;
  ends = 0;
  datas = 0;
  chunks: Buffer[] = [];
  errors: CodedError[] = [];
  /** Calls after onResponseEnd or onResponseError (there must be none). */
  late: string[] = [];
  onData: ((c: Buffer) => void) | null = null;
  onEnd: (() => void) | null = null;
  private settle!: () => void;
  readonly settled = new Promise<void>((r) => (this.settle = r));

  get finished(): boolean {
    return this.ends + this.errors.length > 0;
  }

  get body(): Buffer {
    return Buffer.concat(this.chunks);
  }

  get calls(): number {
    return this.starts + this.datas + this.ends + this.errors.length;
  }

  onResponseStart(status: number, contentType: string): void {
    if (this.finished) this.late.push('start');
    this.starts++;
    this.status = status;
    this.contentType = contentType;
  }

  onResponseData(chunk: Buffer): void {
    if (this.finished) this.late.push('data');
    if (this.starts === 0) this.late.push('data before start');
    this.datas++;
    this.chunks.push(chunk); // not copied: a view must stay valid
    this.onData?.(chunk);
  }

  onResponseEnd(): void {
    if (this.finished) this.late.push('end');
    this.ends++;
    this.onEnd?.();
    this.settle();
  }

  onResponseError(err: Error): void {
    if (this.finished) this.late.push('error');
    this.errors.push(err);
    this.settle();
  }
}

async function settledWithin(rec: Rec, ms = 3000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the exchange did not end within ${ms} ms (a hang)`)), ms);
  });
  try {
    await Promise.race([rec.settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** One request on `p`, awaited to its end (or a hang's timeout): the handler's record. */
async function exchange(p: H1Pool, method: string, path: string, headers: string, body: Buffer | string | null, oneShot = false): Promise<Rec> {
  const rec = new Rec();
  p.request(method, path, headers, body, rec, oneShot);
  await settledWithin(rec);
  return rec;
}

interface ReqInfo {
  socket: Socket;
  /** Index of the socket in the order the server accepted them. */
  socketIndex: number;
  head: string;
  method: string;
  path: string;
  body: Buffer;
}

/** A raw TCP server that parses requests (head and Content-Length body) and lets the test answer. */
class RawServer {
  readonly server: Server;
  sockets: Socket[] = [];
  closed = new Set<Socket>();
  requests: ReqInfo[] = [];
  open = 0;
  maxOpen = 0;
  respond: (r: ReqInfo) => void = (r) => r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  onAccept: ((s: Socket) => void) | null = null;
  url!: URL;
  port = 0;

  constructor() {
    this.server = createServer({ noDelay: true }, (s) => this.accept(s));
  }

  async start(): Promise<this> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as { port: number }).port;
    this.url = new URL(`http://127.0.0.1:${this.port}`);
    return this;
  }

  private accept(s: Socket): void {
    const index = this.sockets.length;
    this.sockets.push(s);
    this.open++;
    this.maxOpen = Math.max(this.maxOpen, this.open);
    s.on('error', () => undefined);
    s.on('close', () => {
      this.open--;
      this.closed.add(s);
    });
    this.onAccept?.(s);
    onRequests(s, (head, body) => {
      const [method = '', path = ''] = head.split(' ');
      const req: ReqInfo = { socket: s, socketIndex: index, head, method, path, body };
      this.requests.push(req);
      this.respond(req);
    });
  }

  /** Every socket closed and every record cleared (between runs of a property). */
  async reset(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await waitUntil(() => this.open === 0, 2000, 'server sockets closed');
    this.sockets = [];
    this.closed = new Set();
    this.requests = [];
    this.maxOpen = 0;
    this.onAccept = null;
    this.respond = (r) => r.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

let srv: RawServer;
const pools: H1Pool[] = [];

function pool(opts: Partial<ConstructorParameters<typeof H1Pool>[2]> = {}, url = srv.url): H1Pool {
  const p = new H1Pool(url, connector, { connections: 8, keepAliveMs: 10_000, ...opts });
  pools.push(p);
  return p;
}

beforeAll(async () => {
  srv = await new RawServer().start();
});

afterEach(async () => {
  for (const p of pools.splice(0)) await p.destroy();
  await srv.reset();
});

afterAll(async () => {
  await srv.stop();
});

// --- the property: every well-formed framing, at any read boundaries -------------------------

type Framing = 'chunked' | 'length' | 'close' | 'te-close';

interface Spec {
  version: '1.1' | '1.0';
  status: number;
  reason: string;
  contentType: string | null;
  framing: Framing;
  body: Uint8Array;
  chunkSizes: number[];
  exts: string[];
  hexUpper: boolean;
  hexPad: boolean;
  trailers: string[];
  teValue: string;
  interim: string[];
  connClose: string | null;
  keepAliveHeader: boolean;
  dupLength: boolean;
  mask: boolean[];
  seps: string[];
  /** Each head line's terminator (status line, fields, the empty line): CRLF, or a bare LF (RFC 9112 §2.2). */
  eols: string[];
  /** Content-Type's value folded onto a second line (obs-fold, RFC 9112 §5.2) where it has a '; '. */
  fold: boolean;
  cuts: number[];
  mode: 'one' | 'cork' | 'immediate' | 'delay';
}

const bodyArb = fc.oneof(
  fc.uint8Array({ maxLength: 3000, size: 'max' }),
  fc.uint8Array({ maxLength: 20 }),
  // Bytes a parser might mistake for framing: CR, LF, hex digits, ';', '0'.
  fc.array(fc.constantFrom(13, 10, 48, 49, 59, 97, 70, 32), { maxLength: 1500, size: 'max' }).map((a) => Uint8Array.from(a)),
);

const specArb: fc.Arbitrary<Spec> = fc.record({
  version: fc.constantFrom<'1.1' | '1.0'>('1.1', '1.1', '1.1', '1.0'),
  status: fc.constantFrom(200, 201, 202, 400, 404, 429, 500, 503),
  reason: fc.constantFrom('OK', '', 'Some Reason', 'Service Unavailable'),
  contentType: fc.constantFrom('text/event-stream', 'application/json', 'application/json; charset=utf-8', null),
  framing: fc.constantFrom<Framing>('chunked', 'chunked', 'length', 'length', 'close', 'te-close'),
  body: bodyArb,
  chunkSizes: fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 12 }),
  exts: fc.array(fc.constantFrom('', '', ';a=b', ';ext', ' ;q="x y"', ';a=b;c=d'), { minLength: 1, maxLength: 6 }),
  hexUpper: fc.boolean(),
  hexPad: fc.boolean(),
  trailers: fc.array(fc.constantFrom('X-Checksum: abc', 'Server-Timing: total;dur=12', 'x-empty:'), { maxLength: 2 }),
  teValue: fc.constantFrom('chunked', 'Chunked', 'CHUNKED', 'gzip, chunked'),
  interim: fc.array(fc.constantFrom('HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n', 'HTTP/1.1 102 Processing\r\n\r\n'), { maxLength: 2 }),
  connClose: fc.constantFrom(null, null, 'close', 'Close', 'CLOSE'),
  keepAliveHeader: fc.boolean(),
  dupLength: fc.boolean(),
  mask: fc.array(fc.boolean(), { minLength: 7, maxLength: 7 }),
  seps: fc.array(fc.constantFrom(':', ': ', ':  ', ':\t', ': '), { minLength: 8, maxLength: 8 }),
  eols: fc.oneof(fc.constant(Array(10).fill('\r\n')), fc.constant(Array(10).fill('\n')), fc.array(fc.constantFrom('\r\n', '\n'), { minLength: 10, maxLength: 10 })),
  fold: fc.boolean(),
  cuts: fc.array(fc.integer({ min: 1, max: 1_000_000 }), { maxLength: 12 }),
  mode: fc.constantFrom<Spec['mode']>('one', 'cork', 'immediate', 'delay'),
});

function casing(name: string, mask: boolean[], salt: number): string {
  return [...name].map((ch, i) => (mask[(i + salt) % mask.length] ? ch.toUpperCase() : ch.toLowerCase())).join('');
}

interface Built {
  bytes: Buffer;
  /** The server ends the connection after the answer (close-delimited framing). */
  closeAfter: boolean;
  reusable: boolean;
}

function build(spec: Spec): Built {
  // HTTP/1.0 has no chunked coding: a 1.0 answer with Transfer-Encoding is read as its coding says,
  // and its connection closed after it (RFC 9112 §6.1: faulty framing).
  const framing = spec.framing;
  const body = Buffer.from(spec.body);
  const headers: [string, string][] = [['X-Request-Id', 'req-1']];
  if (spec.contentType !== null) headers.push(['Content-Type', spec.contentType]);
  let connection: string | null = null;
  if (spec.version === '1.1') connection = spec.connClose ?? (spec.keepAliveHeader ? 'keep-alive' : null);
  else if (spec.keepAliveHeader) connection = 'Keep-Alive';
  if (connection !== null) headers.push(['Connection', connection]);
  let encoded: Buffer;
  if (framing === 'chunked') {
    headers.push(['Transfer-Encoding', spec.teValue]);
    const parts: Buffer[] = [];
    let at = 0;
    let k = 0;
    const sizeLine = (n: number) => {
      let hex = n.toString(16);
      if (spec.hexUpper) hex = hex.toUpperCase();
      if (spec.hexPad) hex = `0${hex}`;
      return `${hex}${spec.exts[k++ % spec.exts.length]}\r\n`;
    };
    while (at < body.length) {
      const n = Math.min(spec.chunkSizes[k % spec.chunkSizes.length]!, body.length - at);
      parts.push(Buffer.from(sizeLine(n), 'latin1'), body.subarray(at, at + n), Buffer.from('\r\n'));
      at += n;
    }
    parts.push(Buffer.from(`${sizeLine(0)}${spec.trailers.map((t) => `${t}\r\n`).join('')}\r\n`, 'latin1'));
    encoded = Buffer.concat(parts);
  } else if (framing === 'length') {
    headers.push(['Content-Length', String(body.length)]);
    if (spec.dupLength) headers.push(['Content-Length', String(body.length)]);
    encoded = body;
  } else {
    if (framing === 'te-close') headers.push(['Transfer-Encoding', 'gzip']);
    encoded = body;
  }
  const statusLine = `HTTP/${spec.version} ${spec.status} ${spec.reason}`;
  const eol = (i: number) => spec.eols[i % spec.eols.length]!;
  const value = (n: string, v: string, i: number) => (spec.fold && n === 'Content-Type' && v.includes('; ') ? v.replace('; ', `;${eol(i)} `) : v);
  const head = `${statusLine}${eol(0)}${headers.map(([n, v], i) => `${casing(n, spec.mask, i)}${spec.seps[i % spec.seps.length]}${value(n, v, i + 3)}${eol(i + 1)}`).join('')}${eol(headers.length + 1)}`;
  const bytes = Buffer.concat([Buffer.from(spec.interim.join(''), 'latin1'), Buffer.from(head, 'latin1'), encoded]);
  const keepAlive = spec.version === '1.1' ? connection === null || connection === 'keep-alive' : connection === 'Keep-Alive';
  const te = framing === 'chunked' || framing === 'te-close';
  const reusable = (framing === 'chunked' || framing === 'length') && keepAlive && !(spec.version === '1.0' && te);
  return { bytes, closeAfter: framing === 'close' || framing === 'te-close', reusable };
}

async function writePieces(s: Socket, bytes: Buffer, cuts: number[], mode: Spec['mode'], closeAfter: boolean): Promise<void> {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let at = 0;
  for (const p of [...points, bytes.length]) {
    pieces.push(bytes.subarray(at, p));
    at = p;
  }
  if (mode === 'one') s.write(bytes);
  else if (mode === 'cork') {
    s.cork();
    for (const p of pieces) s.write(p);
    s.uncork();
  } else {
    for (const [i, p] of pieces.entries()) {
      if (s.destroyed) return;
      s.write(p);
      if (mode === 'immediate') await tick();
      else await sleep(i % 3);
    }
  }
  if (closeAfter) s.end();
}

describe('H1Pool: responses as a worker may frame them', () => {
  it('reads every well-formed framing at any read boundaries; reuses the connection exactly when the answer allows', async () => {
    const reqBody = '{"text":"héllo ✓","stream":true}';
    await fc.assert(
      fc.asyncProperty(specArb, async (spec) => {
        await srv.reset();
        const p = new H1Pool(srv.url, connector, { connections: 4, keepAliveMs: 10_000 });
        try {
          const built = build(spec);
          srv.respond = (r) => void writePieces(r.socket, built.bytes, spec.cuts, spec.mode, built.closeAfter);
          const rec = new Rec();
          let idleAtEnd = -1;
          rec.onEnd = () => (idleAtEnd = p.idleCount);
          p.request('POST', '/generate', 'content-type: application/json\r\n', reqBody, rec);
          await settledWithin(rec);
          expect(rec.errors).toEqual([]);
          expect(rec.ends).toBe(1);
          expect(rec.starts).toBe(1);
          expect(rec.status).toBe(spec.status);
          expect(rec.contentType).toBe(spec.contentType ?? '');
          expect(rec.body.equals(Buffer.from(spec.body))).toBe(true);
          // What went out: one request, its head as built, its body byte-exact.
          expect(srv.requests).toHaveLength(1);
          const req = srv.requests[0]!;
          expect(req.head).toBe(`POST /generate HTTP/1.1\r\nhost: 127.0.0.1:${srv.port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(reqBody)}`);
          expect(req.body.toString()).toBe(reqBody);
          // Released before the handler hears of the end, or closed.
          expect(idleAtEnd).toBe(built.reusable ? 1 : 0);

          srv.respond = (r) => r.socket.write(OK);
          const rec2 = await exchange(p, 'GET', '/second', '', null);
          expect(rec2.errors).toEqual([]);
          expect(rec2.body.toString()).toBe('ok');
          expect(srv.requests).toHaveLength(2);
          expect(srv.sockets).toHaveLength(built.reusable ? 1 : 2);
          expect(srv.requests[1]!.socket === req.socket).toBe(built.reusable);
          if (!built.reusable) await waitUntil(() => srv.closed.has(req.socket), 2000, 'the first connection closed');
          await tick();
          expect(rec.late).toEqual([]);
          expect(rec2.late).toEqual([]);
        } finally {
          await p.destroy();
        }
      }),
      { numRuns: 150 },
    );
  }, 60_000);

  it('a chunked answer cut in two at every byte (between CR and LF too) reads the same', async () => {
    const res = Buffer.from('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n!\r\n0\r\nt: v\r\n\r\n');
    const p = pool();
    for (let cut = 1; cut < res.length; cut++) {
      srv.respond = (r) => {
        r.socket.write(res.subarray(0, cut));
        // A read boundary at the cut: the second piece goes out only after the first was read.
        setTimeout(() => r.socket.write(res.subarray(cut)), 3);
      };
      const rec = await exchange(p, 'POST', '/generate', '', '{}');
      expect({ cut, body: rec.body.toString(), ends: rec.ends, errors: rec.errors.map((e) => e.code) }).toEqual({ cut, body: 'hello!', ends: 1, errors: [] });
    }
    expect(srv.sockets).toHaveLength(1); // every answer left the connection reusable
  });

  it('a 204 has no body whatever its headers say, and the connection carries the next request', async () => {
    const p = pool();
    srv.respond = (r) => r.socket.write(r.path === '/a' ? 'HTTP/1.1 204 No Content\r\nContent-Type: text/plain\r\n\r\n' : OK);
    const rec = await exchange(p, 'GET', '/a', '', null);
    expect([rec.status, rec.contentType, rec.datas, rec.ends]).toEqual([204, 'text/plain', 0, 1]);
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(1);
  });

  it('reads a response with both Transfer-Encoding and Content-Length as chunked, and never reuses its connection', async () => {
    const p = pool();
    srv.respond = (r) => r.socket.write(r.path === '/a' ? 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n' : OK);
    const rec = await exchange(p, 'GET', '/a', '', null);
    expect(rec.errors).toEqual([]);
    expect(rec.body.toString()).toBe('hello');
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(2);
  });
});

describe('H1Pool: RFC 9112 as a recipient reads it', () => {
  it('obs-fold: each fold read as SP (§5.2: a user agent replaces it and accepts), in the fields the client reads too', async () => {
    const p = pool();
    const folded =
      'HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Type: text/event-stream;\r\n\t charset=utf-8\r\nTransfer-Encoding: gzip,\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n';
    srv.respond = (r) => r.socket.write(r.path === '/a' ? folded : OK);
    const rec = await exchange(p, 'GET', '/a', '', null);
    expect(rec.errors).toEqual([]);
    expect([rec.status, rec.contentType, rec.body.toString()]).toEqual([200, 'text/event-stream; charset=utf-8', 'hello']);
    // Chunked, read as such: the connection carries the next request.
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(1);
    // A fold of Content-Length is read too (value '2').
    srv.respond = (r) => r.socket.write('HTTP/1.1 200 OK\r\nContent-Length:\r\n 2\r\n\r\nok');
    const rec3 = await exchange(p, 'GET', '/c', '', null);
    expect([rec3.errors, rec3.body.toString()]).toEqual([[], 'ok']);
  });

  it.each([
    ['chunked, Connection: keep-alive', 'HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'],
    ['gzip, chunked, Keep-Alive', 'HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=60\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'],
  ])('an HTTP/1.0 response with Transfer-Encoding (%s): read by its coding, its connection closed after it (§6.1: faulty framing)', async (_name, response) => {
    const p = pool();
    srv.respond = (r) => r.socket.write(r.path === '/a' ? response : OK);
    const rec = new Rec();
    let idleAtEnd = -1;
    rec.onEnd = () => (idleAtEnd = p.idleCount);
    p.request('GET', '/a', '', null, rec);
    await settledWithin(rec);
    expect([rec.errors, rec.body.toString()]).toEqual([[], 'hello']);
    expect(idleAtEnd).toBe(0);
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2000, 'the connection closed after the message');
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.requests[1]!.socketIndex).toBe(1);
  });

  it('a head whose lines end in a bare LF (§2.2: a recipient may take LF for the terminator) is read at any read boundary; the body after it is never taken for head', async () => {
    const p = pool();
    // A chunked body whose last bytes hold the CRLF CRLF a CRLF-only parser would stop at; an
    // interim 1xx with bare LFs too; mixed terminators in the final head.
    const res = Buffer.from('HTTP/1.1 103 Early Hints\nLink: </a>\n\nHTTP/1.1 200 OK\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\n\r\n5\r\nhello\r\n0\r\n\r\n');
    for (let cut = 0; cut < res.length; cut++) {
      srv.respond = (r) => {
        if (cut === 0) return void r.socket.write(res);
        r.socket.write(res.subarray(0, cut));
        setTimeout(() => r.socket.write(res.subarray(cut)), 3);
      };
      const rec = await exchange(p, 'POST', '/generate', '', '{}');
      expect({ cut, status: rec.status, type: rec.contentType, body: rec.body.toString(), ends: rec.ends, errors: rec.errors.map((e) => e.code) }).toEqual({
        cut,
        status: 200,
        type: 'text/event-stream',
        body: 'hello',
        ends: 1,
        errors: [],
      });
    }
    expect(srv.sockets).toHaveLength(1); // every answer left the connection reusable
    // Bare LF throughout, a Content-Length body.
    srv.respond = (r) => r.socket.write('HTTP/1.1 200 OK\nContent-Length: 2\n\nok');
    const rec = await exchange(p, 'GET', '/x', '', null);
    expect([rec.errors, rec.status, rec.body.toString()]).toEqual([[], 200, 'ok']);
    // A status line with no reason phrase, ended by a bare LF.
    srv.respond = (r) => r.socket.write('HTTP/1.1 204\n\n');
    const rec2 = await exchange(p, 'GET', '/y', '', null);
    expect([rec2.errors, rec2.status]).toEqual([[], 204]);
    expect(srv.sockets).toHaveLength(1);
  });
});

// --- malformed answers ------------------------------------------------------------------------

describe('H1Pool: malformed responses are protocol errors and close the connection', () => {
  const cases: [string, string | Buffer][] = [
    ['a garbage status line', 'hello world\r\n\r\n'],
    ['a status line of another protocol', 'ICY 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['HTTP/2 in a status line', 'HTTP/2 200\r\nContent-Length: 0\r\n\r\n'],
    ['a version that is not a digit', 'HTTP/1.x 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['letters in the status code', 'HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n'],
    ['a two-digit status code', 'HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n'],
    ['a four-digit status code', 'HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n'],
    ['a status code in exponent notation', 'HTTP/1.1 2e2 OK\r\nContent-Length: 0\r\n\r\n'],
    ['an interim status code in exponent notation', 'HTTP/1.1 1e2 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['a status code with a sign', 'HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n'],
    ['a header line without a colon', 'HTTP/1.1 200 OK\r\nContent-Length 0\r\n\r\n'],
    ['whitespace between the status line and the first field (RFC 9112 §2.2)', 'HTTP/1.1 200 OK\r\n X-A: b\r\nContent-Length: 0\r\n\r\n'],
    ['an unasked protocol switch', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n'],
    ['a non-numeric Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n'],
    ['a negative Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'],
    ['conflicting Content-Length values', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello'],
    ['a Content-Length list of different values', 'HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello'],
    ['an invalid chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['an invalid chunk size after a good chunk', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\n'],
    ['a negative chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n'],
    ['an empty chunk size line', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n'],
    ['a chunk size line ended by a bare LF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n'],
    ['junk after a chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\nhello\r\n0\r\n\r\n'],
    ['a chunk size over 12 hex digits', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\n'],
    ['chunk data not followed by CRLF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n'],
    ['chunk data followed by a bare LF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n'],
    ['a trailer line ended by a bare LF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: y\n\r\n'],
    ['a response head over 64 KiB', `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(70 * 1024)}`],
    ['a chunk size line over 64 KiB', `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;${'e'.repeat(70 * 1024)}`],
  ];

  it.each(cases)('%s', async (_name, response) => {
    const p = pool();
    srv.respond = (r) => r.socket.write(response); // and the server keeps the connection open
    const rec = await exchange(p, 'GET', '/x', '', null);
    expect(rec.ends).toBe(0);
    expect(rec.errors).toHaveLength(1);
    expect(rec.errors[0]!.code).toBe(PROTOCOL);
    // The client closed the connection: the server sees it go.
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2000, 'the connection closed by the client');
    expect(p.size).toBe(0);
    await tick();
    expect(rec.late).toEqual([]);
  });

  it.each([
    ['Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake'],
    ['chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake'],
  ])('bytes after a complete %s response in the same read: the answer is whole, the connection never reused', async (_name, response) => {
    const p = pool();
    srv.respond = (r) => r.socket.write(r.path === '/a' ? response : OK);
    const rec = await exchange(p, 'GET', '/a', '', null);
    expect(rec.errors).toEqual([]);
    expect(rec.body.toString()).toBe('ok');
    expect(p.idleCount).toBe(0);
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.errors).toEqual([]);
    expect(rec2.body.toString()).toBe('ok'); // not 'fake'
    expect(srv.sockets).toHaveLength(2);
    expect(srv.requests[1]!.socketIndex).toBe(1);
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2000, 'the first connection closed');
  });

  it('bytes on an idle connection (after a complete response) close it: the next request gets a new socket', async () => {
    const p = pool();
    srv.respond = (r) => {
      r.socket.write(OK);
      if (r.path === '/a') setTimeout(() => r.socket.write('HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n'), 30);
    };
    const rec = await exchange(p, 'GET', '/a', '', null);
    expect(rec.body.toString()).toBe('ok');
    expect(p.idleCount).toBe(1);
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2000, 'the idle connection closed by the client');
    expect(p.size).toBe(0);
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.errors).toEqual([]);
    expect(rec2.status).toBe(200);
    expect(srv.sockets).toHaveLength(2);
  });
});

// --- a worker that goes away --------------------------------------------------------------------

describe('H1Pool: the worker closing the connection', () => {
  const head = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n';
  it.each([
    ['ends it (FIN)', (s: Socket) => s.end(), [CLOSED]],
    ['destroys it', (s: Socket) => s.destroy(), [CLOSED]],
    ['resets it (RST)', (s: Socket) => s.resetAndDestroy(), [CLOSED, 'ECONNRESET']],
  ] as const)('mid-body: the worker %s after some chunks: an error, never onResponseEnd', async (_name, close, codes) => {
    const p = pool();
    srv.respond = (r) => {
      r.socket.write(`${head}6\r\ndata: \r\n`);
      setTimeout(() => r.socket.write('3\r\nabc\r\n'), 10);
      setTimeout(() => close(r.socket), 40);
    };
    const rec = await exchange(p, 'GET', '/x', '', null);
    expect(rec.status).toBe(200);
    expect(rec.body.toString()).toBe('data: abc');
    expect(rec.ends).toBe(0);
    expect(rec.errors).toHaveLength(1);
    expect(codes).toContain(rec.errors[0]!.code);
    expect(p.size).toBe(0);
    await sleep(20);
    expect(rec.late).toEqual([]);
  });

  it.each([
    ['inside a chunk', `${head}10\r\nonly-part`],
    ['inside a chunk size line', `${head}6\r\ndata: \r\n1`],
    ['before the trailers end', `${head}0\r\n`],
    ['inside a Content-Length body', 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort'],
    ['inside the head', 'HTTP/1.1 200 OK\r\nContent-Le'],
  ])('the worker ends the connection %s: CLOSED', async (_name, partial) => {
    const p = pool();
    srv.respond = (r) => r.socket.end(partial);
    const rec = await exchange(p, 'GET', '/x', '', null);
    expect(rec.ends).toBe(0);
    expect(rec.errors.map((e) => e.code)).toEqual([CLOSED]);
  });

  it.each([
    ['ends it', (s: Socket) => s.end()],
    ['destroys it', (s: Socket) => s.destroy()],
  ])('before any answer: the worker %s after reading the request: an error, not a hang', async (_name, close) => {
    const p = pool();
    srv.respond = (r) => close(r.socket);
    const rec = await exchange(p, 'POST', '/x', '', '{}');
    expect(rec.starts).toBe(0);
    expect(rec.errors.map((e) => e.code)).toEqual([CLOSED]);
    expect(p.size).toBe(0);
  });

  it('before any answer: the worker resets the connection at accept: an error, not a hang', async () => {
    const p = pool();
    srv.onAccept = (s) => s.resetAndDestroy();
    const rec = await exchange(p, 'POST', '/x', '', '{}');
    expect(rec.starts).toBe(0);
    expect(rec.errors).toHaveLength(1);
    expect([CLOSED, 'ECONNRESET', 'EPIPE']).toContain(rec.errors[0]!.code);
  });

  it('a connect to a closed port: ECONNREFUSED; the pool takes the next request', async () => {
    const tmp = createServer();
    tmp.listen(0, '127.0.0.1');
    await once(tmp, 'listening');
    const { port } = tmp.address() as { port: number };
    await new Promise((r) => tmp.close(r));
    const p = pool({ connections: 1 }, new URL(`http://127.0.0.1:${port}`));
    const a = new Rec();
    const b = new Rec(); // queued behind a's connect: it tries its own
    p.request('GET', '/a', '', null, a);
    p.request('GET', '/b', '', null, b);
    await settledWithin(a);
    await settledWithin(b);
    expect(a.errors.map((e) => e.code)).toEqual(['ECONNREFUSED']);
    expect(b.errors.map((e) => e.code)).toEqual(['ECONNREFUSED']);
    expect(p.size).toBe(0);
  });
});

// --- the cap, abort, pause/resume ------------------------------------------------------------

describe('H1Pool: the cap and its queue', () => {
  it('connections: 2 with 4 concurrent requests: never more than 2 sockets, all 4 complete', async () => {
    const p = pool({ connections: 2 });
    srv.respond = (r) => setTimeout(() => r.socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${r.path.length}\r\n\r\n${r.path}`), 80);
    let maxSize = 0;
    const recs = [1, 2, 3, 4].map((i) => {
      const rec = new Rec();
      p.request('GET', `/${i}`, '', null, rec);
      maxSize = Math.max(maxSize, p.size);
      return rec;
    });
    const sampler = setInterval(() => (maxSize = Math.max(maxSize, p.size)), 5);
    try {
      for (const r of recs) await settledWithin(r);
    } finally {
      clearInterval(sampler);
    }
    expect(recs.map((r) => r.body.toString())).toEqual(['/1', '/2', '/3', '/4']);
    expect(recs.every((r) => r.errors.length === 0 && r.ends === 1)).toBe(true);
    expect(srv.maxOpen).toBeLessThanOrEqual(2);
    expect(srv.sockets).toHaveLength(2); // the queued ones took the released connections
    expect(maxSize).toBeLessThanOrEqual(2);
    expect(p.idleCount).toBe(2);
  });

  it('an aborted queued exchange is never sent and its handler never called', async () => {
    const p = pool({ connections: 2 });
    srv.respond = (r) => setTimeout(() => r.socket.write(OK), 50);
    const recs = [1, 2, 3, 4].map(() => new Rec());
    const exs = recs.map((rec, i) => p.request('GET', `/${i + 1}`, '', null, rec));
    exs[2]!.abort();
    await settledWithin(recs[0]!);
    await settledWithin(recs[1]!);
    await settledWithin(recs[3]!);
    await sleep(100);
    expect(srv.requests.map((r) => r.path).sort()).toEqual(['/1', '/2', '/4']);
    expect(recs[2]!.calls).toBe(0);
    expect(srv.maxOpen).toBeLessThanOrEqual(2);
  });

  it('an exchange aborted while its connection is being made: the connection goes idle unused and serves the next one', async () => {
    const p = pool({ connections: 1 });
    const rec = new Rec();
    p.request('GET', '/aborted', '', null, rec).abort();
    await waitUntil(() => p.idleCount === 1, 2000, 'the connection idle');
    expect(srv.requests).toHaveLength(0);
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.requests.map((r) => r.path)).toEqual(['/b']);
    expect(srv.sockets).toHaveLength(1);
    expect(rec.calls).toBe(0);
  });
});

describe('H1Pool: abort, pause and resume', () => {
  it('abort() mid-body: the server sees the socket closed, the handler hears nothing more', async () => {
    const p = pool();
    let timer: NodeJS.Timeout | undefined;
    srv.respond = (r) => {
      r.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      timer = setInterval(() => !r.socket.destroyed && r.socket.write('5\r\nhello\r\n'), 10);
    };
    const rec = new Rec();
    const ex = p.request('GET', '/x', '', null, rec);
    rec.onData = () => ex.abort();
    try {
      await waitUntil(() => rec.datas > 0, 2000, 'the first data');
      await waitUntil(() => srv.sockets.length === 1 && srv.closed.has(srv.sockets[0]!), 2000, 'the server seeing the socket closed');
      const calls = rec.calls;
      await sleep(60);
      expect(rec.calls).toBe(calls);
      expect(rec.datas).toBe(1);
      expect(rec.ends + rec.errors.length).toBe(0);
      expect(p.size).toBe(0);
    } finally {
      clearInterval(timer);
    }
  });

  it('abort() after the request was sent, before any answer: closed, no handler call', async () => {
    const p = pool();
    let ex: ReturnType<H1Pool['request']> | null = null;
    srv.respond = () => ex!.abort();
    const rec = new Rec();
    ex = p.request('POST', '/x', '', 'body', rec);
    await waitUntil(() => srv.sockets.length === 1 && srv.closed.has(srv.sockets[0]!), 2000, 'the server seeing the socket closed');
    await sleep(20);
    expect(rec.calls).toBe(0);
    expect(p.size).toBe(0);
  });

  it('pause() stops the body (the worker backs up), resume() delivers the rest byte-exact', async () => {
    const p = pool();
    const total = 12 * 1024 * 1024;
    const body = Buffer.allocUnsafe(total);
    for (let i = 0; i < total; i += 4) body.writeUInt32LE((i * 2654435761) >>> 0, i);
    let server: Socket | null = null;
    srv.respond = (r) => {
      server = r.socket;
      r.socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (let at = 0; at < total; at += 65536) {
        const piece = body.subarray(at, at + 65536);
        r.socket.write(`${piece.length.toString(16)}\r\n`);
        r.socket.write(piece);
        r.socket.write('\r\n');
      }
      r.socket.write('0\r\n\r\n');
    };
    const rec = new Rec();
    const ex = p.request('GET', '/big', '', null, rec);
    let bytes = 0;
    let paused = false;
    let dataWhilePaused = 0;
    let pauses = 0;
    let inRead = false;
    rec.onData = (c) => {
      bytes += c.length;
      // Pieces of the read being parsed when pause() came may still arrive; nothing after it.
      if (paused && !inRead) dataWhilePaused++;
      if (!paused && (pauses === 0 || (pauses === 1 && bytes > total / 2))) {
        paused = true;
        pauses++;
        ex.pause();
        inRead = true;
        setImmediate(() => (inRead = false));
      }
    };
    for (let k = 0; k < 2; k++) {
      await waitUntil(() => pauses === k + 1, 3000, `pause ${k + 1}`);
      await sleep(150);
      const at = bytes;
      await sleep(150);
      expect(bytes).toBe(at);
      expect(dataWhilePaused).toBe(0);
      // The worker's writes have backed up behind the paused read.
      expect(server!.writableLength).toBeGreaterThan(0);
      paused = false;
      ex.resume();
    }
    await settledWithin(rec, 10_000);
    expect(rec.errors).toEqual([]);
    expect(rec.ends).toBe(1);
    expect(pauses).toBe(2);
    expect(rec.body.equals(body)).toBe(true);
    expect(p.idleCount).toBe(1); // a paused exchange's connection is resumed when it is released
  });

  it('pause() before the connection exists: nothing is read until resume()', async () => {
    const p = pool();
    const rec = new Rec();
    const ex = p.request('GET', '/x', '', null, rec);
    ex.pause();
    await waitUntil(() => srv.requests.length === 1, 2000, 'the request');
    await sleep(100);
    expect(rec.calls).toBe(0);
    ex.resume();
    await settledWithin(rec);
    expect(rec.body.toString()).toBe('ok');
    // And the reused connection is not left paused: the next exchange reads its answer.
    const rec2 = await exchange(p, 'GET', '/y', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(1);
  });

  it('a paused exchange whose answer completes in the paused read releases a connection that still reads', async () => {
    const p = pool();
    srv.respond = (r) => r.socket.write(r.path === '/a' ? 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd' : OK);
    const rec = new Rec();
    const ex = p.request('GET', '/a', '', null, rec);
    rec.onData = () => ex.pause();
    await settledWithin(rec);
    expect(rec.body.toString()).toBe('abcd');
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(1);
  });
});

// --- one-shot exchanges, idle connections, close() -------------------------------------------

describe('H1Pool: one-shot exchanges', () => {
  async function spareSocket(): Promise<Socket> {
    const s = netConnect({ host: '127.0.0.1', port: srv.port, noDelay: true });
    await once(s, 'connect');
    return s;
  }

  it('goes out on the spare with connection: close, and its connection closes after the answer', async () => {
    const spare = await spareSocket();
    await waitUntil(() => srv.sockets.length === 1, 2000, 'the spare accepted');
    let given: Socket | null = spare;
    let asked = 0;
    const p = pool({
      spares: {
        claim: () => {
          asked++;
          const s = given;
          given = null;
          return s;
        },
        noSpare: () => undefined,
      },
    });
    const rec = await exchange(p, 'POST', '/cont', 'x-a: b\r\n', '{"c":1}', true);
    expect(rec.errors).toEqual([]);
    expect(rec.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(1); // no new connection: the spare carried it
    expect(srv.requests[0]!.socketIndex).toBe(0);
    expect(srv.requests[0]!.head).toBe(`POST /cont HTTP/1.1\r\nhost: 127.0.0.1:${srv.port}\r\nx-a: b\r\nconnection: close\r\ncontent-length: 7`);
    expect(srv.requests[0]!.body.toString()).toBe('{"c":1}');
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2000, 'the one-shot connection closed');
    expect(spare.destroyed).toBe(true);
    expect(p.size).toBe(0);
    expect(p.idleCount).toBe(0);

    // No spare left: a connection of its own, closed after the answer too.
    const rec2 = await exchange(p, 'POST', '/cont', '', '{}', true);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(2);
    await waitUntil(() => srv.closed.has(srv.sockets[1]!), 2000, 'the second one-shot connection closed');
    expect(p.size).toBe(0);

    // A keep-alive exchange never takes a spare.
    await exchange(p, 'GET', '/k', '', null);
    expect(asked).toBe(2);
    expect(p.idleCount).toBe(1);
  });

  it('no spare ready: an idle keep-alive connection carries it at once (with connection: close), said through noSpare', async () => {
    const said: boolean[] = [];
    const p = pool({ spares: { claim: () => null, noSpare: (reused) => said.push(reused) } });
    await exchange(p, 'GET', '/warm', '', null);
    expect(p.idleCount).toBe(1);
    const rec = new Rec();
    p.request('POST', '/cont', '', '{}', rec, true);
    // Written in the same turn: the server needs no new connection for it.
    await settledWithin(rec);
    expect(rec.body.toString()).toBe('ok');
    expect(srv.sockets).toHaveLength(1);
    expect(srv.requests[1]!.socketIndex).toBe(0);
    expect(srv.requests[1]!.head).toContain('\r\nconnection: close\r\n');
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2000, 'the reused connection closed after the answer');
    expect(p.idleCount).toBe(0);
    // Nothing idle now: a new connection.
    await exchange(p, 'POST', '/cont', '', '{}', true);
    expect(srv.sockets).toHaveLength(2);
    expect(said).toEqual([true, false]);
  });

  it('a one-shot exchange is not held by the cap', async () => {
    const p = pool({ connections: 1 });
    srv.respond = (r) => setTimeout(() => r.socket.write(OK), r.path === '/slow' ? 300 : 0);
    const slow = new Rec();
    p.request('GET', '/slow', '', null, slow);
    const one = await exchange(p, 'POST', '/cont', '', '{}', true);
    expect(one.body.toString()).toBe('ok');
    expect(slow.finished).toBe(false);
    await settledWithin(slow);
  });

  it('a spare the worker already closed: CLOSED, not a hang', async () => {
    const spare = await spareSocket();
    spare.destroy();
    const p = pool({ spares: { claim: () => spare, noSpare: () => undefined } });
    const rec = await exchange(p, 'POST', '/cont', '', '{}', true);
    expect(rec.errors.map((e) => e.code)).toEqual([CLOSED]);
    expect(p.size).toBe(0);
  });
});

describe('H1Pool: idle connections', () => {
  it('closes an idle connection after keepAliveMs (the sweep runs every second)', async () => {
    const p = pool({ keepAliveMs: 300 });
    await exchange(p, 'GET', '/x', '', null);
    const t0 = Date.now();
    expect(p.idleCount).toBe(1);
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 2500, 'the idle connection closed');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    expect(p.size).toBe(0);
    expect(p.idleCount).toBe(0);
  });

  it('keep-alive: timeout=2 (2000 - 2000 ms) keeps nothing; timeout=3 lowers the idle time to 1 s', async () => {
    const p = pool({ keepAliveMs: 60_000 });
    srv.respond = (r) => r.socket.write(`HTTP/1.1 200 OK\r\nKeep-Alive: ${r.path === '/one' ? 'timeout=2' : 'timeout=3, max=100'}\r\nContent-Length: 2\r\n\r\nok`);
    const rec = new Rec();
    let idleAtEnd = -1;
    rec.onEnd = () => (idleAtEnd = p.idleCount);
    p.request('GET', '/one', '', null, rec);
    await settledWithin(rec);
    expect(rec.body.toString()).toBe('ok');
    expect(idleAtEnd).toBe(0);
    await waitUntil(() => srv.closed.has(srv.sockets[0]!), 900, 'the connection closed at once (not by a sweep)');

    await exchange(p, 'GET', '/two', '', null);
    const t0 = Date.now();
    expect(p.idleCount).toBe(1);
    await waitUntil(() => srv.closed.has(srv.sockets[1]!), 2500, 'the idle connection closed');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
  });

  it('a worker closing an idle keep-alive connection: the next request goes out on a fresh one and succeeds', async () => {
    const p = pool();
    srv.respond = (r) => {
      r.socket.write(OK);
      if (r.path === '/a') setTimeout(() => r.socket.end(), 20);
    };
    await exchange(p, 'GET', '/a', '', null);
    expect(p.idleCount).toBe(1);
    await waitUntil(() => p.size === 0, 2000, 'the pool noticing the close');
    const rec2 = await exchange(p, 'GET', '/b', '', null);
    expect(rec2.errors).toEqual([]);
    expect(rec2.body.toString()).toBe('ok');
    expect(srv.requests.map((r) => r.socketIndex)).toEqual([0, 1]);
  });
});

describe('H1Pool: close() and destroy()', () => {
  it('close() closes idle connections at once, resolves after in-flight exchanges end; later requests fail', async () => {
    const p = pool({ connections: 4 });
    // Two connections idle first.
    const warm = [new Rec(), new Rec()];
    for (const r of warm) p.request('GET', '/warm', '', null, r);
    for (const r of warm) await settledWithin(r);
    expect(p.idleCount).toBe(2);
    srv.respond = (r) => setTimeout(() => r.socket.write(OK), 200);
    const inflight = new Rec();
    p.request('GET', '/slow', '', null, inflight);
    let closed = false;
    const done = p.close().then(() => (closed = true));
    await waitUntil(() => srv.closed.size === 1, 1000, 'the idle connection closed at once');
    expect(closed).toBe(false);
    await sleep(50);
    expect(closed).toBe(false);
    expect(inflight.finished).toBe(false);
    await done;
    expect(inflight.ends).toBe(1);
    expect(inflight.body.toString()).toBe('ok');
    expect(p.size).toBe(0);
    await waitUntil(() => srv.closed.size === 2, 1000, 'the busy connection closed after its answer');

    const after = new Rec();
    p.request('GET', '/late', '', null, after);
    expect(after.calls).toBe(0); // failed asynchronously, never inside request()
    await settledWithin(after);
    expect(after.errors.map((e) => e.code)).toEqual(['ERR_POOL_CLOSED']);
    expect(srv.requests.map((r) => r.path)).not.toContain('/late');
  });

  it('close() fails the queued exchanges with ERR_POOL_CLOSED', async () => {
    const p = pool({ connections: 1 });
    srv.respond = (r) => setTimeout(() => r.socket.write(OK), 100);
    const a = new Rec();
    const b = new Rec();
    p.request('GET', '/a', '', null, a);
    p.request('GET', '/b', '', null, b);
    await p.close();
    expect(a.ends).toBe(1);
    expect(b.errors.map((e) => e.code)).toEqual(['ERR_POOL_CLOSED']);
    expect(srv.requests.map((r) => r.path)).toEqual(['/a']);
  });

  it('close() with nothing open resolves at once', async () => {
    const p = pool();
    await p.close();
    expect(p.size).toBe(0);
  });

  it('destroy() fails the exchanges in flight and resolves when every connection is gone', async () => {
    const p = pool();
    srv.respond = () => undefined; // never answers
    const a = new Rec();
    p.request('GET', '/a', '', null, a);
    await waitUntil(() => srv.requests.length === 1, 2000, 'the request');
    await p.destroy();
    expect(a.errors.map((e) => e.code)).toEqual([CLOSED]);
    expect(p.size).toBe(0);
    await waitUntil(() => srv.closed.size === 1, 1000, 'the server seeing the close');
  });
});
