import { describe, expect, it } from 'vitest';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { visibleIds } from '../../renderer/src/store/filters.ts';
import { workerColor, WORKER_PALETTE } from '../../renderer/src/store/colors.ts';
import type { Snapshot } from '../../host/contract.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import type { WorkerInfo } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const worker = (id: string): WorkerInfo => ({
  id, url: `http://127.0.0.1:1${id.slice(1)}`, health: 'healthy', circuit: 'closed', format: 'sglang', token_only: true, incremental: false, model_path: null, weight_version: null,
  in_flight: 0, simulated: true, sim_index: Number(id.slice(1)), draining: false,
});

describe('dashboard store', () => {
  it('ingests a batch: requests, series, trace rows and workers, one version bump', () => {
    const store = createDashStore();
    const events = [
      { type: 'worker_state' as const, t: 0, worker: worker('w0') },
      ...requestEvents('r1', 1000, 20, [{ worker: 'w0', tokens: 7, fails: true }, { worker: 'w1', tokens: 13 }]),
    ];
    store.getState().ingest(events, 5000);
    const { model, version } = store.getState();
    expect(version).toBe(1);
    expect(model.book.get('r1')!.attempts).toHaveLength(2);
    expect(model.traces.size).toBe(3); // two attempt rows and the request row
    expect(model.workers.list().map((w) => w.id)).toEqual(['w0']);
    expect(model.series.totals.migrations).toBe(1);
  });

  it('catches up from a snapshot: finished rows, migrations re-derived, in-flight events replayed', () => {
    const live = requestEvents('live', 2000, 50, [{ worker: 'w2', tokens: 4 }], { finish: false });
    const done = requestEvents('done', 1000, 20, [{ worker: 'w0', tokens: 7, fails: true }, { worker: 'w1', tokens: 13 }]);
    const rows = done.flatMap((e) => (e.type === 'attempt_ended' || e.type === 'request_finished' ? [e.row as TraceRow] : []));
    const snapshot: Snapshot = { routerUrl: 'http://127.0.0.1:9', t: 3000, workers: [worker('w0'), worker('w1')], rows, inflight: live, sim: null, traffic: null };
    const store = createDashStore();
    store.getState().loadSnapshot(snapshot, 3000);
    const { model, connection, routerUrl } = store.getState();
    expect(connection.status).toBe('live');
    expect(routerUrl).toBe('http://127.0.0.1:9');
    const r = model.book.get('done')!;
    expect(r.migrations).toEqual([expect.objectContaining({ fromWorker: 'w0', toWorker: 'w1', atToken: 7 })]);
    expect(r.attempts.map((a) => a.tokens)).toEqual([7, 13]);
    expect(model.book.get('live')).toMatchObject({ status: 'running', completionTokens: 4 });
    expect(model.series.totals.migrations).toBe(1);
    // A request known only from its rows is charted when it started, with its first token's TTFT.
    const second1 = model.series.points(3000, 2, 1)[0]!;
    expect(second1.t).toBe(1000);
    expect(second1.ttftP50).toBe(5);
    expect(second1.requestsPerSec).toBe(1);
    // The live stream repeating what the snapshot held changes no counter.
    store.getState().ingest([...done, ...live], 3100);
    expect(model.series.totals).toEqual({ migrations: 1, failures: 0, finished: 1 });
    expect(model.traces.size).toBe(3);
  });

  it('filters the list: migrated, failed, not admitted, worker, id search; newest first', () => {
    const store = createDashStore();
    store.getState().ingest([
      ...requestEvents('ok-1', 0, 5, [{ worker: 'w0', tokens: 5 }]),
      ...requestEvents('moved-2', 1, 9, [{ worker: 'w0', tokens: 4, fails: true }, { worker: 'w1', tokens: 5 }]),
      ...requestEvents('lost-3', 2, 9, [{ worker: 'w2', tokens: 4, fails: true }], { admitted: false, reason: 'sampling_seed' }),
    ]);
    const { book } = store.getState().model;
    const ids = (f: Partial<Parameters<typeof visibleIds>[2]>) =>
      visibleIds(book.ids(), (id) => book.get(id), { migrated: false, failed: false, notAdmitted: false, worker: null, search: '', ...f });
    expect(ids({})).toEqual(['lost-3', 'moved-2', 'ok-1']);
    expect(ids({ migrated: true })).toEqual(['moved-2']);
    expect(ids({ failed: true })).toEqual(['lost-3']);
    expect(ids({ notAdmitted: true })).toEqual(['lost-3']);
    expect(ids({ worker: 'w1' })).toEqual(['moved-2']);
    expect(ids({ search: 'OK' })).toEqual(['ok-1']);
  });

  it('selecting a request moves the keyboard cursor to it', () => {
    const store = createDashStore();
    store.getState().select('r9');
    expect(store.getState()).toMatchObject({ selected: 'r9', cursor: 'r9' });
    store.getState().select(null);
    expect(store.getState()).toMatchObject({ selected: null, cursor: 'r9' });
  });
});

describe('worker colours', () => {
  it('are a function of the id: stable, and distinct for the first workers', () => {
    expect(workerColor('w1')).toBe(workerColor('w1'));
    const first = ['w0', 'w1', 'w2', 'w3', 'w4'].map(workerColor);
    expect(new Set(first).size).toBe(5);
    expect(WORKER_PALETTE).toContain(workerColor('gpu-a'));
  });
});
