// Trace rows: a bounded in-memory ring for the dashboard and export, and an optional JSON Lines
// file appended row by row with a synchronous write, so that a router killed with SIGKILL loses
// no row it had finished (a buffered stream would lose its buffer).
import { closeSync, openSync, writeSync } from 'node:fs';
import type { TraceFilter } from '../api.ts';
import type { TraceRow } from './row.ts';

export class TraceStore {
  private readonly ring: (TraceRow | undefined)[];
  private head = 0; // next write position
  private size = 0;
  private fd: number | null = null;
  /** Rows written since start (the ring may have dropped old ones). */
  written = 0;

  constructor(capacity: number, file: string | null) {
    this.ring = new Array(Math.max(1, capacity));
    if (file) this.fd = openSync(file, 'a');
  }

  add(row: TraceRow): void {
    this.ring[this.head] = row;
    this.head = (this.head + 1) % this.ring.length;
    if (this.size < this.ring.length) this.size++;
    this.written++;
    if (this.fd !== null) writeSync(this.fd, JSON.stringify(row) + '\n');
  }

  /** Rows oldest first, filtered. */
  *rows(filter: TraceFilter = {}): Generator<TraceRow> {
    const n = this.ring.length;
    const first = (this.head - this.size + n) % n;
    for (let i = 0; i < this.size; i++) {
      const row = this.ring[(first + i) % n]!;
      if (matches(row, filter)) yield row;
    }
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

export function matches(row: TraceRow, f: TraceFilter): boolean {
  if (f.kind && row.kind !== f.kind) return false;
  if (f.request && row.request_id !== f.request) return false;
  if (f.outcome && row.outcome !== f.outcome) return false;
  if (f.worker && (row.kind !== 'attempt' || row.worker !== f.worker)) return false;
  if (f.since !== undefined && row.ended_at < f.since) return false;
  return true;
}
