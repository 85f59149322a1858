// The in-process event stream. Listeners are called synchronously and must be cheap: consumers
// that do I/O (the SSE endpoint, Electron's IPC bridge) queue and batch on their side.
//
// Every event gets the next sequence number of this bus's life (its epoch), and the last
// `replay` events stay in a ring, so an SSE consumer that reconnects with `Last-Event-ID:
// <epoch>:<seq>` is sent what it missed (http/events-endpoint.ts). Both cost an increment and an
// array store per event: nothing is copied or serialised here.
import type { BatonEvent } from './types.ts';

/** Events kept for replay by default: about a minute of a busy router's events. */
export const DEFAULT_REPLAY = 20_000;
/**
 * After its last consumer leaves, the bus stays `active` this long, so events are still built
 * and kept in the ring for a consumer that reconnects (with Last-Event-ID) to be replayed.
 */
export const DEFAULT_RETAIN_MS = 60_000;

export class EventBus {
  private readonly listeners = new Set<(e: BatonEvent, seq: number) => void>();
  /** This bus's life: sequence numbers restart from 1 with another epoch (the start, epoch ms). */
  readonly epoch: number;
  private last = 0;
  private readonly ring: (BatonEvent | undefined)[];

  private retaining: NodeJS.Timeout | null = null;

  constructor(readonly replay = DEFAULT_REPLAY, epoch = Date.now(), private readonly retainMs = DEFAULT_RETAIN_MS) {
    this.epoch = epoch;
    this.ring = new Array<BatonEvent | undefined>(Math.max(0, replay));
  }

  /** The sequence number of the last event emitted (0: none yet). */
  get seq(): number {
    return this.last;
  }

  subscribe(listener: (e: BatonEvent, seq: number) => void): () => void {
    this.listeners.add(listener);
    return () => {
      const removed = this.listeners.delete(listener);
      if (removed && this.listeners.size === 0 && this.ring.length > 0 && this.retainMs > 0) {
        if (this.retaining) clearTimeout(this.retaining);
        this.retaining = setTimeout(() => (this.retaining = null), this.retainMs);
        this.retaining.unref();
      }
      return removed;
    };
  }

  /** Consumers subscribed now. */
  get consumers(): number {
    return this.listeners.size;
  }

  /**
   * Whether events are wanted: someone listens, or listened less than `retainMs` ago (a
   * reconnect will ask for what it missed). A router nobody watches builds no events at all.
   */
  get active(): boolean {
    return this.listeners.size > 0 || this.retaining !== null;
  }

  emit(event: BatonEvent): void {
    const seq = ++this.last;
    if (this.ring.length > 0) this.ring[seq % this.ring.length] = event;
    for (const l of this.listeners) {
      try {
        l(event, seq);
      } catch {
        // A broken consumer must never break a request.
      }
    }
  }

  /**
   * The events after `seq`, oldest first, or null when some of them have left the ring (the
   * consumer must start over from a snapshot).
   */
  since(seq: number): BatonEvent[] | null {
    if (seq > this.last || seq < 0) return null;
    if (this.last - seq > this.ring.length) return null;
    const out: BatonEvent[] = [];
    for (let s = seq + 1; s <= this.last; s++) out.push(this.ring[s % this.ring.length]!);
    return out;
  }
}
