// The in-process event stream. Listeners are called synchronously and must be cheap: consumers
// that do I/O (the SSE endpoint, Electron's IPC bridge) queue and batch on their side.
import type { BatonEvent } from './types.ts';

export class EventBus {
  private readonly listeners = new Set<(e: BatonEvent) => void>();

  subscribe(listener: (e: BatonEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get active(): boolean {
    return this.listeners.size > 0;
  }

  emit(event: BatonEvent): void {
    for (const l of this.listeners) {
      try {
        l(event);
      } catch {
        // A broken consumer must never break a request.
      }
    }
  }
}
