// The trace rows the page holds: what the Traces view shows and what a request's detail is
// rebuilt from once the request has left the live list. Rows arrive with the events that end
// attempts and requests, so the table is live without polling. Bounded in two quotas: ordinary
// rows, and the rows of requests that migrated or failed, which are kept longer (an incident is
// inspected after the traffic that followed it). Exports ask the host for its own rows instead.
import type { TraceRow } from '../../../router/trace/row.ts';

/** A row that makes its request one an incident is about: it migrated, or something failed. */
export function isNotableRow(row: TraceRow): boolean {
  return row.kind === 'attempt' ? row.attempt > 0 || row.outcome === 'failed' : row.migrations > 0 || row.outcome === 'failed';
}

export class TraceRing {
  private rows: TraceRow[] = [];
  private readonly seen = new Set<string>();
  private readonly byRequest = new Map<string, TraceRow[]>();
  /** Requests with at least one notable row: all their rows count against the notable quota. */
  private readonly notable = new Set<string>();
  private notableRows = 0;
  /** Rows let go, for an honest count. */
  dropped = 0;

  constructor(readonly capacity = 20_000, readonly notableCapacity = 10_000) {}

  static key(row: TraceRow): string {
    return row.kind === 'attempt' ? `${row.request_id}#${row.attempt}` : row.request_id;
  }

  /** Adds rows, ignoring any already held (a snapshot and the live stream may overlap). */
  add(rows: readonly TraceRow[]): void {
    for (const row of rows) {
      const key = TraceRing.key(row);
      if (this.seen.has(key)) continue;
      this.seen.add(key);
      this.rows.push(row);
      const id = row.request_id;
      let mine = this.byRequest.get(id);
      if (!mine) this.byRequest.set(id, (mine = []));
      mine.push(row);
      if (this.notable.has(id)) {
        this.notableRows++;
      } else if (isNotableRow(row)) {
        this.notable.add(id);
        this.notableRows += mine.length;
      }
    }
    // Trim in chunks (10 % past a quota) so a full ring does not pay a pass per row.
    const ordinary = this.rows.length - this.notableRows;
    if (ordinary > this.capacity * 1.1 || this.notableRows > this.notableCapacity * 1.1) this.trim();
  }

  private trim(): void {
    let dropOrdinary = Math.max(0, this.rows.length - this.notableRows - this.capacity);
    let dropNotable = Math.max(0, this.notableRows - this.notableCapacity);
    const keep: TraceRow[] = [];
    for (const row of this.rows) {
      const id = row.request_id;
      const notable = this.notable.has(id);
      if (notable ? dropNotable > 0 : dropOrdinary > 0) {
        if (notable) {
          dropNotable--;
          this.notableRows--;
        } else {
          dropOrdinary--;
        }
        this.dropped++;
        this.seen.delete(TraceRing.key(row));
        const mine = this.byRequest.get(id);
        if (mine) {
          const i = mine.indexOf(row);
          if (i >= 0) mine.splice(i, 1);
          if (mine.length === 0) {
            this.byRequest.delete(id);
            this.notable.delete(id);
          }
        }
      } else {
        keep.push(row);
      }
    }
    this.rows = keep;
  }

  /** Every row held, oldest first. */
  all(): readonly TraceRow[] {
    return this.rows;
  }

  /** The rows held for one request, in arrival order. */
  ofRequest(id: string): readonly TraceRow[] {
    return this.byRequest.get(id) ?? [];
  }

  get size(): number {
    return this.rows.length;
  }
}
