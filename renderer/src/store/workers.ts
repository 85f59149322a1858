// Worker state as the router last reported it, in order of first appearance.
import type { BatonEvent, WorkerInfo } from '../../../router/events/types.ts';

export class WorkerTable {
  readonly byId = new Map<string, WorkerInfo>();

  apply(events: readonly BatonEvent[]): boolean {
    let changed = false;
    for (const e of events) {
      if (e.type === 'worker_state') {
        this.byId.set(e.worker.id, e.worker);
        changed = true;
      } else if (e.type === 'worker_removed') {
        changed = this.byId.delete(e.worker_id) || changed;
      }
    }
    return changed;
  }

  /** Replaces the table with a host's list (a snapshot is the whole truth). */
  reset(workers: readonly WorkerInfo[]): void {
    this.byId.clear();
    for (const w of workers) this.byId.set(w.id, w);
  }

  list(): WorkerInfo[] {
    return [...this.byId.values()];
  }
}
