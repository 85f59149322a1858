// Incidents stay in view and figures are true: fault markers and "since the last fault", the
// hatched stall of an attempt, id-prefix search, the router's own figures replacing the page's,
// a frozen picture when the host is lost, and a reset when another router answers.
import { describe, expect, it } from 'vitest';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { NO_FILTERS, idMatches, visibleIds } from '../../renderer/src/store/filters.ts';
import { groupMarks, lastFault } from '../../renderer/src/store/faults.ts';
import { stalledFrom, type AttemptView } from '../../renderer/src/store/request-view.ts';
import type { FaultMark, LiveState, Snapshot } from '../../host/contract.ts';
import type { RouterStats, WorkerInfo } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const mark = (t: number, kind: FaultMark['kind'], source: FaultMark['source'] = 'dashboard'): FaultMark => ({ t, kind, worker: 'w1', url: 'http://w1', source, detail: kind === 'down' ? 'dead' : null });
const worker = (id: string, in_flight: number, circuit: WorkerInfo['circuit'] = 'closed'): WorkerInfo => ({
  id, url: `http://${id}`, health: 'healthy', circuit, format: 'sglang', token_only: true, incremental: false, model_path: 'm', weight_version: 'v1',
  in_flight, simulated: false, sim_index: null, draining: false,
});
const stats = (instance: string, workers: WorkerInfo[], migrations = 0): RouterStats => ({
  instance, started_at: 1000, t: 5000, workers,
  totals: { requests: 10, finished: 9, failed: 1, cancelled: 0, migrations, attempts_started: 12, tokens: 500, in_flight: 3 },
});
const live = (router: RouterStats, faults: FaultMark[] = []): LiveState => ({ t: 5000, router, faults, sim: null, probes: [] });
const snapshot = (extra: Partial<Snapshot> = {}): Snapshot => ({ routerUrl: 'http://r', t: 5000, workers: [], rows: [], inflight: [], sim: null, traffic: null, ...extra });

describe('fault markers', () => {
  it('finds when the last incident began, skipping marks that end one (restart, clear, undrain)', () => {
    // A kill and the router noticing it are one incident: it began with the kill.
    expect(lastFault([mark(1000, 'kill'), mark(1010, 'down', 'router'), mark(1500, 'restart')])?.kind).toBe('kill');
    // An earlier fault long before is another incident.
    expect(lastFault([mark(1000, 'hang'), mark(9000, 'drain'), mark(9005, 'down', 'router')])?.t).toBe(9000);
    expect(lastFault([mark(1, 'restart')])).toBeNull();
  });

  it('draws marks that land together as one (a kill and the router noticing it)', () => {
    const groups = groupMarks([mark(100, 'kill'), mark(110, 'down', 'router'), mark(5000, 'drain')], 50);
    expect(groups.map((g) => [g.t, g.label, g.source])).toEqual([[100, 'kill w1 · w1 dead', 'dashboard'], [5000, 'drain w1', 'dashboard']]);
  });

  it('filters requests to those alive at or after the last fault', () => {
    const store = createDashStore();
    store.getState().ingest([...requestEvents('before', 0, 5, [{ worker: 'w0', tokens: 5 }]), ...requestEvents('after', 100, 5, [{ worker: 'w0', tokens: 5 }]), ...requestEvents('running', 50, 50, [{ worker: 'w0', tokens: 5 }], { finish: false })]);
    const { book } = store.getState().model;
    const ids = (sinceFault: boolean, at: number | null) => visibleIds(book.ids(), (id) => book.get(id), { ...NO_FILTERS, sinceFault }, at);
    expect(ids(true, 90)).toEqual(['running', 'after']);
    expect(ids(false, 90)).toEqual(['running', 'after', 'before']);
    expect(ids(true, null)).toEqual(['running', 'after', 'before']);
  });
});

describe('id search', () => {
  it('matches a case-insensitive prefix, the same rule everywhere', () => {
    expect(idMatches('3fa9c0', '3FA')).toBe(true);
    expect(idMatches('3fa9c0', 'a9c')).toBe(false);
    expect(idMatches('anything', '  ')).toBe(true);
  });
});

describe('stalls', () => {
  const attempt = (a: Partial<AttemptView>): AttemptView => ({
    attempt: 0, rid: 'r', worker: 'w', startedAt: 0, endedAt: null, ttftMs: 5, replayed: 0, tokens: 10, budgetBefore: 100, budgetAfter: null,
    outcome: 'running', errorKind: null, error: null, finishReason: null, lastTokenAt: 500, row: null, ...a,
  });

  it('hatches a running attempt from its last token once it has waited more than a second', () => {
    expect(stalledFrom(attempt({}), 1200)).toBeNull();
    expect(stalledFrom(attempt({}), 1600)).toBe(500);
  });

  it('takes a stall that ended an attempt from the router\'s deadline, not the page\'s timing', () => {
    const row = { error_evidence: 'inter-token deadline: nothing for 30000 ms after 42 reads' } as AttemptView['row'];
    expect(stalledFrom(attempt({ endedAt: 40_000, outcome: 'failed', errorKind: 'stalled', lastTokenAt: null, row }), 50_000)).toBe(10_000);
    expect(stalledFrom(attempt({ endedAt: 2000, outcome: 'failed', errorKind: 'first_token_timeout', tokens: 0, ttftMs: null, lastTokenAt: null }), 3000)).toBe(0);
  });

  it('never hatches a finished attempt, nor a kill noticed at once', () => {
    expect(stalledFrom(attempt({ endedAt: 9000, outcome: 'finished' }), 9000)).toBeNull();
    expect(stalledFrom(attempt({ endedAt: 600, outcome: 'failed', errorKind: 'stream_broken' }), 9000)).toBeNull();
  });

  it('learns the last token from progress events', () => {
    const store = createDashStore();
    store.getState().ingest(requestEvents('r', 0, 50, [{ worker: 'w0', tokens: 3 }], { finish: false }));
    const a = store.getState().model.book.get('r')!.attempts[0]!;
    expect(a.lastTokenAt).toBe(8);
    expect(stalledFrom(a, 2000)).toBe(8);
  });
});

describe('figures from the router', () => {
  it('replaces the page\'s worker figures with the router\'s (in flight, circuit) and keeps its totals', () => {
    const store = createDashStore();
    store.getState().loadSnapshot(snapshot({ workers: [worker('w0', 1)], router: stats('A', [worker('w0', 1)]) }), 5000);
    expect(store.getState().applyLive(live(stats('A', [worker('w0', 50, 'half_open')], 58), [mark(4000, 'kill')]))).toBe(true);
    const s = store.getState();
    expect(s.model.workers.byId.get('w0')).toMatchObject({ in_flight: 50, circuit: 'half_open' });
    expect(s.router?.totals.migrations).toBe(58);
    expect(s.lastFaultAt()).toBe(4000);
  });

  it('says another router answered and starts over: no request of the old one stays in flight', () => {
    const store = createDashStore();
    store.getState().loadSnapshot(snapshot({ router: stats('A', []) }), 5000);
    store.getState().ingest(requestEvents('old', 100, 50, [{ worker: 'w0', tokens: 3 }], { finish: false }), 5100);
    expect(store.getState().model.book.running).toBe(1);
    expect(store.getState().applyLive(live(stats('B', [])))).toBe(false);
    store.getState().loadSnapshot(snapshot({ router: stats('B', []) }), 6000);
    const s = store.getState();
    expect(s.model.book.size).toBe(0);
    expect(s.router?.instance).toBe('B');
    expect(s.notice).toMatch(/Another router answered/);
  });

  it('freezes the clock and the workers while the host is lost, and resumes on the next snapshot', () => {
    const store = createDashStore();
    store.getState().loadSnapshot(snapshot({ workers: [worker('w0', 4)], router: stats('A', [worker('w0', 4)]) }), 5000);
    store.getState().tick(6000);
    store.getState().setConnection({ status: 'lost', message: 'gone' });
    expect(store.getState().frozenAt).toBe(6000);
    store.getState().tick(9000);
    store.getState().ingest(requestEvents('late', 8000, 5, [{ worker: 'w0', tokens: 1 }], { finish: false }), 9000);
    expect(store.getState().now).toBe(6000);
    store.getState().applyLive(live(stats('A', [worker('w0', 99)])));
    expect(store.getState().model.workers.byId.get('w0')!.in_flight).toBe(4);
    store.getState().loadSnapshot(snapshot({ router: stats('A', []) }), 10_000);
    expect(store.getState()).toMatchObject({ frozenAt: null, now: 10_000, connection: { status: 'live' } });
  });

  it('marks requests that ended while the page was away as lost, keeping those still in flight', () => {
    const store = createDashStore();
    const gone = requestEvents('gone', 0, 50, [{ worker: 'w0', tokens: 3 }], { finish: false });
    const still = requestEvents('still', 0, 50, [{ worker: 'w0', tokens: 3 }], { finish: false });
    store.getState().ingest([...gone, ...still], 100);
    store.getState().setConnection({ status: 'lost', message: null });
    store.getState().loadSnapshot(snapshot({ inflight: still }), 2000);
    const { book } = store.getState().model;
    expect(book.get('gone')!.status).toBe('lost');
    expect(book.get('still')!.status).toBe('running');
  });

  it('keeps the chosen windows and theme across views and reloads', () => {
    const mem = new Map<string, string>();
    const storage = { getItem: (k: string) => mem.get(k) ?? null, setItem: (k: string, v: string) => void mem.set(k, v) };
    const a = createDashStore({ storage });
    expect(a.getState().requestWindow).toBe(15_000);
    a.getState().setRequestWindow(60_000);
    a.getState().setView('charts');
    a.getState().setView('live');
    expect(a.getState().requestWindow).toBe(60_000);
    a.getState().setChartWindow(2);
    a.getState().setTheme('dark');
    const b = createDashStore({ storage });
    expect(b.getState()).toMatchObject({ requestWindow: 60_000, chartWindow: 2, theme: 'dark' });
  });
});
