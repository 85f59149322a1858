// Keeps the events of requests still in flight, so a page that opens (or reconnects) late can
// replay them and draw running requests it never saw start. It runs inside the router's event
// listener, so every step is a map operation; progress events replace each other.
import type { BatonEvent } from '../router/events/types.ts';

interface Tracked {
  events: BatonEvent[];
  /** Index in `events` of the latest progress event per attempt, replaced in place. */
  progressAt: Map<number, number>;
}

export class InFlightEvents {
  private readonly requests = new Map<string, Tracked>();

  constructor(private readonly maxRequests = 5000, private readonly maxEventsPerRequest = 64) {}

  get size(): number {
    return this.requests.size;
  }

  add(event: BatonEvent): void {
    switch (event.type) {
      case 'worker_state':
      case 'worker_removed':
      case 'discovery_state':
        return;
      case 'request_finished':
        this.requests.delete(event.row.request_id);
        return;
      case 'attempt_ended':
        return this.push(event.row.request_id, event);
      case 'progress':
        return this.progress(event);
      default:
        return this.push(event.request_id, event);
    }
  }

  /** All tracked events, request by request in arrival order. */
  events(): BatonEvent[] {
    const out: BatonEvent[] = [];
    for (const tracked of this.requests.values()) out.push(...tracked.events);
    return out;
  }

  private track(id: string): Tracked {
    let tracked = this.requests.get(id);
    if (!tracked) {
      // A request whose finish we never heard of must not pin memory for ever: drop the oldest.
      if (this.requests.size >= this.maxRequests) {
        const oldest = this.requests.keys().next().value;
        if (oldest !== undefined) this.requests.delete(oldest);
      }
      tracked = { events: [], progressAt: new Map() };
      this.requests.set(id, tracked);
    }
    return tracked;
  }

  private push(id: string, event: BatonEvent): void {
    const tracked = this.track(id);
    if (tracked.events.length < this.maxEventsPerRequest) tracked.events.push(event);
  }

  private progress(event: Extract<BatonEvent, { type: 'progress' }>): void {
    const tracked = this.track(event.request_id);
    const at = tracked.progressAt.get(event.attempt);
    if (at !== undefined) {
      tracked.events[at] = event;
    } else if (tracked.events.length < this.maxEventsPerRequest) {
      tracked.progressAt.set(event.attempt, tracked.events.length);
      tracked.events.push(event);
    }
  }
}
