// The /events stream's laws: a consumer gets every event but progress, in order; progress is
// coalesced (latest per request) and never arrives after an event of its request that
// supersedes it; a consumer that stops reading is dropped at the cap instead of growing, while
// the others still get everything.
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { EventBus } from '../../router/events/bus.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';
import { EventQueue, batchJson, serveEvents } from '../../router/http/events-endpoint.ts';
import { until } from './harness.ts';

const requestIdOf = (e: BatonEvent): string => ('request_id' in e ? e.request_id : 'row' in e ? e.row.request_id : '');

function attemptRow(id: string, error: string): AttemptRow {
  return {
    kind: 'attempt', format: 'sglang', request_id: id, attempt: 0, rid: id, worker: 'http://w:1', started_at: 1, ended_at: 2, ttft_ms: 1, prompt_tokens_sent: 4,
    replayed_tokens: 0, tokens: 3, budget_before: 3, budget_after: 0, cached_tokens: 0, outcome: 'finished', error_kind: null, error, error_evidence: null, finish_reason: 'length', trace_id: null,
  };
}
function requestRow(id: string): RequestRow {
  return {
    kind: 'request', format: 'sglang', request_id: id, attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 4, completion_tokens: 3,
    cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: 1, ended_at: 2, stream: true, max_new_tokens: 3, error: null, trace_id: null,
  };
}

/** The events of one request's life, with `progress` progress events between first token and end. */
function lifeOf(id: string, progress: number, error = ''): BatonEvent[] {
  const t = 0;
  return [
    { type: 'request_admitted', t, request_id: id, admitted: true, reason: null, stream: true, prompt_tokens: 4, max_new_tokens: 3, trace_id: null },
    { type: 'attempt_started', t, request_id: id, attempt: 0, rid: id, worker: 'http://w:1', replayed_tokens: 0, budget_before: 3 },
    { type: 'first_token', t, request_id: id, attempt: 0, ttft_ms: 1 },
    ...Array.from({ length: progress }, (_, k): BatonEvent => ({ type: 'progress', t, request_id: id, attempt: 0, tokens: k + 1, completion_tokens: k + 1 })),
    { type: 'attempt_ended', t, row: attemptRow(id, error) },
    { type: 'request_finished', t, row: requestRow(id) },
  ];
}

/** Law-check a consumer's received batches against what was emitted. */
function checkDelivery(emitted: BatonEvent[], batches: BatonEvent[][]): void {
  const received = batches.flat();
  // Every event but progress, exactly once, in emission order.
  const key = (e: BatonEvent) => `${e.type}:${requestIdOf(e)}`;
  expect(received.filter((e) => e.type !== 'progress').map(key)).toEqual(emitted.filter((e) => e.type !== 'progress').map(key));
  // Per request, what arrives is in emission order: no progress after its superseding events.
  // (Events are told apart by content: over a socket they arrive as copies.)
  const index = new Map(emitted.map((e, i) => [JSON.stringify(e), i]));
  const last = new Map<string, number>();
  for (const e of received) {
    const i = index.get(JSON.stringify(e));
    expect(i, 'an event that was never emitted').toBeDefined();
    const id = requestIdOf(e);
    expect(i!, `${key(e)} out of order`).toBeGreaterThan(last.get(id) ?? -1);
    last.set(id, i!);
  }
  for (const batch of batches) {
    const ids = batch.filter((e) => e.type === 'progress').map(requestIdOf);
    expect(new Set(ids).size, 'two progress events of one request in a batch').toBe(ids.length);
  }
}

describe('EventQueue', () => {
  it('delivers every non-progress event in order, progress coalesced and never stale', () => {
    fc.assert(
      fc.property(
        // Interleaved lives of up to 5 requests, and where the consumer takes a batch.
        fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.nat(), { maxLength: 400 }),
        fc.array(fc.boolean(), { maxLength: 400 }),
        (progressCounts, picks, takes) => {
          const lives = progressCounts.map((p, r) => lifeOf(`r${r}`, p));
          const emitted: BatonEvent[] = [];
          const q = new EventQueue(10_000);
          const batches: BatonEvent[][] = [];
          let k = 0;
          while (lives.some((l) => l.length > 0)) {
            const open = lives.filter((l) => l.length > 0);
            const e = open[(picks[k] ?? 0) % open.length]!.shift()!;
            emitted.push(e);
            expect(q.push(e)).toBe(true);
            if (takes[k++]) batches.push(q.take());
          }
          batches.push(q.take());
          checkDelivery(emitted, batches);
          // The latest progress of a request that is still running when a batch is taken is in it.
          expect(q.size).toBe(0);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('reports overflow past the cap of queued events; progress does not count', () => {
    const q = new EventQueue(3);
    for (const e of lifeOf('a', 50).slice(0, 3 + 50)) expect(q.push(e)).toBe(true);
    expect(q.push(lifeOf('b', 0)[0]!)).toBe(false);
  });

  it('serialises a batch as a JSON array of the events', () => {
    const events = lifeOf('x', 2);
    expect(JSON.parse(batchJson(events))).toEqual(JSON.parse(JSON.stringify(events)));
    expect(batchJson([])).toBe('[]');
  });
});

describe('GET /events over a real socket', () => {
  let server: Server | null = null;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = null;
  });

  /** A consumer reading the stream as fast as it comes; returns its batches so far. */
  function reader(port: number): { batches: BatonEvent[][]; closed: () => boolean } {
    const batches: BatonEvent[][] = [];
    let buf = '';
    let closed = false;
    const s = connect(port, '127.0.0.1', () => s.write('GET /events HTTP/1.1\r\nHost: x\r\n\r\n'));
    sockets.push(s);
    s.setEncoding('utf8');
    let headerDone = false;
    let chunked = '';
    s.on('data', (d: string) => {
      chunked += d;
      if (!headerDone) {
        const i = chunked.indexOf('\r\n\r\n');
        if (i < 0) return;
        headerDone = true;
        chunked = chunked.slice(i + 4);
      }
      // Undo chunked transfer encoding.
      for (;;) {
        const nl = chunked.indexOf('\r\n');
        if (nl < 0) break;
        const size = parseInt(chunked.slice(0, nl), 16);
        if (chunked.length < nl + 2 + size + 2) break;
        buf += chunked.slice(nl + 2, nl + 2 + size);
        chunked = chunked.slice(nl + 2 + size + 2);
      }
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame.split('\n').find((l) => l.startsWith('data: '));
        if (data) batches.push((JSON.parse(data.slice(6)) as { events: BatonEvent[] }).events);
      }
    });
    s.on('close', () => (closed = true));
    return { batches, closed: () => closed };
  }

  it('a reader that keeps up gets everything; one that stops reading is dropped at the cap', async () => {
    const bus = new EventBus();
    let subscribers = 0;
    const subscribe = bus.subscribe.bind(bus);
    bus.subscribe = (l) => {
      subscribers++;
      const off = subscribe(l);
      return () => {
        subscribers--;
        return off();
      };
    };
    const maxQueued = 2000;
    server = createServer((req, res) => serveEvents(bus, req, res, { flushMs: 10, maxQueued }));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;

    const fast = reader(port);
    // The slow consumer: sends its request, then never reads a byte.
    const slow = connect(port, '127.0.0.1', () => slow.write('GET /events HTTP/1.1\r\nHost: x\r\n\r\n'));
    sockets.push(slow);
    slow.pause();
    await until(() => subscribers === 2, 5000, 'both consumers subscribed');

    // 2500 request lives with 2 KB error texts in their rows: about 12 MB of events, far more
    // than the slow consumer's socket buffers (a few MB while it does not read) and cap can hold.
    const emitted: BatonEvent[] = [];
    const bigError = 'x'.repeat(2048);
    for (let r = 0; r < 2500; r++) {
      for (const e of lifeOf(`q${r}`, 3, bigError)) {
        emitted.push(e);
        bus.emit(e);
      }
      if (r % 50 === 0) await new Promise((res) => setTimeout(res, 1)); // let flushes run
    }
    await until(() => fast.batches.flat().filter((e) => e.type === 'request_finished').length === 2500, 30_000, 'the fast reader to get every end');
    // The slow consumer was dropped (its subscription is gone), the fast one is still there.
    expect(subscribers).toBe(1);
    expect(fast.closed()).toBe(false);
    checkDelivery(emitted, fast.batches);
    expect(fast.batches.flat().filter((e) => e.type === 'progress').length).toBeLessThan(emitted.filter((e) => e.type === 'progress').length);
  });
});
