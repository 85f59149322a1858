// The markers of an incident: what was done to workers through the dashboard (kill, hang, drain,
// ...) and workers the router reported going down. Kept by the host, bounded, so that every page
// (and one that opens late) draws the same markers on the waterfall and the charts.
import type { BatonEvent, WorkerHealth, WorkerInfo } from '../router/events/types.ts';
import type { FaultKind, FaultMark } from './contract.ts';

/**
 * A health the router reports for a worker that cannot take work because something is wrong.
 * `benched` is the router's first blame (router/pool/worker-pool.ts blame: an attempt's failure was
 * the worker's): the worker is down from there, seconds before a health check says `unhealthy`.
 */
const DOWN: ReadonlySet<WorkerHealth> = new Set(['benched', 'dead', 'unhealthy', 'circuit_open']);

/** How long after a `down` mark a failed attempt row on that worker still counts as what the router read. */
const EVIDENCE_MS = 5_000;

export class FaultLog {
  private marks: FaultMark[] = [];
  private readonly health = new Map<string, WorkerHealth>();
  /** The open `down` mark of each worker id (until the router reports it healthy again), and by URL. */
  private readonly open = new Map<string, FaultMark>();
  private readonly openByUrl = new Map<string, FaultMark>();

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

  /**
   * Called from the router's event listener (cheap). A worker turning benched, dead, unhealthy or
   * circuit-open is a `down` mark; the failed attempt row that follows the blame adds what the
   * router read (`evidence`), a later health (the health check's verdict) adds `verdict`, and the
   * worker turning healthy closes the mark (`recoveredAt`).
   */
  observe(event: BatonEvent): void {
    if (event.type === 'attempt_ended') {
      const row = event.row;
      if (row.error_kind === null || row.outcome === 'finished' || row.outcome === 'cancelled') return;
      const mark = this.openByUrl.get(row.worker);
      // The blame is emitted just before the row of the attempt that caused it (the loop judges, then writes the row).
      if (mark && mark.evidence == null && row.ended_at >= mark.t - EVIDENCE_MS && row.ended_at <= mark.t + EVIDENCE_MS) {
        mark.evidence = `${row.error_kind}: ${row.error_evidence ?? row.error ?? 'no evidence recorded'}`;
      }
      return;
    }
    if (event.type === 'worker_removed') {
      this.health.delete(event.worker_id);
      this.close(event.worker_id, null);
      // Discovery took it away (a pod OOMKilled, evicted, deleted): a mark with the pod's own reason.
      const d = event.worker?.discovery;
      if (d) this.discovered('remove', event.worker!, event.t);
      return;
    }
    if (event.type !== 'worker_state') return;
    const w = event.worker;
    const before = this.health.get(w.id);
    this.health.set(w.id, w.health);
    if (before === undefined || before === w.health) return;
    if (w.health === 'draining' && w.discovery?.reason) this.discovered('drain', w, event.t);
    if (DOWN.has(w.health) && !DOWN.has(before)) {
      const mark = this.record('down', w.id, w.url, 'router', w.health, event.t);
      mark.evidence = null;
      mark.verdict = null;
      mark.verdictAt = null;
      mark.recoveredAt = null;
      this.open.set(w.id, mark);
      this.openByUrl.set(w.url, mark);
    } else if (DOWN.has(w.health)) {
      // Still down, now for another reason: benched → unhealthy is the health check agreeing.
      const mark = this.open.get(w.id);
      if (mark && w.health !== 'benched') {
        mark.verdict = w.health;
        mark.verdictAt = event.t;
      }
    } else if (w.health === 'healthy') {
      this.close(w.id, event.t);
    }
  }

  /**
   * The workers as the router reports them now (a page's poll): a bench runs out without an
   * event (the pool computes health from the clock), so the poll is what says the worker is back.
   */
  sync(workers: readonly WorkerInfo[], t = this.clock()): void {
    for (const worker of workers) this.observe({ type: 'worker_state', t, worker });
  }

  private discovered(kind: 'drain' | 'remove', w: WorkerInfo, t: number): void {
    const d = w.discovery!;
    const mark = this.record(kind, w.id, w.url, 'router', d.reason ?? null, t);
    mark.pod = d.pod ?? d.name ?? null;
    mark.node = d.node ?? null;
  }

  private close(id: string, at: number | null): void {
    const mark = this.open.get(id);
    if (!mark) return;
    mark.recoveredAt = at;
    this.open.delete(id);
    if (mark.url !== null && this.openByUrl.get(mark.url) === mark) this.openByUrl.delete(mark.url);
  }

  list(): FaultMark[] {
    // Copies: a page's view of a mark must not change under it when a verdict arrives.
    return this.marks.map((m) => ({ ...m }));
  }
}
