// Joining a live feed late without a gap: subscribe to events first and hold them, fetch the
// snapshot, hand it over, then release the held events. Events that the snapshot already
// contains are harmless: the store's reducers are idempotent for them.
import type { BatonEvent } from '../../../router/events/types.ts';
import type { Snapshot } from '../../../host/contract.ts';
import type { FeedHandlers } from './types.ts';

export class CatchUp {
  private held: BatonEvent[] | null = null;
  private generation = 0;

  constructor(private readonly handlers: FeedHandlers, private readonly maxHeld = 50_000) {}

  /** Starts a catch-up (on connect or reconnect): events are held until the snapshot lands. */
  async begin(fetchSnapshot: () => Promise<Snapshot>): Promise<void> {
    const generation = ++this.generation;
    this.held = [];
    let snapshot: Snapshot;
    try {
      snapshot = await fetchSnapshot();
    } catch (err) {
      if (generation !== this.generation) return;
      this.held = null;
      this.handlers.onStatus({ status: 'lost', message: `could not load the host's state: ${(err as Error).message}` });
      return;
    }
    if (generation !== this.generation) return; // a newer catch-up started meanwhile
    const held = this.held ?? [];
    this.held = null;
    this.handlers.onSnapshot(snapshot);
    if (held.length > 0) this.handlers.onEvents(held);
  }

  events(events: BatonEvent[]): void {
    if (this.held) {
      // If the snapshot takes very long, drop the oldest held events rather than grow for ever.
      this.held.push(...events);
      if (this.held.length > this.maxHeld) this.held.splice(0, this.held.length - this.maxHeld);
      return;
    }
    this.handlers.onEvents(events);
  }

  cancel(): void {
    this.generation++;
    this.held = null;
  }
}
