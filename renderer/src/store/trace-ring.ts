// The trace rows the Traces view shows: a bounded ring, newest last. Rows arrive with the events
// that end attempts and requests, so the table is live without polling; exports ask the host for
// its own (larger) ring instead.
import type { TraceRow } from '../../../router/trace/row.ts';

export class TraceRing {
  private rows: TraceRow[] = [];
  private readonly seen = new Set<string>();

  constructor(private readonly capacity = 20_000) {}

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
    }
    if (this.rows.length > this.capacity) {
      // Trim in chunks so a full ring does not pay a splice per row.
      const drop = this.rows.length - this.capacity + Math.floor(this.capacity / 10);
      for (const row of this.rows.slice(0, drop)) this.seen.delete(TraceRing.key(row));
      this.rows = this.rows.slice(drop);
    }
  }

  all(): readonly TraceRow[] {
    return this.rows;
  }

  get size(): number {
    return this.rows.length;
  }
}
