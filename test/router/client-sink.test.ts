// ClientSink holds the frames one turn brings and writes them as one chunk when the turn's
// microtasks run: the client must see the same bytes in the same order, and an end or an error
// frame after them, whatever mix of buffers and strings was written.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ClientSink } from '../../router/format/client-sink.ts';
import { SGLANG } from '../../router/format/sglang/index.ts';

const SGLANG_ERRORS = SGLANG.errors;

let server: Server | null = null;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

/** Serve one request with `act(sink)`; return the raw HTTP response's chunks, dechunked, in order. */
async function exchange(act: (sink: ClientSink, res: ServerResponse) => Promise<void>): Promise<string[]> {
  server = createServer((_req, res) => {
    const sink = new ClientSink(res, true, {}, () => {}, SGLANG_ERRORS);
    void act(sink, res);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const raw = await new Promise<string>((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (text.endsWith('\r\n0\r\n\r\n')) s.end();
    });
    s.on('close', () => resolve(text));
    s.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
  });
  let rest = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  const chunks: string[] = [];
  for (;;) {
    const nl = rest.indexOf('\r\n');
    const n = parseInt(rest.slice(0, nl), 16);
    if (!(n > 0)) break;
    chunks.push(rest.slice(nl + 2, nl + 2 + n));
    rest = rest.slice(nl + 2 + n + 2);
  }
  return chunks;
}

const tick = () => new Promise((r) => setImmediate(r));

describe('ClientSink', () => {
  it("writes one turn's frames as one chunk, in order, buffers and strings alike", async () => {
    const chunks = await exchange(async (sink) => {
      sink.writeRaw(Buffer.from('data: 1\n\n'));
      sink.writeRaw('data: 2\n\n');
      sink.writeRaw(Buffer.from('data: 3\n\n').subarray(0));
      await tick();
      sink.writeRaw('data: 4\n\n');
      sink.writeJson('5');
      await tick();
      sink.writeRaw(Buffer.from('data: 6\n\n'));
      await tick();
      sink.writeRaw(Buffer.from('data: 7\n\n'));
      sink.endStream();
    });
    expect(chunks.join('')).toBe('data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: 5\n\ndata: 6\n\ndata: 7\n\ndata: [DONE]\n\n');
    expect(chunks.slice(0, 3)).toEqual(['data: 1\n\ndata: 2\n\ndata: 3\n\n', 'data: 4\n\ndata: 5\n\n', 'data: 6\n\n']);
  });

  it('writes large frames one by one, in order', async () => {
    const big = (c: string) => `data: ${c.repeat(20_000)}\n\n`;
    const chunks = await exchange(async (sink) => {
      sink.writeRaw(Buffer.from(big('a')));
      sink.writeRaw(big('b'));
      sink.writeRaw(Buffer.from('data: c\n\n'));
      sink.endStream();
    });
    expect(chunks).toEqual([big('a'), big('b'), 'data: c\n\n', 'data: [DONE]\n\n']);
  });

  it('writes what a turn held before an error frame', async () => {
    const chunks = await exchange(async (sink) => {
      sink.writeRaw(Buffer.from('data: 1\n\n'));
      sink.writeRaw(Buffer.from('data: 2\n\n'));
      sink.fail(502, 'worker gone', 'bad_gateway');
    });
    const text = chunks.join('');
    expect(text.startsWith('data: 1\n\ndata: 2\n\ndata: {')).toBe(true);
    expect(text).toContain('worker gone');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('breaks off a response whose write throws, and still writes the others', async () => {
    const fake = (throws: boolean) => {
      const r = { written: [] as string[], destroyed: null as Error | null, writableNeedDrain: false };
      const res = {
        on: () => res,
        writeHead: () => res,
        write: (d: Buffer | string) => {
          if (throws) throw new Error('boom');
          r.written.push(String(d));
          return true;
        },
        destroy: (e: Error) => void (r.destroyed = e),
      };
      return { r, sink: new ClientSink(res as unknown as ServerResponse, true, {}, () => {}, SGLANG_ERRORS) };
    };
    const a = fake(true);
    const b = fake(false);
    a.sink.writeRaw('data: a\n\n');
    b.sink.writeRaw('data: b\n\n');
    await tick();
    expect(a.r.destroyed?.message).toBe('boom');
    expect(b.r.written).toEqual(['data: b\n\n']);
  });
});
