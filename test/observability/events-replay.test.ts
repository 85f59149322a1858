// The /events envelope and replay: every message says which of the bus's sequence numbers it
// covers (contiguous within an epoch), and a consumer that reconnects with Last-Event-ID is sent
// exactly what it missed, or told in-band to start over when that has left the ring.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { EventBus } from '../../router/events/bus.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { parseEventId, serveEvents, type EventEnvelope } from '../../router/http/events-endpoint.ts';
import { until } from './harness.ts';

const ev = (i: number): BatonEvent => ({ type: 'worker_removed', t: i, worker_id: `w${i}` });

describe('EventBus replay ring', () => {
  it('since(seq) is exactly the events after seq while they are in the ring, else null', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 220 }), (cap, n, asked) => {
      const bus = new EventBus(cap, 7);
      for (let i = 1; i <= n; i++) bus.emit(ev(i));
      expect(bus.seq).toBe(n);
      const got = bus.since(asked);
      if (asked > n || n - asked > cap) expect(got).toBeNull();
      else expect(got!.map((e) => e.t)).toEqual(Array.from({ length: n - asked }, (_, k) => asked + 1 + k));
    }));
  });

  it('hands each listener the sequence number of the event', () => {
    const bus = new EventBus(4);
    const seen: number[] = [];
    bus.subscribe((_e, seq) => seen.push(seq));
    for (let i = 0; i < 6; i++) bus.emit(ev(i));
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('stays active for a while after its last consumer left (events for a reconnect), never before the first', () => {
    const bus = new EventBus(10, 1, 60_000);
    expect(bus.active).toBe(false);
    const off = bus.subscribe(() => undefined);
    expect(bus.active).toBe(true);
    off();
    expect(bus.consumers).toBe(0);
    expect(bus.active).toBe(true);
    const noRetain = new EventBus(10, 1, 0);
    noRetain.subscribe(() => undefined)();
    expect(noRetain.active).toBe(false);
  });

  it('reads Last-Event-ID as <epoch>:<seq> only', () => {
    expect(parseEventId('1700000000000:42')).toEqual({ epoch: 1700000000000, seq: 42 });
    for (const bad of ['', '42', 'a:1', '1:-1', '1:2:3']) expect(parseEventId(bad)).toBeNull();
  });
});

interface Stream {
  messages: { id: string | null; env: EventEnvelope }[];
  stop(): void;
}

function open(url: string, headers: Record<string, string> = {}): Stream {
  const ac = new AbortController();
  const messages: Stream['messages'] = [];
  void (async () => {
    try {
      const res = await fetch(url, { headers, signal: ac.signal });
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true });
        for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
          const lines = buf.slice(0, i).split('\n');
          buf = buf.slice(i + 2);
          const data = lines.find((l) => l.startsWith('data: '));
          if (data) messages.push({ id: lines.find((l) => l.startsWith('id: '))?.slice(4) ?? null, env: JSON.parse(data.slice(6)) as EventEnvelope });
        }
      }
    } catch {
      // aborted
    }
  })();
  return { messages, stop: () => ac.abort() };
}

const ids = (s: Stream) => s.messages.flatMap((m) => m.env.events as BatonEvent[]).map((e) => e.t);

describe('GET /events envelope and Last-Event-ID', () => {
  let server: Server | null = null;
  const streams: Stream[] = [];
  afterEach(async () => {
    for (const s of streams.splice(0)) s.stop();
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = null;
  });

  async function start(bus: EventBus): Promise<string> {
    server = createServer((req, res) => serveEvents(bus, req, res, { flushMs: 10, maxQueued: 10_000, router: 'r-1' }));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
  }

  it('envelopes are contiguous; a reconnect with Last-Event-ID gets exactly what it missed', async () => {
    const bus = new EventBus(1000, 1234);
    const url = await start(bus);
    const first = open(url);
    streams.push(first);
    await until(() => bus.consumers === 1, 5000, 'subscribed');
    for (let i = 1; i <= 30; i++) bus.emit(ev(i));
    await until(() => ids(first).length === 30, 5000, 'first 30');
    const envs = first.messages.map((m) => m.env);
    expect(envs.every((e) => e.router === 'r-1' && e.epoch === 1234)).toBe(true);
    for (let k = 1; k < envs.length; k++) expect(envs[k]!.from).toBe(envs[k - 1]!.seq + 1);
    expect(first.messages.at(-1)!.id).toBe('1234:30');
    first.stop();
    await until(() => bus.consumers === 0, 5000, 'unsubscribed');
    expect(bus.active, 'events are still built for a reconnect').toBe(true);

    for (let i = 31; i <= 50; i++) bus.emit(ev(i)); // while nobody listens
    const second = open(url, { 'last-event-id': '1234:30' });
    streams.push(second);
    await until(() => ids(second).length >= 20, 5000, 'the missed 20');
    bus.emit(ev(51));
    await until(() => ids(second).length === 21, 5000, 'then live');
    expect(ids(second)).toEqual(Array.from({ length: 21 }, (_, k) => 31 + k));
    expect(second.messages[0]!.env.from).toBe(31);
    expect(second.messages.some((m) => m.env.reset)).toBe(false);
  });

  it('says reset in-band when the id left the ring or names another epoch, then goes on live', async () => {
    const bus = new EventBus(10, 99);
    const url = await start(bus);
    for (let i = 1; i <= 40; i++) bus.emit(ev(i));
    for (const [id, why] of [['99:5', 'gap'], ['98:39', 'epoch']] as const) {
      const s = open(url, { 'last-event-id': id });
      streams.push(s);
      await until(() => s.messages.length >= 1, 5000, 'the reset');
      expect(s.messages[0]!.env).toMatchObject({ reset: why, events: [], seq: 40 });
      expect(s.messages[0]!.id).toBe('99:40');
    }
    bus.emit(ev(41));
    await until(() => streams.every((s) => ids(s).includes(41)), 5000, 'live after the reset');
    for (const s of streams) expect(s.messages[1]!.env.from).toBe(41);
  });

  it('refuses a malformed Last-Event-ID with 400 and a message', async () => {
    const url = await start(new EventBus());
    const res = await fetch(url, { headers: { 'last-event-id': 'yesterday' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/<epoch>:<seq>/);
  });
});
