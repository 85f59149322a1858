// GET /events: the event stream as server-sent events for browser mode. Each SSE message is a
// JSON array of events, flushed every `flushMs`. A slow consumer never slows the router: the
// bus listener only appends to this consumer's queue (O(1), no I/O); a flush writes at most one
// batch and, while the socket is full, writes nothing. Meanwhile progress events are coalesced
// per request (latest wins) and every other event waits in a bounded queue; a consumer that
// falls further behind than the cap is disconnected rather than grown without bound (the
// dashboard reconnects and re-reads its snapshot), so it never silently misses a start or end.
//
// Each message is an envelope, `id: <epoch>:<seq>` and `data: {"router","epoch","from","seq",
// "events"}`: the bus's sequence numbers `from`..`seq` are all in it (progress coalesced inside
// the range), so consecutive messages of one epoch have `from` = the previous `seq` + 1 and a
// consumer can count what it lost. A reconnect with `Last-Event-ID` (or `?last_event_id=`) is
// first sent the events it missed from the bus's replay ring; when they have left the ring, or
// the epoch is another (the router restarted), the first message says `"reset"` with the reason
// and carries no events: the consumer re-reads its snapshot.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BatonEvent } from '../events/types.ts';
import type { EventBus } from '../events/bus.ts';

export interface EventsEndpointOptions {
  flushMs: number;
  /** Most non-progress events held for one consumer before it is dropped. */
  maxQueued: number;
  /** A comment line this often keeps proxies from timing the stream out and finds dead peers. */
  heartbeatMs?: number;
  /** The router's identity (RouterStats.instance), carried in every envelope. */
  router?: string;
}

/** A parsed `Last-Event-ID`: `<epoch>:<seq>`. */
export function parseEventId(text: string): { epoch: number; seq: number } | null {
  const m = /^(\d{1,16}):(\d{1,16})$/.exec(text.trim());
  return m ? { epoch: Number(m[1]), seq: Number(m[2]) } : null;
}

/** What an SSE message of GET /events carries. */
export interface EventEnvelope {
  router: string;
  epoch: number;
  /** The first sequence number this message covers (the previous message's `seq` + 1). */
  from: number;
  /** The last sequence number it covers; its SSE id is `<epoch>:<seq>`. */
  seq: number;
  events: unknown[];
  /** Present when the consumer must start over from a snapshot: why (`gap`, `epoch`). */
  reset?: string;
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

/** The open streams of each bus: what `endEventStreams` ends when the router closes. */
const open = new WeakMap<EventBus, Set<() => Promise<void>>>();

/**
 * Ends every open event stream of `bus` as the router closes: each sends what it still queues and
 * ends its response, so that a dashboard hub following the router gets every event of its last
 * moments (the rows of the requests a draining router finished) before the connections are
 * closed. Waits at most `ms` for the sockets to take the last batches.
 */
export async function endEventStreams(bus: EventBus, ms: number): Promise<void> {
  const enders = [...(open.get(bus) ?? [])];
  if (enders.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(enders.map((end) => end())), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

export function serveEvents(bus: EventBus, req: IncomingMessage, res: ServerResponse, opts: EventsEndpointOptions): void {
  const query = new URL(req.url ?? '/', 'http://x').searchParams;
  const lastIdText = (req.headers['last-event-id'] as string | undefined) ?? query.get('last_event_id');
  const lastId = lastIdText === null || lastIdText === undefined || lastIdText === '' ? null : parseEventId(lastIdText);
  if (lastIdText && !lastId) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'error', message: `Last-Event-ID must be <epoch>:<seq> as this stream sends it, got '${lastIdText.slice(0, 80)}'`, type: 'BadRequestError', param: null, code: 400 }));
    return;
  }
  const heartbeatQuery = query.get('heartbeat_ms');
  const heartbeatMs = heartbeatQuery !== null && /^\d+$/.test(heartbeatQuery) ? Math.max(100, Number(heartbeatQuery)) : (opts.heartbeatMs ?? 15_000);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write(': baton events\n\n');
  const pending = new EventQueue(opts.maxQueued);
  const head = `{"router":${JSON.stringify(opts.router ?? '')},"epoch":${bus.epoch},"from":`;
  let blocked = false;
  let closed = false;
  let lastWrite = Date.now();
  // `sent`: the last sequence number written; `queued`: the last one in `pending`.
  let sent = bus.seq;
  let queued = bus.seq;
  let reset: string | null = null;
  if (lastId) {
    const missed = lastId.epoch === bus.epoch ? bus.since(lastId.seq) : null;
    if (missed === null) reset = lastId.epoch === bus.epoch ? 'gap' : 'epoch';
    else {
      sent = queued = lastId.seq;
      for (const e of missed) {
        queued++;
        if (!pending.push(e)) {
          // More missed than one consumer may hold: start over instead.
          pending.take();
          sent = queued = bus.seq;
          reset = 'gap';
          break;
        }
      }
    }
  }

  const unsubscribe = bus.subscribe((e, seq) => {
    queued = seq;
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
  if (reset !== null) write(`id: ${bus.epoch}:${sent}\ndata: ${head}${sent + 1},"seq":${sent},"events":[],"reset":"${reset}"}\n\n`);
  const flush = () => {
    if (closed || blocked) return;
    if (pending.size > 0) {
      write(`id: ${bus.epoch}:${queued}\ndata: ${head}${sent + 1},"seq":${queued},"events":${batchJson(pending.take())}}\n\n`);
      sent = queued;
    } else if (Date.now() - lastWrite >= heartbeatMs) write(': keep-alive\n\n');
  };
  const timer = setInterval(flush, Math.min(opts.flushMs, heartbeatMs));
  timer.unref();
  let streams = open.get(bus);
  if (!streams) open.set(bus, (streams = new Set()));
  const end = (): Promise<void> => {
    if (closed) return Promise.resolve();
    clearInterval(timer);
    unsubscribe();
    if (pending.size > 0) {
      // Past backpressure too: the socket buffers it, and the end waits for it to be written.
      res.write(`id: ${bus.epoch}:${queued}\ndata: ${head}${sent + 1},"seq":${queued},"events":${batchJson(pending.take())}}\n\n`);
      sent = queued;
    }
    closed = true;
    streams!.delete(end);
    return new Promise<void>((resolve) => {
      res.once('close', resolve);
      res.end(resolve);
    });
  };
  streams.add(end);

  function close(): void {
    if (closed) return;
    closed = true;
    streams!.delete(end);
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
