// Stall detection for every attempt in flight, by one coarse sweeper instead of a timer reset
// per token: an attempt records that data arrived by bumping a counter (the only per-chunk cost);
// the sweeper notices counters that stopped moving. Paused attempts (a slow client) are not
// stalls: the worker is waiting for us, not we for it.
export interface Watched {
  /** Bumped on every upstream data event. */
  chunks: number;
  paused: boolean;
  /** Internal to the sweeper. */
  seenChunks: number;
  lastMovedAt: number;
  onStall(idleMs: number): void;
}

export class StallWatch {
  private readonly active = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;
  private readonly tickMs: number;
  private lastSweepAt = 0;

  constructor(private readonly timeoutMs: number) {
    this.tickMs = Math.max(10, Math.min(1000, Math.floor(timeoutMs / 4)));
  }

  add(w: Watched): void {
    if (this.timeoutMs <= 0) return;
    w.seenChunks = w.chunks;
    w.lastMovedAt = Date.now();
    this.active.add(w);
    if (!this.timer) {
      this.timer = setInterval(() => this.sweep(), this.tickMs);
      this.timer.unref();
    }
  }

  delete(w: Watched): void {
    this.active.delete(w);
    if (this.active.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      this.lastSweepAt = 0;
    }
  }

  private sweep(): void {
    const now = Date.now();
    // When the sweep itself runs late, the router's own event loop was blocked (GC, a CPU-starved
    // host): data may be waiting unread in the socket, and the silence is ours, not the worker's.
    // Give every attempt the lost time back instead of declaring stalls the router caused.
    const lag = this.lastSweepAt === 0 ? 0 : now - this.lastSweepAt - this.tickMs;
    this.lastSweepAt = now;
    if (lag > this.tickMs) for (const w of this.active) w.lastMovedAt += lag;
    for (const w of this.active) {
      if (w.chunks !== w.seenChunks || w.paused) {
        w.seenChunks = w.chunks;
        w.lastMovedAt = now;
      } else if (now - w.lastMovedAt > this.timeoutMs) {
        this.delete(w);
        w.onStall(now - w.lastMovedAt);
      }
    }
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.active.clear();
  }
}
