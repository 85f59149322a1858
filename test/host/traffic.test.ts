import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TrafficGenerator } from '../../host/traffic.ts';

interface Tiny {
  url: string;
  bodies: Record<string, unknown>[];
  open: number;
  maxOpen: number;
  close(): Promise<void>;
}

/** A tiny /generate server: answers after `holdMs`, or never when holdMs is Infinity. */
async function tinyServer(holdMs: number, status = 200): Promise<Tiny> {
  const state = { bodies: [] as Record<string, unknown>[], open: 0, maxOpen: 0 };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      state.bodies.push(body);
      state.open++;
      state.maxOpen = Math.max(state.maxOpen, state.open);
      res.on('close', () => state.open--);
      if (!Number.isFinite(holdMs)) return;
      setTimeout(() => {
        if (body.stream) {
          res.writeHead(status, { 'content-type': 'text/event-stream' });
          res.end('data: {"output_ids":[1],"meta_info":{}}\n\ndata: [DONE]\n\n');
        } else {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end('{"output_ids":[1],"meta_info":{}}');
        }
      }, holdMs);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((ok) => { server.closeAllConnections(); server.close(() => ok()); }),
  }) as Tiny;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

describe('TrafficGenerator', () => {
  it('sends token-id /generate requests at roughly the configured rate', async () => {
    const server = await tinyServer(5);
    const gen = new TrafficGenerator({ url: server.url, settings: { rate: 40, concurrency: 100, promptMin: 2, promptMax: 4 }, tickMs: 10 });
    cleanup.push(() => gen.stop(), () => server.close());
    await sleep(1000);
    const { sent, ok, failed } = gen.status();
    // Open loop at 40/s for a second; bounds leave room for a busy machine's timers.
    expect(sent).toBeGreaterThan(15);
    expect(sent).toBeLessThan(60);
    expect(failed).toBe(0);
    expect(ok).toBeGreaterThan(5);
    for (const body of server.bodies) {
      expect(Array.isArray(body.input_ids)).toBe(true);
      expect((body.input_ids as number[]).every(Number.isInteger)).toBe(true);
      expect(typeof body.stream).toBe('boolean');
    }
  });

  it('never has more than `concurrency` requests in flight', async () => {
    const server = await tinyServer(Infinity);
    const gen = new TrafficGenerator({ url: server.url, settings: { rate: 200, concurrency: 4 }, tickMs: 10 });
    cleanup.push(() => gen.stop(), () => server.close());
    await expect.poll(() => server.open, { timeout: 10_000 }).toBe(4);
    await sleep(300);
    expect(gen.status().inFlight).toBe(4);
    expect(server.maxOpen).toBe(4);
  });

  it('obeys live updates: pause stops new requests', async () => {
    const server = await tinyServer(1);
    const gen = new TrafficGenerator({ url: server.url, settings: { rate: 50 }, tickMs: 10 });
    cleanup.push(() => gen.stop(), () => server.close());
    await sleep(300);
    expect(gen.update({ running: false }).settings.running).toBe(false);
    await sleep(50);
    const sent = gen.status().sent;
    await sleep(300);
    expect(gen.status().sent).toBe(sent);
    gen.update({ running: true, rate: 100 });
    await expect.poll(() => gen.status().sent, { timeout: 10_000 }).toBeGreaterThan(sent + 10);
  });

  it('counts non-200 answers as failures', async () => {
    const server = await tinyServer(1, 503);
    const gen = new TrafficGenerator({ url: server.url, settings: { rate: 50 }, tickMs: 10 });
    cleanup.push(() => gen.stop(), () => server.close());
    await expect.poll(() => gen.status().failed, { timeout: 10_000 }).toBeGreaterThan(3);
    expect(gen.status().ok).toBe(0);
  });

  it('stops cleanly: aborts what is in flight and sends nothing more', async () => {
    const server = await tinyServer(Infinity);
    const gen = new TrafficGenerator({ url: server.url, settings: { rate: 100, concurrency: 8 }, tickMs: 10 });
    cleanup.push(() => server.close());
    await expect.poll(() => server.open, { timeout: 10_000 }).toBe(8);
    await gen.stop();
    expect(gen.status().inFlight).toBe(0);
    const seen = server.bodies.length;
    await sleep(200);
    expect(server.bodies.length).toBe(seen);
    await expect.poll(() => server.open, { timeout: 5_000 }).toBe(0);
    await gen.stop(); // idempotent
  });
});
