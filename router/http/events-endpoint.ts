// GET /events: the event stream as server-sent events for browser mode. Each SSE message is a
// JSON array of events, flushed every `flushMs`. A slow consumer never slows the router: the
// bus listener only appends to this consumer's queue (O(1), no I/O); a flush writes at most one
// batch and, while the socket is full, writes nothing. Meanwhile progress events are coalesced
// per request (latest wins) and every other event waits in a bounded queue; a consumer that
// falls further behind than the cap is disconnected rather than grown without bound (the
// dashboard reconnects and re-reads its snapshot), so it never silently misses a start or end.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BatonEvent } from '../events/types.ts';
import type { EventBus } from '../events/bus.ts';

export interface EventsEndpointOptions {
  flushMs: number;
  /** Most non-progress events held for one consumer before it is dropped. */
  maxQueued: number;
  /** A comment line this often keeps proxies from timing the stream out and finds dead peers. */
  heartbeatMs?: number;
}

type ProgressEvent = Extract<BatonEvent, { type: 'progress' }>;

function requestIdOf(e: BatonEvent): string | null {
  if ('request_id' in e) return e.request_id;
  if (e.type === 'attempt_ended' || e.type === 'request_finished') return e.row.request_id;
  return null;
}

/**
 * One consumer's pending events. Order is kept per request: a progress event waiting here is
 * always newer than the queued events of its request, because queuing any other event of that
 * request drops its waiting progress (the end or start event supersedes it). Without that, a
 * batch could carry a request's progress after its request_finished, and the dashboard would
 * show a finished request as running again.
 */
export class EventQueue {
  private queue: BatonEvent[] = [];
  private progress = new Map<string, ProgressEvent>();

  constructor(private readonly maxQueued: number) {}

  /** Returns false when the consumer is too far behind and must be dropped. */
  push(e: BatonEvent): boolean {
    if (e.type === 'progress') {
      this.progress.set(e.request_id, e);
      return true;
    }
    const id = requestIdOf(e);
    if (id !== null) this.progress.delete(id);
    this.queue.push(e);
    return this.queue.length <= this.maxQueued;
  }

  get size(): number {
    return this.queue.length + this.progress.size;
  }

  /** Everything pending, oldest first per request, and empty afterwards. */
  take(): BatonEvent[] {
    const batch = this.progress.size > 0 ? this.queue.concat([...this.progress.values()]) : this.queue;
    this.queue = [];
    this.progress = new Map();
    return batch;
  }
}

/**
 * Every consumer is sent the same event objects, so each is serialised once however many
 * dashboards are open; the cache forgets an event when the last queue lets go of it.
 */
const serialized = new WeakMap<BatonEvent, string>();

export function batchJson(events: BatonEvent[]): string {
  let out = '[';
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    let text = serialized.get(e);
    if (text === undefined) serialized.set(e, (text = JSON.stringify(e)));
    out += i === 0 ? text : ',' + text;
  }
  return out + ']';
}

export function serveEvents(bus: EventBus, _req: IncomingMessage, res: ServerResponse, opts: EventsEndpointOptions): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write(': baton events\n\n');
  const pending = new EventQueue(opts.maxQueued);
  let blocked = false;
  let closed = false;
  let lastWrite = Date.now();

  const unsubscribe = bus.subscribe((e) => {
    if (!pending.push(e)) close();
  });

  const write = (text: string) => {
    lastWrite = Date.now();
    if (!res.write(text)) {
      // The socket holds this batch; write nothing more until it has taken it.
      blocked = true;
      res.once('drain', () => (blocked = false));
    }
  };
  const flush = () => {
    if (closed || blocked) return;
    if (pending.size > 0) write(`data: ${batchJson(pending.take())}\n\n`);
    else if (Date.now() - lastWrite >= (opts.heartbeatMs ?? 15_000)) write(': keep-alive\n\n');
  };
  const timer = setInterval(flush, opts.flushMs);
  timer.unref();

  function close(): void {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    unsubscribe();
    pending.take();
    res.destroy();
  }
  // The response's close, not the request's: a request's 'close' may come as soon as its (empty)
  // body has been read, while the response is still streaming.
  res.on('close', close);
  res.on('error', close);
}
