// Self-contained exports: a file carries its workers (ids, URLs, formats, colours),
// the fault markers and where its rows stop being complete, in a `baton_context` record after
// the rows; opening it restores the same ids and colours, the markers, and charts over the whole
// file. Files from before the record still open, with distinct colours.
import { describe, expect, it } from 'vitest';
import { parse as parseCsvStrict } from 'csv-parse/sync';
import { parseTraceFile, renderTraceFile } from '../../renderer/src/store/trace-file.ts';
import { contextRecord, csvHeaderColumns } from '../../host/export-query.ts';
import { traceChunks } from '../../router/http/traces-endpoint.ts';
import { fileHost } from '../../renderer/src/host/file.ts';
import { chartEnd, fileSpan } from '../../renderer/src/views/ChartsView.tsx';
import { marksIn } from '../../renderer/src/store/faults.ts';
import type { FaultMark } from '../../host/contract.ts';
import { exportContext } from '../../renderer/src/store/export-context.ts';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { workerColor } from '../../renderer/src/store/colors.ts';
import type { TraceFileContext } from '../../host/contract.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import type { BatonEvent, WorkerInfo } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const T0 = 1_796_000_000_000;
const rowsOf = (events: BatonEvent[]): TraceRow[] => events.flatMap((e) => (e.type === 'attempt_ended' || e.type === 'request_finished' ? [e.row] : []));
const A = 'http://127.0.0.1:41001';
const B = 'http://127.0.0.1:41002';
const rows = [
  ...rowsOf(requestEvents('moved', T0, 50, [{ worker: A, tokens: 7, fails: true }, { worker: B, tokens: 13 }])),
  ...rowsOf(requestEvents('plain', T0 + 100, 9, [{ worker: B, tokens: 9 }])),
];

function worker(id: string, url: string, format: WorkerInfo['format']): WorkerInfo {
  return {
    id, url, health: 'healthy', circuit: 'closed', format, token_only: true, incremental: false, model_path: 'sim/model', weight_version: 'v1',
    in_flight: 0, simulated: true, sim_index: 0, draining: false,
  };
}

/** A page that saw two workers (one since removed), a kill and the router's verdict, and one request still running. */
function livePage() {
  const store = createDashStore();
  store.getState().loadSnapshot({
    routerUrl: 'http://127.0.0.1:30080', t: T0, workers: [worker('w3', A, 'sglang'), worker('w7', B, 'vllm')], rows, inflight: [], sim: null, traffic: null,
    faults: [
      { t: T0 + 20, kind: 'kill', worker: 'w3', url: A, source: 'dashboard', detail: null },
      { t: T0 + 40, kind: 'down', worker: 'w3', url: A, source: 'router', detail: 'dead' },
    ],
  }, T0 + 500);
  store.getState().ingest([{ type: 'worker_removed', t: T0 + 400, worker_id: 'w3' }]);
  store.getState().ingest(requestEvents('running', T0 + 300, 8, [{ worker: B, tokens: 2 }], { finish: false }));
  return store;
}

describe('self-contained exports', () => {
  it('the page\'s context names every worker it saw (removed ones too) with its id, format and colour, the markers, and the requests running', () => {
    const ctx = exportContext(livePage().getState(), T0 + 900);
    expect(ctx.workers.map((w) => [w.id, w.url, w.format, w.color])).toEqual([['w3', A, 'sglang', workerColor('w3')], ['w7', B, 'vllm', workerColor('w7')]]);
    expect(ctx.faults.map((m) => m.kind)).toEqual(['kill', 'down']);
    expect(ctx.inflight.map((e) => [e.type, 'request_id' in e ? e.request_id : ''])).toEqual([
      ['request_admitted', 'running'], ['attempt_started', 'running'], ['first_token', 'running'], ['progress', 'running'],
    ]);
    expect(ctx.inflight.at(-1)).toMatchObject({ tokens: 2, completion_tokens: 2 });
    // Filtered like the rows: another id prefix, or one outcome, leaves them out.
    expect(exportContext(livePage().getState(), T0 + 900, { requestPrefix: 'pla' }).inflight).toEqual([]);
    expect(exportContext(livePage().getState(), T0 + 900, { outcome: 'failed' }).inflight).toEqual([]);
    expect(exportContext(livePage().getState(), T0 + 900, { requestPrefix: 'RUN' }).inflight).toHaveLength(4);
    expect(ctx.exported_at).toBe(T0 + 900);
  });

  for (const format of ['jsonl', 'csv'] as const) {
    it(`a ${format} export from the router with the context appended opens with the same worker ids, colours and markers`, () => {
      const ctx = exportContext(livePage().getState(), T0 + 900);
      const body = [...traceChunks(rows, format, { iso: true })].join('');
      const text = body + contextRecord(ctx, format, csvHeaderColumns(body));
      const parsed = parseTraceFile(`x.${format}`, text);
      expect(parsed.rows).toEqual(rows);
      expect(parsed.skipped).toBe(0);
      expect(parsed.context).toEqual(ctx);
      const host = fileHost(`x.${format}`, text);
      const snap = host.snapshot();
      expect(snap.workers.map((w) => [w.id, w.url, w.format])).toEqual([['w3', A, 'sglang'], ['w7', B, 'vllm']]);
      expect(snap.faults).toEqual(ctx.faults);
      expect([...host.colors]).toEqual([['w3', workerColor('w3')], ['w7', workerColor('w7')]]);
      expect(snap.inflight).toEqual(ctx.inflight);
      expect(host.file.to).toBeGreaterThanOrEqual(ctx.inflight.at(-1)!.t);
      if (format === 'csv') {
        // Strict CSV readers take the context record: it has the header's width.
        const records = parseCsvStrict(text, { columns: true }) as Record<string, string>[];
        expect(records.at(-1)!.kind).toBe('baton_context');
        expect(JSON.parse(records.at(-1)!.request_id!)).toEqual(ctx);
      }
    });
  }

  it('a file opened offline writes its rows again with its own context, which reads back the same', () => {
    const ctx = exportContext(livePage().getState(), T0 + 900);
    for (const format of ['jsonl', 'csv'] as const) {
      const again = parseTraceFile(`y.${format}`, renderTraceFile(rows, format, ctx));
      expect(again.rows).toEqual(rows);
      expect(again.context).toEqual(ctx);
    }
  });

  it('the store of an opened file maps the rows\' URLs to the recorded ids and colours', () => {
    const ctx: TraceFileContext = { ...exportContext(livePage().getState(), T0 + 900) };
    ctx.workers = ctx.workers.map((w) => ({ ...w, color: w.id === 'w3' ? '#123456' : w.color }));
    const host = fileHost('x.jsonl', renderTraceFile(rows, 'jsonl', ctx));
    const store = createDashStore({ mode: 'file' });
    for (const [id, color] of host.colors) store.getState().model.workers.fileColors.set(id, color);
    store.getState().loadSnapshot(host.snapshot(), host.file.to);
    const { workers } = store.getState().model;
    expect(workers.label(A)).toBe('w3');
    expect(workers.colorOf(A)).toBe('#123456');
    expect(workers.colorOf(B)).toBe(workerColor('w7'));
    expect(store.getState().faults.map((m) => m.kind)).toEqual(['kill', 'down']);
    // The request running at the export is there, running, with its tokens charted up to the end.
    const running = store.getState().model.book.get('running')!;
    expect([running.status, running.completionTokens, running.attempts[0]!.worker]).toEqual(['running', 2, B]);
    const tokens = store.getState().model.series.points(host.file.to + 1000, 10, 1).reduce((n, p) => n + (p.tokensPerSec[B] ?? 0), 0);
    // B's tokens: 13 (moved, attempt 1) + 9 (plain) from rows, and 2 of the running request.
    expect(tokens).toBeCloseTo(13 + 9 + 2, 6);
  });

  it('a file from before the context record still opens, one worker per URL, each in its own colour', () => {
    // Two URLs whose ports pick the same palette slot: in order of appearance they differ.
    const C = 'http://127.0.0.1:41061';
    expect(workerColor(C)).toBe(workerColor(A));
    const old = [
      ...rowsOf(requestEvents('one', T0, 50, [{ worker: A, tokens: 7, fails: true }, { worker: C, tokens: 13 }])),
    ];
    const host = fileHost('old.jsonl', [...traceChunks(old, 'jsonl', { iso: true })].join(''));
    expect(host.context).toBeNull();
    expect(host.snapshot().workers.map((w) => w.url)).toEqual([A, C]);
    const colors = [...host.colors.values()];
    expect(new Set(colors).size).toBe(2);
    expect(host.snapshot().faults).toEqual([]);
  });

  it('a malformed context record is read for what is well-formed in it', () => {
    const text = [...traceChunks(rows, 'jsonl', {})].join('') + JSON.stringify({ kind: 'baton_context', workers: [{ id: 'w1' }, { id: 'w2', url: A, color: 'red' }], faults: [{ t: 'x' }, { t: 5, kind: 'kill' }] }) + '\n';
    const parsed = parseTraceFile('x.jsonl', text);
    expect(parsed.context!.workers).toEqual([{ id: 'w2', url: A, format: null, model_path: null, color: '' }]);
    expect(parsed.context!.faults).toEqual([{ t: 5, kind: 'kill', worker: null, url: null, source: 'router', detail: null }]);
  });

  it('charts span the whole file, in points that keep it under 120', () => {
    const file = { name: 'x', rows: 1, skipped: 0, from: T0, to: T0 + 600_000 };
    expect(fileSpan(file)).toEqual({ seconds: 600, step: 5, endMs: T0 + 600_000 });
    expect(fileSpan({ ...file, to: T0 + 8 * 3600_000 }).step).toBe(300);
  });

  it("a kill in a short file's last partial second is on the charts' axis", () => {
    // Rows from 39.626 s to an in-flight event at 40.734 s: one whole-second point, [39, 40).
    const file = { name: 'x', rows: 6, skipped: 0, from: 39_626, to: 40_734 };
    const { seconds, endMs } = fileSpan(file);
    const start = (Math.floor(endMs / 1000) - seconds) * 1000;
    const kill: FaultMark = { t: 40_198, kind: 'kill', worker: 'w0', url: null, source: 'dashboard', detail: null };
    expect(marksIn([kill], start, start + seconds * 1000)).toEqual([]);
    expect(marksIn([kill], start, chartEnd(start, seconds, endMs))).toEqual([kill]);
    // Live, the end is a whole second: the axis ends where the points do.
    expect(chartEnd(50_000, 60, 110_000)).toBe(110_000);
  });
});
