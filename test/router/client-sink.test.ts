// ClientSink (router/core/client-sink.ts) on a real `node:http` server, read by a raw
// `node:net` client and a strict chunked decoder: the frames written directly on the socket as
// one HTTP/1.1 chunk each (while the response owns the socket), through res.write otherwise
// (a pipelined answer queued behind another, an HTTP/1.0 client); keep-alive, pipelining,
// backpressure to a client that stops reading, the in-band error at the end.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ClientSink, SSE_DONE, type ErrorShapes } from '../../router/core/client-sink.ts';
import { waitUntil } from './harness/procs.ts';

const ERRORS: ErrorShapes = {
  body: (_s, m) => ({ error: { message: m } }),
  frame: (_s, m) => ({ error: { message: m } }),
};

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const tick = () => new Promise<void>((r) => setImmediate(r));


/** Whether the sink writes on the socket itself (its private `direct`). */
function isDirect(sink: ClientSink): boolean {
  return (sink as unknown as { direct: Socket | null }).direct !== null;
}

const bytesOf = (f: Buffer | string) => (typeof f === 'string' ? Buffer.from(f, 'utf8') : f);

/** A frame of exactly `n` bytes. */
function sized(n: number, fill = 'x'): string {
  return `data: "${fill.repeat(n - 10)}"\n\n`;
}

// Buffers and strings, multi-byte UTF-8, empty ones (which must write nothing), and frames on
// both sides of the size at which the sink stops copying (16 KiB).
const FRAMES: (Buffer | string)[] = [
  'data: {"a":1}\n\n',
  Buffer.from('data: {"b":2}\n\n'),
  '',
  'data: {"t":"héllo 世界 🎉 ✓"}\n\n',
  Buffer.alloc(0),
  Buffer.from('data: {"t":"ünïcödé ☃"}\n\n', 'utf8'),
  sized(16 * 1024),
  sized(16 * 1024 + 1),
  `data: {"big":"${'é'.repeat(9000)}"}\n\n`, // 9k characters, 18k bytes
  Buffer.from(`data: {"big":"${'y'.repeat(40_000)}"}\n\n`),
  `data: {"emoji":"${'🎉'.repeat(4100)}"}\n\n`, // 4100 characters (8200 UTF-16 units), 16.4k bytes
  'data: {"c":3}\n\n',
];

function expectedChunks(frames: (Buffer | string)[], ...tail: (Buffer | string)[]): Buffer[] {
  return [...frames, ...tail].map(bytesOf).filter((b) => b.length > 0).concat([SSE_DONE]);
}

interface Parsed {
  status: number;
  headers: Map<string, string>;
  chunks: Buffer[];
  /** Offset just after the response. */
  end: number;
}

/**
 * A strict HTTP/1.1 response reader for a chunked body: null while incomplete, throws on any
 * byte out of place (lowercase hex sizes without extensions, CRLF after every chunk, no
 * trailers, no empty chunk before the last).
 */
function parseChunked(buf: Buffer, from = 0): Parsed | null {
  const headEnd = buf.indexOf('\r\n\r\n', from);
  if (headEnd < 0) return null;
  const lines = buf.toString('latin1', from, headEnd).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3}) [^\r\n]*$/.exec(lines[0]!);
  if (!m) throw new Error(`bad status line ${JSON.stringify(lines[0])}`);
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const h = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+): ?(.*)$/.exec(line);
    if (!h) throw new Error(`bad header line ${JSON.stringify(line)}`);
    const name = h[1]!.toLowerCase();
    if (headers.has(name)) throw new Error(`duplicate header ${name}`);
    headers.set(name, h[2]!);
  }
  if (headers.get('transfer-encoding') !== 'chunked') throw new Error(`not chunked: ${JSON.stringify([...headers])}`);
  if (headers.has('content-length')) throw new Error('both Content-Length and chunked');
  const chunks: Buffer[] = [];
  let i = headEnd + 4;
  for (;;) {
    const crlf = buf.indexOf('\r\n', i);
    if (crlf < 0) {
      if (buf.length - i > 16) throw new Error(`chunk size line too long at ${i}`);
      return null;
    }
    const line = buf.toString('latin1', i, crlf);
    if (!/^[0-9a-f]{1,8}$/.test(line)) throw new Error(`bad chunk size line ${JSON.stringify(line.slice(0, 40))} at ${i}`);
    const size = parseInt(line, 16);
    i = crlf + 2;
    if (size === 0) {
      if (buf.length < i + 2) return null;
      if (buf[i] !== 13 || buf[i + 1] !== 10) throw new Error('trailers or junk after the last chunk');
      return { status: Number(m[1]), headers, chunks, end: i + 2 };
    }
    if (buf.length < i + size + 2) return null;
    chunks.push(buf.subarray(i, i + size));
    if (buf[i + size] !== 13 || buf[i + size + 1] !== 10) throw new Error(`chunk at ${i} (${size} bytes) not followed by CRLF`);
    i += size + 2;
  }
}

function expectChunks(got: Buffer[], want: Buffer[]): void {
  expect(got.length).toBe(want.length);
  for (let k = 0; k < want.length; k++) {
    if (!got[k]!.equals(want[k]!)) throw new Error(`chunk ${k} differs: got ${JSON.stringify(got[k]!.toString().slice(0, 80))}…, want ${JSON.stringify(want[k]!.toString().slice(0, 80))}…`);
  }
}

/** A raw client on one socket: every byte it read, in order. */
class RawClient {
  readonly socket: Socket;
  private parts: Buffer[] = [];
  private joined: Buffer | null = null;
  length = 0;
  ended = false;

  constructor(port: number) {
    this.socket = connect({ host: '127.0.0.1', port, noDelay: true });
    this.socket.on('data', (d: Buffer) => {
      this.parts.push(d);
      this.length += d.length;
      this.joined = null;
    });
    this.socket.on('end', () => (this.ended = true));
    this.socket.on('error', () => undefined);
  }

  get bytes(): Buffer {
    if (this.joined === null) {
      this.joined = Buffer.concat(this.parts);
      this.parts = [this.joined];
    }
    return this.joined;
  }

  /** The next chunked response from `from`, once whole. */
  async response(from = 0, ms = 5000): Promise<Parsed> {
    let got: Parsed | null = null;
    await waitUntil(() => (got = parseChunked(this.bytes, from)) !== null, ms, `a whole response at ${from}`);
    return got!;
  }
}

let server: Server;
let port = 0;
let handler: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
const clients: RawClient[] = [];

function client(): RawClient {
  const c = new RawClient(port);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  server = createServer({ requestTimeout: 0, keepAliveTimeout: 65_000 }, (req, res) => handler(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as { port: number }).port;
});

afterEach(() => {
  for (const c of clients.splice(0)) c.socket.destroy();
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const GET = (path: string, version = '1.1') => `GET ${path} HTTP/${version}\r\nHost: 127.0.0.1\r\n\r\n`;

/** Write the frames, half in this turn and half in a later one, then end. */
async function writeFrames(sink: ClientSink, frames: (Buffer | string)[], end: (s: ClientSink) => void = (s) => s.endStream()): Promise<void> {
  const half = Math.floor(frames.length / 2);
  for (const f of frames.slice(0, half)) sink.writeRaw(f);
  await tick();
  for (const f of frames.slice(half)) sink.writeRaw(f);
  end(sink);
}

describe('ClientSink: frames on an HTTP/1.1 keep-alive connection', () => {
  it('two requests in sequence on one socket: each answer whole, each frame one chunk, then [DONE] and the last chunk', async () => {
    const seen: { path: string; direct: boolean; gone: boolean }[] = [];
    handler = (req, res) => {
      let gone = false;
      const sink = new ClientSink(res, true, { 'x-request-id': req.url! }, () => (gone = true), ERRORS);
      sink.writeRaw(''); // starts the stream, writes no chunk
      const record = { path: req.url!, direct: isDirect(sink), gone: false };
      seen.push(record);
      res.on('close', () => (record.gone = gone));
      void writeFrames(sink, FRAMES);
    };
    const c = client();
    c.socket.write(GET('/one'));
    const r1 = await c.response();
    expect(r1.status).toBe(200);
    expect(r1.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(r1.headers.get('x-request-id')).toBe('/one');
    expect(r1.headers.get('connection')).toBe('keep-alive');
    expectChunks(r1.chunks, expectedChunks(FRAMES));
    expect(c.length).toBe(r1.end); // nothing after the answer
    await sleep(20);
    expect(c.ended).toBe(false);

    c.socket.write(GET('/two'));
    const r2 = await c.response(r1.end);
    expect(r2.headers.get('x-request-id')).toBe('/two');
    expectChunks(r2.chunks, expectedChunks(FRAMES));
    await sleep(20);
    expect(c.length).toBe(r2.end);
    expect(seen).toEqual([
      { path: '/one', direct: true, gone: false },
      { path: '/two', direct: true, gone: false },
    ]);
  });

  it('a stream of no frames: [DONE] alone', async () => {
    handler = (_req, res) => new ClientSink(res, true, {}, () => undefined, ERRORS).endStream();
    const c = client();
    c.socket.write(GET('/'));
    const r = await c.response();
    expectChunks(r.chunks, [SSE_DONE]);
  });

  it('two pipelined requests: the second answer waits whole behind the first, never interleaved', async () => {
    const slowFrames = ['data: {"slow":0}\n\n', Buffer.from('data: {"slow":1}\n\n'), sized(20_000, 's'), 'data: {"slow":"ü"}\n\n', 'data: {"slow":4}\n\n'];
    const fastFrames = FRAMES;
    let slowEnded = false;
    let slowDirect = false;
    const fast = { started: false, whileSlowStreaming: false, socketAtStart: true, direct: true };
    handler = (req, res) => {
      const sink = new ClientSink(res, true, {}, () => undefined, ERRORS);
      if (req.url === '/slow') {
        let k = 0;
        const next = () => {
          if (k < slowFrames.length) {
            sink.writeRaw(slowFrames[k++]!);
            setTimeout(next, 15);
          } else {
            slowEnded = true;
            sink.endStream();
          }
        };
        next();
        slowDirect = isDirect(sink);
        return;
      }
      fast.started = true;
      fast.whileSlowStreaming = !slowEnded;
      fast.socketAtStart = res.socket != null;
      for (const f of fastFrames) sink.writeRaw(f);
      fast.direct = isDirect(sink);
      sink.endStream();
    };
    const c = client();
    c.socket.write(GET('/slow') + GET('/fast'));
    const r1 = await c.response();
    expectChunks(r1.chunks, expectedChunks(slowFrames));
    const r2 = await c.response(r1.end);
    expectChunks(r2.chunks, expectedChunks(fastFrames));
    expect(r2.status).toBe(200);
    expect(slowDirect).toBe(true);
    expect(fast).toEqual({ started: true, whileSlowStreaming: true, socketAtStart: false, direct: false });
    await sleep(20);
    expect(c.length).toBe(r2.end);
  });

  it('an HTTP/1.0 request: no chunked coding, the body raw until the close', async () => {
    let direct = true;
    handler = (_req, res) => {
      const sink = new ClientSink(res, true, {}, () => undefined, ERRORS);
      sink.writeRaw(FRAMES[0]!);
      direct = isDirect(sink);
      void writeFrames(sink, FRAMES.slice(1));
    };
    const c = client();
    c.socket.write(GET('/', '1.0'));
    await waitUntil(() => c.ended, 5000, 'the server closing the connection');
    const buf = c.bytes;
    const headEnd = buf.indexOf('\r\n\r\n');
    expect(headEnd).toBeGreaterThan(0);
    const head = buf.toString('latin1', 0, headEnd).toLowerCase();
    expect(head.startsWith('http/1.1 200 ')).toBe(true);
    expect(head).not.toContain('transfer-encoding');
    expect(head).not.toContain('content-length');
    const body = buf.subarray(headEnd + 4);
    expect(body.equals(Buffer.concat([...FRAMES.map(bytesOf), SSE_DONE]))).toBe(true);
    expect(direct).toBe(false);
  });
});

describe('ClientSink: backpressure', () => {
  it('a client that stops reading: writeRaw returns false, onDrain fires after it reads again, every byte arrives in order', async () => {
    const TOTAL = 20 * 1024 * 1024;
    const frames: Buffer[] = [];
    const st = { written: 0, falses: 0, drains: 0, drainsAfterResume: 0, waiting: false, resumed: false, ended: false, direct: false, listenersDuring: -1, listenersBase: -1, listenersAfter: -1 };
    handler = (_req, res) => {
      const sock = res.socket!;
      st.listenersBase = sock.listenerCount('drain');
      const sink = new ClientSink(res, true, {}, () => undefined, ERRORS);
      res.on('close', () => (st.listenersAfter = sock.listenerCount('drain')));
      let i = 0;
      const pump = (): void => {
        st.waiting = false;
        while (st.written < TOTAL) {
          // Mostly small frames, every 7th over 16 KiB (the three-write path), some strings.
          const n = i % 7 === 0 ? 20_000 + (i % 13) * 100 : 200 + ((i * 37) % 1800);
          const text = `data: {"i":${i},"p":"${String.fromCharCode(97 + (i % 26)).repeat(n)}"}\n\n`;
          const f = Buffer.from(text);
          frames.push(f);
          st.written += f.length;
          const ok = sink.writeRaw(i % 3 === 0 ? text : f);
          if (i === 0) st.direct = isDirect(sink);
          i++;
          if (!ok) {
            st.falses++;
            st.waiting = true;
            sink.onDrain(() => {
              st.drains++;
              if (st.resumed) st.drainsAfterResume++;
              if (st.listenersDuring < 0) st.listenersDuring = sock.listenerCount('drain');
              pump();
            });
            return;
          }
        }
        st.ended = true;
        sink.endStream();
      };
      pump();
    };
    const c = client();
    c.socket.pause(); // reads nothing
    c.socket.write(GET('/big'));
    // Stuck: waiting for a drain, with nothing written for a while.
    let last = -1;
    let still = 0;
    await waitUntil(
      () => {
        if (st.waiting && st.written === last) still++;
        else still = 0;
        last = st.written;
        return still >= 20;
      },
      10_000,
      'the server blocked on a drain',
    );
    expect(st.ended).toBe(false);
    expect(st.written).toBeLessThan(TOTAL);
    expect(st.falses).toBeGreaterThan(0);
    st.resumed = true;
    c.socket.resume();
    const tail = Buffer.concat([Buffer.from(`${SSE_DONE.length.toString(16)}\r\n`), SSE_DONE, Buffer.from('\r\n0\r\n\r\n')]);
    await waitUntil(() => st.ended && c.length >= tail.length && c.bytes.subarray(c.length - tail.length).equals(tail), 15_000, 'the whole stream');
    const r = parseChunked(c.bytes)!;
    expect(r).not.toBeNull();
    expect(r.end).toBe(c.length);
    expectChunks(r.chunks, [...frames, SSE_DONE]);
    expect(st.direct).toBe(true);
    expect(st.drainsAfterResume).toBeGreaterThan(0);
    expect(st.drains).toBe(st.falses);
    // Direct writes listen to the socket's drain while streaming, and give it back at the end.
    expect(st.listenersDuring).toBe(st.listenersBase + 1);
    await waitUntil(() => st.listenersAfter >= 0, 2000, "the response's close");
    expect(st.listenersAfter).toBe(st.listenersBase);
  }, 30_000);
});

describe('ClientSink: the end of a stream', () => {
  it('endStreamWithError: the frames, the error frame, then [DONE]', async () => {
    handler = (_req, res) => {
      const sink = new ClientSink(res, true, {}, () => undefined, ERRORS);
      void writeFrames(sink, FRAMES, (s) => s.endStreamWithError({ error: { message: 'boom' } }));
    };
    const c = client();
    c.socket.write(GET('/'));
    const r = await c.response();
    expectChunks(r.chunks, expectedChunks(FRAMES, 'data: {"error":{"message":"boom"}}\n\n'));
  });

  it('fail() after the stream started: the format\'s in-band error frame, then [DONE]; nothing after', async () => {
    let after = true;
    handler = (_req, res) => {
      const sink = new ClientSink(res, true, {}, () => undefined, ERRORS);
      sink.writeRaw(FRAMES[0]!);
      sink.fail(502, 'worker lost', 'upstream_error');
      after = sink.writeRaw('data: {"late":1}\n\n');
      sink.endStream();
    };
    const c = client();
    c.socket.write(GET('/'));
    const r = await c.response();
    expectChunks(r.chunks, expectedChunks([FRAMES[0]!], 'data: {"error":{"message":"worker lost"}}\n\n'));
    expect(after).toBe(true);
    await sleep(20);
    expect(c.length).toBe(r.end);
  });

  it('fail() before any frame: a JSON error with its status and Content-Length', async () => {
    handler = (_req, res) => new ClientSink(res, true, {}, () => undefined, ERRORS).fail(503, 'no worker', 'unavailable');
    const c = client();
    c.socket.write(GET('/'));
    const body = JSON.stringify({ error: { message: 'no worker' } });
    await waitUntil(() => c.bytes.includes(body), 5000, 'the error body');
    const text = c.bytes.toString();
    expect(text.startsWith('HTTP/1.1 503 ')).toBe(true);
    expect(text.toLowerCase()).toContain(`content-length: ${Buffer.byteLength(body)}\r\n`);
    expect(text.endsWith(`\r\n\r\n${body}`)).toBe(true);
  });

  it('a client gone mid-stream: onGone once, later writes are no-ops', async () => {
    let gone = 0;
    let sink: ClientSink | null = null;
    handler = (_req, res) => {
      sink = new ClientSink(res, true, {}, () => gone++, ERRORS);
      sink.writeRaw(FRAMES[0]!);
    };
    const c = client();
    c.socket.write(GET('/'));
    await waitUntil(() => c.length > 0, 5000, 'the first bytes');
    c.socket.destroy();
    await waitUntil(() => gone > 0, 5000, 'onGone');
    expect(sink!.gone).toBe(true);
    expect(sink!.writeRaw(FRAMES[1]!)).toBe(true);
    sink!.endStream();
    await sleep(20);
    expect(gone).toBe(1);
  });
});
