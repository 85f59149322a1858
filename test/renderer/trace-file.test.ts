// Trace files read in the page (baton view, a dropped file): JSON Lines and CSV as the router
// exports them, with or without ISO columns; blank and broken lines counted, not fatal; a file's
// rows written again read back the same.
import { describe, expect, it } from 'vitest';
import { stringify } from 'csv-stringify/sync';
import { csvRecords, parseCsv, parseJsonl, parseTraceFile, renderTraceFile } from '../../renderer/src/store/trace-file.ts';
import { TRACE_COLUMNS } from '../../router/trace/columns.ts';
import { traceChunks } from '../../router/http/traces-endpoint.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const rowsOf = (events: BatonEvent[]): TraceRow[] => events.flatMap((e) => (e.type === 'attempt_ended' || e.type === 'request_finished' ? [e.row] : []));
const rows = [
  ...rowsOf(requestEvents('moved', 1_796_000_000_000, 50, [{ worker: 'http://127.0.0.1:1', tokens: 7, fails: true }, { worker: 'http://127.0.0.1:2', tokens: 13 }])),
  ...rowsOf(requestEvents('plain', 1_796_000_000_100, 9, [{ worker: 'http://127.0.0.1:2', tokens: 9 }], { admitted: false, reason: 'sampling_seed' })),
];
// An error with a comma, a quote and a newline; an empty string (quoted) next to nulls.
(rows[0] as { error: string }).error = 'UND_ERR_SOCKET: "other side", closed\nmid-body';
(rows[1] as { finish_reason: string }).finish_reason = '';

describe('trace files', () => {
  it('reads the router\'s JSON Lines export, plain and with ISO times', () => {
    for (const iso of [false, true]) {
      const text = [...traceChunks(rows, 'jsonl', { iso })].join('');
      const parsed = parseTraceFile('x.jsonl', text);
      expect(parsed).toMatchObject({ skipped: 0, format: 'jsonl' });
      expect(parsed.rows).toEqual(rows);
    }
  });

  it('reads the router\'s CSV export back to the same rows, plain and with ISO columns', () => {
    for (const iso of [false, true]) {
      const text = [...traceChunks(rows, 'csv', { iso })].join('');
      const parsed = parseTraceFile('x.csv', text);
      expect(parsed.skipped).toBe(0);
      expect(parsed.rows).toEqual(rows);
    }
  });

  it('a P/D attempt keeps its legs and room through CSV; other rows do not gain those columns', () => {
    const pd = { ...rows[0]!, prefill_worker: 'http://127.0.0.1:9', decode_worker: 'http://127.0.0.1:1', bootstrap_room: '9223372036854775807', failed_leg: 'decode' } as TraceRow;
    const mixed = [pd, ...rows.slice(1)];
    const parsed = parseTraceFile('x.csv', [...traceChunks(mixed, 'csv', { iso: false })].join(''));
    expect(parsed.rows).toEqual(mixed);
  });

  it('counts lines that are not rows instead of failing, and says what the first was', () => {
    const text = `${JSON.stringify(rows[0])}\n\nnot json\n{"kind":"span"}\n${JSON.stringify(rows[1])}\n`;
    const parsed = parseJsonl(text);
    expect(parsed.rows).toHaveLength(2);
    expect(parsed.skipped).toBe(2);
    expect(parsed.firstError).toBe('line 3: not JSON');
  });

  it('refuses a CSV without the trace-row header', () => {
    expect(parseCsv('a,b\n1,2\n')).toMatchObject({ rows: [], firstError: expect.stringContaining('header') });
  });

  it('splits CSV records as RFC 4180 says, telling quoted empty fields from missing ones', () => {
    const text = stringify([['a', '', null, 'x,"y"\nz']], { cast: { string: (s: string) => (s === '' ? { value: '', quoted_empty: true } : s) } });
    expect(csvRecords(text)).toEqual([[
      { value: 'a', quoted: false }, { value: '', quoted: true }, { value: '', quoted: false }, { value: 'x,"y"\nz', quoted: true },
    ]]);
  });

  it('writes rows again (offline export) in a form that reads back the same, ISO times included', () => {
    for (const format of ['jsonl', 'csv'] as const) {
      const text = renderTraceFile(rows, format);
      expect(parseTraceFile(`again.${format}`, text).rows).toEqual(rows);
      expect(text).toContain('started_at_iso');
      expect(text).toContain(new Date(rows[0]!.started_at).toISOString());
    }
  });

  it('keeps columns it does not know (a newer router\'s fields)', () => {
    const row = { ...rows[4]!, format: 'vllm' } as Record<string, unknown>;
    const text = stringify([row], { header: true, columns: [...TRACE_COLUMNS, 'format'] });
    const parsed = parseCsv(text);
    expect(parsed.rows[0]).toMatchObject({ kind: 'request', request_id: 'plain', completion_tokens: 9, format: 'vllm' });
  });
});
