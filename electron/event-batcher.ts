// Router events → renderer, a few IPC messages per second rather than one per token. The
// router's listener only appends (it runs on the token path); a timer flushes. Progress events
// are coalesced to the latest per request, and any other event of a request drops its waiting
// progress, so a batch never carries a request's progress after its end. A batch is capped;
// past a hard limit the batcher gives up on the backlog and asks the renderer to re-read the
// snapshot instead of growing without bound.
import type { BatonEvent } from '../router/events/types.ts';

type ProgressEvent = Extract<BatonEvent, { type: 'progress' }>;

export interface BatcherOptions {
  flushMs: number;
  maxBatch: number;
  maxPending: number;
}

export const DEFAULT_BATCHING: BatcherOptions = { flushMs: 250, maxBatch: 5000, maxPending: 50_000 };

function requestIdOf(e: BatonEvent): string | null {
  if ('request_id' in e) return e.request_id;
  if (e.type === 'attempt_ended' || e.type === 'request_finished') return e.row.request_id;
  return null;
}

export class EventBatcher {
  private queue: BatonEvent[] = [];
  private progress = new Map<string, ProgressEvent>();
  private timer: ReturnType<typeof setInterval> | null = null;
  private overflowed = false;

  constructor(
    private readonly send: (events: BatonEvent[]) => void,
    private readonly resync: () => void,
    private readonly opts: BatcherOptions = DEFAULT_BATCHING,
  ) {}

  get pending(): number {
    return this.queue.length + this.progress.size;
  }

  /** Called by the router's listener for each event: O(1), no I/O. */
  push(e: BatonEvent): void {
    if (this.overflowed) return;
    if (e.type === 'progress') {
      this.progress.set(e.request_id, e);
      return;
    }
    const id = requestIdOf(e);
    if (id !== null) this.progress.delete(id);
    this.queue.push(e);
    if (this.queue.length > this.opts.maxPending) {
      this.queue = [];
      this.progress.clear();
      this.overflowed = true;
    }
  }

  /** Sends at most one batch. Progress goes out only once the queue ahead of it has drained. */
  flush(): void {
    if (this.overflowed) {
      this.overflowed = false;
      this.resync();
      return;
    }
    if (this.pending === 0) return;
    const batch = this.queue.length > this.opts.maxBatch ? this.queue.splice(0, this.opts.maxBatch) : this.queue.splice(0);
    if (this.queue.length === 0 && this.progress.size > 0 && batch.length + this.progress.size <= this.opts.maxBatch * 2) {
      for (const p of this.progress.values()) batch.push(p);
      this.progress.clear();
    }
    this.send(batch);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.flush(), this.opts.flushMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.queue = [];
    this.progress.clear();
  }
}
