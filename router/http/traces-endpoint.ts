// GET /traces?format=jsonl|csv&request=&worker=&outcome=&kind=&since= — trace rows streamed
// from the ring, row by row with backpressure, never built into one string in memory.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { stringify } from 'csv-stringify';
import type { TraceFilter } from '../api.ts';
import type { TraceRow } from '../trace/row.ts';
import { TRACE_COLUMNS } from '../trace/columns.ts';

export class TraceQueryError extends Error {}

export function parseTraceQuery(params: URLSearchParams): { format: 'jsonl' | 'csv'; filter: TraceFilter } {
  const format = params.get('format') ?? 'jsonl';
  if (format !== 'jsonl' && format !== 'csv') throw new TraceQueryError(`format must be jsonl or csv, got '${format}'`);
  const filter: TraceFilter = {};
  const kind = params.get('kind');
  if (kind) {
    if (kind !== 'attempt' && kind !== 'request') throw new TraceQueryError(`kind must be attempt or request, got '${kind}'`);
    filter.kind = kind;
  }
  for (const key of ['request', 'worker', 'outcome'] as const) {
    const v = params.get(key);
    if (v) filter[key] = v;
  }
  const since = params.get('since');
  if (since) {
    const n = Number(since);
    if (!Number.isFinite(n) || n < 0) throw new TraceQueryError(`since must be epoch milliseconds, got '${since}'`);
    filter.since = n;
  }
  return { format, filter };
}

export async function streamTraces(rows: Iterable<TraceRow>, format: 'jsonl' | 'csv', req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.writeHead(200, {
    'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson',
    'content-disposition': `attachment; filename="baton-traces.${format}"`,
  });
  let gone = false;
  req.on('close', () => (gone = true));
  const waitDrain = () => new Promise<void>((r) => {
    const done = () => { res.off('drain', done); res.off('close', done); r(); };
    res.on('drain', done);
    res.on('close', done);
  });
  if (format === 'jsonl') {
    for (const row of rows) {
      if (gone) return;
      if (!res.write(JSON.stringify(row) + '\n')) await waitDrain();
    }
    res.end();
    return;
  }
  const csv = stringify({ header: true, columns: TRACE_COLUMNS as unknown as string[], cast: { boolean: (b) => (b ? 'true' : 'false') } });
  csv.on('data', (chunk: Buffer) => {
    if (!res.write(chunk)) csv.pause();
  });
  res.on('drain', () => csv.resume());
  const ended = new Promise<void>((resolve, reject) => {
    csv.on('end', resolve);
    csv.on('error', reject);
  });
  for (const row of rows) {
    if (gone) break;
    if (!csv.write(row)) await new Promise<void>((r) => csv.once('drain', () => r()));
  }
  csv.end();
  await ended;
  res.end();
}
