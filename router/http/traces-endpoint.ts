// GET /traces?format=jsonl|csv&request=&worker=&outcome=&kind=&since= — trace rows streamed
// from the ring with backpressure, never built into one string in memory: rows are rendered in
// chunks of about CHUNK_BYTES, and the next chunk is rendered only when the socket took the last.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import type { TraceFilter } from '../api.ts';
import type { TraceRow } from '../trace/row.ts';
import { TRACE_COLUMNS } from '../trace/columns.ts';
import { normalizeWorkerUrl } from '../pool/worker-pool.ts';

export type TraceFormat = 'jsonl' | 'csv';

export class TraceQueryError extends Error {}

const PARAMS = new Set(['format', 'request', 'worker', 'outcome', 'kind', 'since']);
const OUTCOMES = new Set(['finished', 'failed', 'cancelled', 'budget_exhausted']);
/** Rows are rendered this many bytes at a time: big enough to amortise writes, small enough to bound memory. */
const CHUNK_BYTES = 64 * 1024;

/**
 * The query of an export. Strict on purpose: a misspelt filter (`?outcom=failed`) that was
 * silently ignored would hand the user every row and look like an answer.
 */
export function parseTraceQuery(params: URLSearchParams): { format: TraceFormat; filter: TraceFilter } {
  for (const key of new Set(params.keys())) {
    if (!PARAMS.has(key)) throw new TraceQueryError(`unknown parameter '${key}' (use ${[...PARAMS].join(', ')})`);
    if (params.getAll(key).length > 1) throw new TraceQueryError(`parameter '${key}' given more than once`);
  }
  const format = params.get('format') ?? 'jsonl';
  if (format !== 'jsonl' && format !== 'csv') throw new TraceQueryError(`format must be jsonl or csv, got '${format}'`);
  const filter: TraceFilter = {};
  const kind = params.get('kind');
  if (kind) {
    if (kind !== 'attempt' && kind !== 'request') throw new TraceQueryError(`kind must be attempt or request, got '${kind}'`);
    filter.kind = kind;
  }
  const outcome = params.get('outcome');
  if (outcome) {
    if (!OUTCOMES.has(outcome)) throw new TraceQueryError(`outcome must be one of ${[...OUTCOMES].join(', ')}, got '${outcome}'`);
    filter.outcome = outcome;
  }
  const request = params.get('request');
  if (request) filter.request = request;
  const worker = params.get('worker');
  if (worker) {
    // Rows name workers by their normalised origin; accept what the user typed (`.../`, `HTTP://`).
    try {
      filter.worker = normalizeWorkerUrl(worker);
    } catch {
      filter.worker = worker;
    }
  }
  const since = params.get('since');
  if (since) {
    const n = Number(since);
    if (!Number.isFinite(n) || n < 0) throw new TraceQueryError(`since must be epoch milliseconds, got '${since}'`);
    filter.since = n;
  }
  return { format, filter };
}

/** Both formats render these the same way, so that they parse back to the same rows. */
const CSV_OPTIONS = {
  columns: TRACE_COLUMNS as unknown as string[],
  cast: {
    boolean: (b: boolean) => (b ? 'true' : 'false'),
    // An unquoted empty cell is null (or a field of the other row kind); a quoted one is ''.
    // (The global quoted_empty option would quote nulls too and erase the difference.)
    string: (s: string) => (s === '' ? { value: '', quoted_empty: true } : s),
  },
};

/** The export as text chunks of about CHUNK_BYTES, rendered lazily as the consumer pulls. */
export function* traceChunks(rows: Iterable<TraceRow>, format: TraceFormat): Generator<string> {
  if (format === 'jsonl') {
    let buf = '';
    for (const row of rows) {
      buf += JSON.stringify(row) + '\n';
      if (buf.length >= CHUNK_BYTES) {
        yield buf;
        buf = '';
      }
    }
    if (buf) yield buf;
    return;
  }
  let batch: TraceRow[] = [];
  let header = true;
  let bytes = 0;
  const flush = () => {
    const text = stringify(batch, { ...CSV_OPTIONS, header });
    header = false;
    batch = [];
    bytes = 0;
    return text;
  };
  for (const row of rows) {
    batch.push(row);
    bytes += 200 + (row.kind === 'attempt' ? (row.error?.length ?? 0) : 0); // a rough row size
    if (bytes >= CHUNK_BYTES) yield flush();
  }
  // Always end with a flush: an export with no rows still has its header line.
  const last = flush();
  if (last) yield last;
}

export async function streamTraces(rows: Iterable<TraceRow>, format: TraceFormat, _req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.writeHead(200, {
    'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson',
    'content-disposition': `attachment; filename="baton-traces.${format}"`,
  });
  // highWaterMark 1: at most one rendered chunk waits beside the socket's own buffer. pipeline
  // stops the generator when the client goes away, so an abandoned export frees its memory.
  const source = Readable.from(traceChunks(rows, format), { objectMode: true, highWaterMark: 1 });
  try {
    await pipeline(source, res);
  } catch {
    // The client left mid-export: nothing to answer to.
  }
}
