// The markers of an incident: what was done to workers through the dashboard (kill, hang, drain,
// ...) and workers the router reported going down. Kept by the host, bounded, so that every page
// (and one that opens late) draws the same markers on the waterfall and the charts.
import type { BatonEvent, WorkerHealth } from '../router/events/types.ts';
import type { FaultKind, FaultMark } from './contract.ts';

/** A health the router reports for a worker that cannot take work because something is wrong. */
const DOWN: ReadonlySet<WorkerHealth> = new Set(['dead', 'unhealthy', 'circuit_open']);

export class FaultLog {
  private marks: FaultMark[] = [];
  private readonly health = new Map<string, WorkerHealth>();

  constructor(private readonly capacity = 500, private readonly clock: () => number = Date.now) {}

  record(kind: FaultKind, worker: string | null, url: string | null, source: FaultMark['source'] = 'dashboard', detail: string | null = null, t = this.clock()): FaultMark {
    const mark: FaultMark = { t, kind, worker, url, source, detail };
    // In time order: an action is stamped when it was asked for, which may be before the router
    // reported what it caused (a kill, and the worker going down while the kill was reaped).
    let i = this.marks.length;
    while (i > 0 && this.marks[i - 1]!.t > t) i--;
    this.marks.splice(i, 0, mark);
    if (this.marks.length > this.capacity) this.marks.splice(0, this.marks.length - this.capacity);
    return mark;
  }

  /** Called from the router's event listener (cheap): a worker turning dead, unhealthy or circuit-open is a `down` mark. */
  observe(event: BatonEvent): void {
    if (event.type === 'worker_removed') {
      this.health.delete(event.worker_id);
      return;
    }
    if (event.type !== 'worker_state') return;
    const w = event.worker;
    const before = this.health.get(w.id);
    this.health.set(w.id, w.health);
    if (DOWN.has(w.health) && before !== undefined && !DOWN.has(before)) this.record('down', w.id, w.url, 'router', w.health, event.t);
  }

  list(): FaultMark[] {
    return [...this.marks];
  }
}
