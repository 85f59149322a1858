// Worker state as the router last reported it, in order of first appearance. Attempts and trace
// rows name their worker by URL while the worker API names it by id (w0, w1, ...); this table
// maps one to the other and remembers the mapping after a worker is removed, so a worker keeps
// its colour and name in old rows too. The router's own figures (in flight, circuit, health)
// replace the table a few times a second (`replace`, from the host's poll of the router).
import type { BatonEvent, WorkerInfo } from '../../../router/events/types.ts';
import { workerColor } from './colors.ts';

export class WorkerTable {
  readonly byId = new Map<string, WorkerInfo>();
  private readonly idByUrl = new Map<string, string>();
  /** Every worker the router has named, removed ones included (an export carries them all). */
  readonly seen = new Map<string, WorkerInfo>();
  /** Colours a trace file gives its workers, by id: the file's, not recomputed. */
  readonly fileColors = new Map<string, string>();
  /** When the router last gave the whole list (epoch ms of its reading), null before. */
  readAt: number | null = null;

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

  /** Replaces the table with a host's list (a snapshot, or the router's reading): the whole truth. */
  reset(workers: readonly WorkerInfo[], readAt: number | null = null): void {
    this.byId.clear();
    for (const w of workers) this.set(w);
    if (readAt !== null) this.readAt = readAt;
  }

  /** Forgets everything, the URL mapping included (another router answered). */
  clear(): void {
    this.byId.clear();
    this.idByUrl.clear();
    this.seen.clear();
    this.readAt = null;
  }

  list(): WorkerInfo[] {
    return [...this.byId.values()];
  }

  /** The worker id for an id or a URL; unknown keys name themselves. */
  idOf(key: string): string {
    return this.byId.has(key) ? key : this.idByUrl.get(key) ?? key;
  }

  /** A short name: the worker's id when known, else the host:port of its URL (a trace file names workers by URL only). */
  label(key: string): string {
    const id = this.idOf(key);
    if (id !== key || this.byId.has(key)) return id;
    try {
      return new URL(key).host || key;
    } catch {
      return key;
    }
  }

  colorOf(key: string): string {
    const id = this.idOf(key);
    return this.fileColors.get(id) ?? workerColor(id);
  }

  private set(w: WorkerInfo): void {
    this.byId.set(w.id, w);
    this.seen.set(w.id, w);
    this.idByUrl.set(w.url, w.id);
  }
}
