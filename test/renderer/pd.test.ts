// P/D in the dashboard (docs/pd.md): a failed prefill leg is its prefill server's (its incident
// counts the attempt, the decode worker has none, the fault dates from the broken attempt), a
// running attempt names its prefill server from its start, a prefill server's own load is the
// attempts whose prefill leg is on it, and a role with no healthy server left is said.
import { describe, expect, it } from 'vitest';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { deriveIncidents, incidentSummary } from '../../renderer/src/store/incidents.ts';
import { pdShortage, prefillLoad } from '../../renderer/src/store/pd.ts';
import { exportContext } from '../../renderer/src/store/export-context.ts';
import { clientFailure, failedBadgeText } from '../../renderer/src/store/failure-reason.ts';
import type { FaultMark } from '../../host/contract.ts';
import type { WorkerInfo } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const T0 = 1_796_000_000_000;
const P0 = 'http://127.0.0.1:42001';
const P1 = 'http://127.0.0.1:42002';
const D0 = 'http://127.0.0.1:42101';
const D1 = 'http://127.0.0.1:42102';

function worker(id: string, url: string, role: 'prefill' | 'decode', health: WorkerInfo['health'] = 'healthy'): WorkerInfo {
  return {
    id, url, health, circuit: 'closed', format: 'sglang', token_only: true, incremental: false, model_path: 'sim/model', weight_version: 'v1',
    in_flight: 0, simulated: true, sim_index: 0, draining: false, pd_role: role,
  };
}

/** A page on a P/D cluster whose prefill server P0 was killed: two attempts failed `prefill_failed` on it and moved to P1. */
function killedPrefill() {
  const store = createDashStore();
  const s = store.getState();
  s.loadSnapshot({
    routerUrl: 'http://127.0.0.1:30080', t: T0, workers: [worker('p0', P0, 'prefill'), worker('p1', P1, 'prefill'), worker('d0', D0, 'decode'), worker('d1', D1, 'decode')],
    rows: [], inflight: [], sim: null, traffic: null, faults: [],
  }, T0);
  s.ingest([
    ...requestEvents('a', T0, 40, [{ worker: D0, prefill: P0, tokens: 0, fails: true, failedLeg: 'prefill' }, { worker: D0, prefill: P1, tokens: 12 }]),
    ...requestEvents('b', T0 + 2, 40, [{ worker: D1, prefill: P0, tokens: 0, fails: true, failedLeg: 'prefill' }, { worker: D1, prefill: P1, tokens: 12 }]),
  ], T0 + 100);
  // The health check benches P0 five seconds after the first broken attempt.
  const down: FaultMark = { t: T0 + 5000, kind: 'down', worker: 'p0', url: P0, source: 'router', detail: 'benched' };
  s.applyLive({ t: T0 + 5000, router: null, faults: [down], sim: null, probes: [] });
  return store;
}

describe('P/D: a failed prefill leg', () => {
  it('is counted on its prefill server: the incident holds its broken and migrated attempts, the decode workers have none', () => {
    const s = killedPrefill().getState();
    const incidents = deriveIncidents(s.model.traces.all(), s.faults);
    expect(incidents.map((i) => i.worker)).toEqual([P0]);
    expect(incidents[0]).toMatchObject({ broken: 2, migrated: 2, failed: 0, cause: 'prefill_failed' });
    expect(incidents[0]!.requestIds).toEqual(['a', 'b']);
    expect(incidentSummary(incidents[0]!)).toBe('2 broken · 2 migrated · 0 failed');
  });

  it('dates the last fault from the first broken attempt, not the health check after it', () => {
    const s = killedPrefill().getState();
    const first = s.model.book.get('a')!.attempts[0]!.endedAt!;
    expect(first).toBeLessThan(T0 + 5000);
    expect(s.lastFaultAt()).toBe(first);
  });
});

describe('P/D: roles and load', () => {
  it('a running attempt names its prefill server from its start, and a prefill server carries its own load', () => {
    const store = createDashStore();
    store.getState().ingest([
      ...requestEvents('run-1', T0, 40, [{ worker: D0, prefill: P0, tokens: 3 }], { finish: false }),
      ...requestEvents('run-2', T0, 40, [{ worker: D1, prefill: P0, tokens: 3 }], { finish: false }),
      ...requestEvents('done', T0, 40, [{ worker: D0, prefill: P1, tokens: 3 }]),
    ], T0 + 50);
    const { book } = store.getState().model;
    expect(book.get('run-1')!.attempts[0]).toMatchObject({ outcome: 'running', prefillWorker: P0, worker: D0 });
    const load = prefillLoad(book.byId.values(), T0 + 50);
    expect(load.get(P0)).toEqual({ inFlight: 2, recent: 2 });
    expect(load.get(P1)).toEqual({ inFlight: 0, recent: 1 });
    // The decode workers are not prefill servers.
    expect(load.has(D0)).toBe(false);
    // An export's in-flight events keep the prefill server, so the file shows the leg too.
    const started = exportContext(store.getState(), T0 + 60).inflight.find((e) => e.type === 'attempt_started' && e.request_id === 'run-1');
    expect(started).toMatchObject({ prefill_worker: P0 });
  });

  it('says when no healthy prefill (or decode) server is left', () => {
    const healthy = [worker('p0', P0, 'prefill'), worker('p1', P1, 'prefill'), worker('d0', D0, 'decode')];
    expect(pdShortage(healthy)).toEqual([]);
    expect(pdShortage([worker('p0', P0, 'prefill', 'dead'), worker('p1', P1, 'prefill', 'unhealthy'), worker('d0', D0, 'decode')])).toEqual([
      { role: 'prefill', workers: 'p0 dead, p1 unhealthy' },
    ]);
    expect(pdShortage([worker('p0', P0, 'prefill'), { ...worker('d0', D0, 'decode'), draining: true }])).toEqual([{ role: 'decode', workers: 'd0 draining' }]);
    // Aggregated workers have no role: nothing to say.
    expect(pdShortage([{ id: 'w0', health: 'dead', draining: false }])).toEqual([]);
  });
});

describe('P/D: a failed request whose row words no client error', () => {
  it('reads its last attempt\'s error kind, not "failed: failed"', () => {
    const store = createDashStore();
    const events = requestEvents('x', T0, 40, [{ worker: D0, prefill: P0, tokens: 0, fails: true, failedLeg: 'prefill' }]);
    for (const e of events) if (e.type === 'request_finished') e.row = { ...e.row, client_error: null, client_status: null, error: null };
    store.getState().ingest(events, T0 + 100);
    const f = clientFailure(store.getState().model.book.get('x')!)!;
    expect(f.type).toBe('prefill_failed');
    expect(failedBadgeText(f)).toBe('failed: prefill_failed');
    // Nothing known at all: the badge says "failed" once.
    expect(failedBadgeText({ type: 'failed', text: 'failed (the router recorded no reason)', status: null })).toBe('failed');
    // The prefill server's incident counts it by the same words.
    const [inc] = deriveIncidents(store.getState().model.traces.all(), []);
    expect(incidentSummary(inc!)).toBe('1 broken · 0 migrated · 1 failed: prefill failed');
  });
});
