// GET /traces?format=jsonl|csv&request=&worker=&outcome=&kind=&since=&until=&request_prefix=&iso= — trace rows streamed
// from the ring with backpressure, never built into one string in memory: rows are rendered in
// chunks of about CHUNK_BYTES, and the next chunk is rendered only when the socket took the last.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import type { TraceFilter } from '../api.ts';
import type { TraceRow } from '../trace/row.ts';
import { TRACE_COLUMNS } from '../trace/columns.ts';
import { normalizeWorkerUrl } from '../worker-url.ts';

export type TraceFormat = 'jsonl' | 'csv';

export class TraceQueryError extends Error {}

const PARAMS = new Set(['format', 'request', 'worker', 'outcome', 'kind', 'since', 'until', 'request_prefix', 'iso']);
const OUTCOMES = new Set(['finished', 'failed', 'cancelled', 'budget_exhausted', 'drained']);
/** Rows are rendered this many bytes at a time: big enough to amortise writes, small enough to bound memory. */
const CHUNK_BYTES = 64 * 1024;

/**
 * Filters and options applied here, over the store's rows: `until` (rows that ended at or before,
 * epoch ms; with `since`, a time range), `request_prefix` (request ids starting with it: the
 * dashboard searches by prefix), `iso` (each row also carries `started_at_iso` and `ended_at_iso`
 * next to the epoch milliseconds).
 */
export interface TraceExtras {
  until?: number;
  requestPrefix?: string;
  iso: boolean;
}

/**
 * The query of an export. Strict on purpose: a misspelt filter (`?outcom=failed`) that was
 * silently ignored would hand the user every row and look like an answer.
 */
export function parseTraceQuery(params: URLSearchParams): { format: TraceFormat; filter: TraceFilter; extras: TraceExtras } {
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
  const extras: TraceExtras = { iso: false };
  const until = params.get('until');
  if (until) {
    const n = Number(until);
    if (!Number.isFinite(n) || n < 0) throw new TraceQueryError(`until must be epoch milliseconds, got '${until}'`);
    extras.until = n;
  }
  const prefix = params.get('request_prefix');
  if (prefix) extras.requestPrefix = prefix;
  const iso = params.get('iso');
  if (iso !== null) {
    if (!['1', 'true', '0', 'false', ''].includes(iso)) throw new TraceQueryError(`iso must be 1 or 0, got '${iso}'`);
    extras.iso = iso === '1' || iso === 'true' || iso === '';
  }
  return { format, filter, extras };
}

/** The rows an export's extras keep. */
function* applyExtras(rows: Iterable<TraceRow>, extras: TraceExtras): Generator<TraceRow> {
  for (const row of rows) {
    if (extras.until !== undefined && row.ended_at > extras.until) continue;
    if (extras.requestPrefix !== undefined && !row.request_id.startsWith(extras.requestPrefix)) continue;
    yield row;
  }
}

/** A row with ISO 8601 times next to its epoch milliseconds (`iso=1`). */
export function withIsoTimes(row: TraceRow): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    out[key] = value;
    if ((key === 'started_at' || key === 'ended_at') && typeof value === 'number') out[`${key}_iso`] = new Date(value).toISOString();
  }
  return out;
}

const ISO_COLUMNS = TRACE_COLUMNS.flatMap((c) => (c === 'started_at' || c === 'ended_at' ? [c, `${c}_iso`] : [c]));

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
export function* traceChunks(rows: Iterable<TraceRow>, format: TraceFormat, opts: { iso?: boolean } = {}): Generator<string> {
  const iso = opts.iso === true;
  if (format === 'jsonl') {
    let buf = '';
    for (const row of rows) {
      buf += JSON.stringify(iso ? withIsoTimes(row) : row) + '\n';
      if (buf.length >= CHUNK_BYTES) {
        yield buf;
        buf = '';
      }
    }
    if (buf) yield buf;
    return;
  }
  let batch: (TraceRow | Record<string, unknown>)[] = [];
  let header = true;
  let bytes = 0;
  const options = iso ? { ...CSV_OPTIONS, columns: ISO_COLUMNS } : CSV_OPTIONS;
  const flush = () => {
    const text = stringify(batch, { ...options, header });
    header = false;
    batch = [];
    bytes = 0;
    return text;
  };
  for (const row of rows) {
    batch.push(iso ? withIsoTimes(row) : row);
    bytes += 200 + (row.kind === 'attempt' ? (row.error?.length ?? 0) : 0); // a rough row size
    if (bytes >= CHUNK_BYTES) yield flush();
  }
  // Always end with a flush: an export with no rows still has its header line.
  const last = flush();
  if (last) yield last;
}

/** `given`: the extras to apply (the hub matches request ids itself); else read from the request's query. */
export async function streamTraces(rows: Iterable<TraceRow>, format: TraceFormat, req: IncomingMessage, res: ServerResponse, given?: TraceExtras): Promise<void> {
  // The extras (until, request_prefix, iso) are read here from the same, already checked query.
  let extras: TraceExtras = given ?? { iso: false };
  if (!given) {
    try {
      extras = parseTraceQuery(new URL(req.url ?? '/', 'http://x').searchParams).extras;
    } catch {
      // the route has already refused a bad query; a caller without one gets no extras
    }
  }
  res.writeHead(200, {
    'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson',
    'content-disposition': `attachment; filename="baton-traces.${format}"`,
  });
  // highWaterMark 1: at most one rendered chunk waits beside the socket's own buffer. pipeline
  // stops the generator when the client goes away, so an abandoned export frees its memory.
  const filtered = extras.until !== undefined || extras.requestPrefix !== undefined ? applyExtras(rows, extras) : rows;
  const source = Readable.from(traceChunks(filtered, format, { iso: extras.iso }), { objectMode: true, highWaterMark: 1 });
  try {
    await pipeline(source, res);
  } catch {
    // The client left mid-export: nothing to answer to.
  }
}
