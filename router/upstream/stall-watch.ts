// Stall detection for every attempt in flight, by one coarse sweeper instead of a timer reset
// per token: an attempt records that data arrived by bumping a counter (the only per-chunk cost);
// the sweeper notices counters that stopped moving. Paused attempts (a slow client) are not
// stalls: the worker is waiting for us, not we for it.
//
// Two deadlines: until an attempt's first body byte, the first-token deadline (it covers
// queueing and prefill, which grow with load and with the replayed tokens); after it, the
// inter-token deadline. A slow prefill under load is not a stalled stream.
//
// Both honour what the request asked for: a worker that sends one frame per `stream_interval`
// tokens is silent for that many token times between frames, by design. Each attempt carries its
// frame spacing (tokens per frame at most, decided once when the attempt starts: frameSpacing),
// and the inter-token deadline is that many times the configured one.

/** What spaces a worker's frames, as the request asks (FormatRequest.framing). */
export interface FrameRequest {
  /** The request's own stream interval in tokens; null: the worker's default applies. */
  streamInterval: number | null;
  /** Tokens a stop string's prefix may hold a frame back (SGLang, text mode); 0: none. */
  heldTokens: number;
}

/**
 * The most tokens between two frames of an attempt: the stream interval the request asked for,
 * else the worker's (its advertised default), else 1. A frame held back while the output's tail
 * may be the start of a stop string waits for the next boundary after the hold ends: two
 * intervals and the hold at most. Never more than the tokens left to generate (the finishing
 * frame always goes out).
 */
export function frameSpacing(req: FrameRequest | undefined, workerInterval: number | null, budget: number | null): number {
  const k = req?.streamInterval ?? workerInterval ?? 1;
  const held = req?.heldTokens ?? 0;
  let spacing = held > 0 ? 2 * k + held : k;
  if (budget !== null && budget < spacing) spacing = budget;
  return spacing >= 1 ? spacing : 1;
}

export interface Watched {
  /** Bumped on every upstream data event. */
  chunks: number;
  paused: boolean;
  /** Internal to the sweeper. */
  seenChunks: number;
  lastMovedAt: number;
  /** Tokens per frame at most (frameSpacing), set before the attempt starts: scales the deadlines. */
  spacing: number;
  /** `firstToken`: nothing had arrived yet (the first-token deadline passed). */
  onStall(idleMs: number, firstToken: boolean): void;
}

export class StallWatch {
  private readonly active = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;
  private readonly tickMs: number;
  private lastSweepAt = 0;

  /** 0 turns a deadline off. */
  constructor(
    private readonly timeoutMs: number,
    private readonly firstTokenMs = timeoutMs,
  ) {
    const shortest = Math.min(...[timeoutMs, firstTokenMs].filter((t) => t > 0), 4000);
    this.tickMs = Math.max(10, Math.min(1000, Math.floor(shortest / 4)));
  }

  add(w: Watched): void {
    if (this.timeoutMs <= 0 && this.firstTokenMs <= 0) return;
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
      } else {
        const first = w.chunks === 0;
        const limit = first ? this.firstLimit(w.spacing) : this.timeoutMs * w.spacing;
        if (limit > 0 && now - w.lastMovedAt > limit) {
          this.delete(w);
          w.onStall(now - w.lastMovedAt, first);
        }
      }
    }
  }

  /**
   * SGLang versions before the `% stream_interval == 1` rule (scheduler_output_processor_mixin.py
   * `stream_output_generation`) sent the first frame only after `stream_interval` tokens: the
   * first deadline allows the tokens before it too.
   */
  private firstLimit(spacing: number): number {
    if (this.firstTokenMs <= 0) return 0;
    return spacing > 1 ? this.firstTokenMs + this.timeoutMs * (spacing - 1) : this.firstTokenMs;
  }

  /** The inter-token deadline of an attempt whose frames are `spacing` tokens apart (its evidence). */
  interTokenMs(spacing: number): number {
    return this.timeoutMs * spacing;
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.active.clear();
  }
}
