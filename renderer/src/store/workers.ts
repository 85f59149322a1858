// Worker state as the router last reported it, in order of first appearance. Attempts and trace
// rows name their worker by URL while the worker API names it by id (w0, w1, ...); this table
// maps one to the other and remembers the mapping after a worker is removed, so a worker keeps
// its colour and name in old rows too.
import type { BatonEvent, WorkerInfo } from '../../../router/events/types.ts';
import { workerColor } from './colors.ts';

export class WorkerTable {
  readonly byId = new Map<string, WorkerInfo>();
  private readonly idByUrl = new Map<string, string>();

  apply(events: readonly BatonEvent[]): boolean {
    let changed = false;
    for (const e of events) {
      if (e.type === 'worker_state') {
        this.set(e.worker);
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
    for (const w of workers) this.set(w);
  }

  list(): WorkerInfo[] {
    return [...this.byId.values()];
  }

  /** The worker id for an id or a URL; unknown keys name themselves. */
  idOf(key: string): string {
    return this.byId.has(key) ? key : this.idByUrl.get(key) ?? key;
  }

  colorOf(key: string): string {
    return workerColor(this.idOf(key));
  }

  private set(w: WorkerInfo): void {
    this.byId.set(w.id, w);
    this.idByUrl.set(w.url, w.id);
  }
}
