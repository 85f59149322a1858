// Collects items (events) as they arrive and hands them over in one batch per animation frame,
// so the store updates and React renders a few times a second however fast events come.
// A fallback timer flushes when frames do not run (a hidden tab), keeping memory bounded.

export interface Scheduler {
  frame(cb: () => void): () => void;
  timer(cb: () => void, ms: number): () => void;
}

export const browserScheduler: Scheduler = {
  frame(cb) {
    const id = requestAnimationFrame(cb);
    return () => cancelAnimationFrame(id);
  },
  timer(cb, ms) {
    const id = setTimeout(cb, ms);
    return () => clearTimeout(id);
  },
};

export class FrameBatcher<T> {
  private queue: T[] = [];
  private cancel: (() => void)[] = [];

  constructor(
    private readonly flush: (items: T[]) => void,
    private readonly scheduler: Scheduler = browserScheduler,
    private readonly fallbackMs = 250,
    /** Above this many queued items, flush at once rather than wait for the frame. */
    private readonly maxQueue = 20_000,
  ) {}

  get pending(): number {
    return this.queue.length;
  }

  push(items: readonly T[]): void {
    if (items.length === 0) return;
    for (const item of items) this.queue.push(item);
    if (this.queue.length >= this.maxQueue) return this.run();
    if (this.cancel.length > 0) return;
    this.cancel = [this.scheduler.frame(() => this.run()), this.scheduler.timer(() => this.run(), this.fallbackMs)];
  }

  /** Flushes now (also used on teardown). */
  run(): void {
    for (const c of this.cancel) c();
    this.cancel = [];
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.flush(batch);
  }

  dispose(): void {
    for (const c of this.cancel) c();
    this.cancel = [];
    this.queue = [];
  }
}
