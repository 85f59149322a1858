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

export class EventBus {
  private readonly listeners = new Set<(e: BatonEvent, seq: number) => void>();
  /** This bus's life: sequence numbers restart from 1 with another epoch (the start, epoch ms). */
  readonly epoch: number;
  private last = 0;
  private readonly ring: (BatonEvent | undefined)[];

  constructor(readonly replay = DEFAULT_REPLAY, epoch = Date.now()) {
    this.epoch = epoch;
    this.ring = new Array<BatonEvent | undefined>(Math.max(0, replay));
  }

  /** The sequence number of the last event emitted (0: none yet). */
  get seq(): number {
    return this.last;
  }

  subscribe(listener: (e: BatonEvent, seq: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get active(): boolean {
    return this.listeners.size > 0;
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
