// GET /events: the event stream as server-sent events for browser mode. Each SSE message is a
// JSON array of events, flushed every `flushMs`. A slow consumer never slows the router: the
// listener only appends to this consumer's queue; while the socket is full, progress events
// are coalesced per request (latest wins) and start/end events wait in a bounded queue; a
// consumer that falls further behind than the cap is disconnected (it can reconnect and
// re-read /api/snapshot), so memory per consumer is bounded.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BatonEvent } from '../events/types.ts';
import type { EventBus } from '../events/bus.ts';

export interface EventsEndpointOptions {
  flushMs: number;
  /** Most non-progress events held for one consumer before it is dropped. */
  maxQueued: number;
}

export function serveEvents(bus: EventBus, req: IncomingMessage, res: ServerResponse, opts: EventsEndpointOptions): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.write(': baton events\n\n');
  let queue: BatonEvent[] = [];
  let progress = new Map<string, BatonEvent>();
  let blocked = false;
  let closed = false;

  const unsubscribe = bus.subscribe((e) => {
    if (e.type === 'progress') progress.set(e.request_id, e);
    else {
      queue.push(e);
      if (queue.length > opts.maxQueued) close();
    }
  });

  const flush = () => {
    if (closed || blocked || (queue.length === 0 && progress.size === 0)) return;
    const batch = progress.size > 0 ? queue.concat([...progress.values()]) : queue;
    queue = [];
    progress = new Map();
    const ok = res.write(`data: ${JSON.stringify(batch)}\n\n`);
    if (!ok) {
      blocked = true;
      res.once('drain', () => {
        blocked = false;
      });
    }
  };
  const timer = setInterval(flush, opts.flushMs);
  timer.unref();

  function close(): void {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    unsubscribe();
    queue = [];
    progress.clear();
    res.destroy();
  }
  req.on('close', close);
  res.on('close', close);
}
