// Trace rows: a bounded in-memory ring for the dashboard and export, and an optional JSON Lines
// file appended with a synchronous write before the router's current turn ends (the rows of one
// run of code in one write, from a microtask), so that a router killed with SIGKILL loses no row
// it had finished (a buffered stream would lose its buffer). Not in the row's own call: a failed
// attempt's row is written on the way from the failure to its continuation, and a file write
// there was the largest part of that path (W4's gap, docs/benchmarks.md).
//
// The rows of a request that migrated or failed are also kept in a second ring of their own, so
// an incident stays inspectable after ordinary traffic has pushed its rows out of the first: a
// busy router cycles 10 000 rows in minutes, and the incident is what an on-call engineer opens.
import { closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import type { TraceFilter } from '../api.ts';
import { ConfigError } from '../config-error.ts';
import type { TraceRow } from './row.ts';

/** A bad --trace-file is a configuration mistake: `baton router` prints it as one line. */
export class TraceFileError extends ConfigError {}

/** How far back a notable request's attempt rows are looked for when its request row comes. */
const NOTABLE_LOOKBACK = 4096;

export class TraceStore {
  private readonly ring: (TraceRow | undefined)[];
  /** Rows of requests that migrated or failed, with their sequence numbers (oldest first). */
  private readonly notable: { seq: number; row: TraceRow }[] = [];
  private readonly notableCapacity: number;
  private fd: number | null = null;
  /** Rows added since start; row number `seq` sits at ring[seq % capacity] while it is kept. */
  written = 0;
  /** Rows that could not be appended to the trace file (disk full, file gone, ...). */
  fileErrors = 0;
  /** Rows added in this run of code, for the file: appended together once it is done. */
  private unwritten: TraceRow[] = [];

  constructor(capacity: number, private readonly file: string | null) {
    this.ring = new Array(Math.max(1, capacity));
    this.notableCapacity = Math.max(1, capacity);
    if (file) this.fd = openTraceFile(file);
  }

  get capacity(): number {
    return this.ring.length;
  }

  get size(): number {
    return Math.min(this.written, this.ring.length);
  }

  add(row: TraceRow): void {
    this.ring[this.written % this.ring.length] = row;
    this.written++;
    if (this.fd !== null && this.unwritten.push(row) === 1) queueMicrotask(this.flush);
    if (row.kind === 'request' && (row.migrations > 0 || row.outcome === 'failed')) this.keepNotable(row);
  }

  /** Copy a notable request's rows (its attempt rows were written just before it) to the second ring. */
  private keepNotable(row: TraceRow): void {
    const n = this.ring.length;
    const end = this.written - 1;
    const picked: { seq: number; row: TraceRow }[] = [{ seq: end, row }];
    const want = row.kind === 'request' ? row.attempts : 0;
    for (let seq = end - 1, found = 0; seq >= Math.max(0, end - n + 1, end - NOTABLE_LOOKBACK) && found < want; seq--) {
      const r = this.ring[seq % n]!;
      if (r.kind === 'attempt' && r.request_id === row.request_id) {
        picked.push({ seq, row: r });
        found++;
      }
    }
    for (const p of picked.reverse()) this.notable.push(p);
    if (this.notable.length > this.notableCapacity) this.notable.splice(0, this.notable.length - this.notableCapacity);
  }

  /**
   * Rows oldest first, filtered: the rows present at this call, minus any that newer rows push
   * out of the ring while a slow export is still reading. Without the sequence check a full ring
   * would hand a long export some rows written after it started, out of order, in place of the
   * ones they overwrote.
   */
  rows(filter: TraceFilter = {}): Generator<TraceRow> {
    // Taken now, not at the generator's first step: that may come later (a stream's first read).
    return this.iterate(this.written, filter);
  }

  private *iterate(end: number, filter: TraceFilter): Generator<TraceRow> {
    const n = this.ring.length;
    // First the notable rows that the ring no longer holds, by their order of writing.
    const kept = Math.max(0, end - n);
    const older = this.notable.filter((e) => e.seq < kept).sort((a, b) => a.seq - b.seq);
    for (const e of older) if (matches(e.row, filter)) yield e.row;
    for (let seq = kept; seq < end; seq++) {
      if (seq < this.written - n) {
        seq = this.written - n - 1; // overwritten while we were paused: skip to the oldest kept
        continue;
      }
      const row = this.ring[seq % n]!;
      if (matches(row, filter)) yield row;
    }
  }

  /** Append the rows added since the last flush (in order, one write). */
  private readonly flush = (): void => {
    const rows = this.unwritten;
    // Empty when close() wrote them before the queued flush came (rows are only kept while the file is open).
    if (rows.length === 0) return;
    this.unwritten = [];
    let text = '';
    for (const row of rows) text += JSON.stringify(row) + '\n';
    this.append(Buffer.from(text), rows.length);
  };

  private append(buf: Buffer, rows: number): void {
    try {
      // writeSync may write less than asked; a line cut short would not parse.
      let off = 0;
      while (off < buf.length) off += writeSync(this.fd!, buf, off, buf.length - off);
    } catch (err) {
      // A full disk must not fail the request whose row this is: the ring still has the row,
      // the error is counted (baton_trace_file_errors_total) and reported once.
      const first = this.fileErrors === 0;
      this.fileErrors += rows;
      if (first) {
        console.error(`baton: cannot append to trace file ${this.file}: ${(err as Error).message} (further errors are counted, not printed)`);
      }
    }
  }

  close(): void {
    this.flush();
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/**
 * Open for append. A previous run killed in the middle of a line (disk full, power loss) would
 * glue our first row onto its fragment; start on a fresh line so every row we write parses.
 */
function openTraceFile(file: string): number {
  let fd: number;
  try {
    fd = openSync(file, 'a+');
  } catch (err) {
    throw new TraceFileError(`--trace-file ${file}: cannot open for append (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const size = fstatSync(fd).size;
  if (size > 0) {
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    if (last[0] !== 0x0a) writeSync(fd, '\n');
  }
  return fd;
}

export function matches(row: TraceRow, f: TraceFilter): boolean {
  if (f.kind && row.kind !== f.kind) return false;
  if (f.request && row.request_id !== f.request) return false;
  if (f.outcome && row.outcome !== f.outcome) return false;
  if (f.worker && (row.kind !== 'attempt' || row.worker !== f.worker)) return false;
  if (f.since !== undefined && row.ended_at < f.since) return false;
  return true;
}
