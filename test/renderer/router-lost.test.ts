// Behind a dashboard hub, a router that dies takes its clients' streams with it: the hub lists
// those requests in `owner_lost`. The page ends them as `router_lost` (failed, counted in FAILED
// beside the routers' own totals), flags the router's loss on the axis, and draws an incident of
// its own with the requests it cut, without blaming their workers.
import { describe, expect, it } from 'vitest';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { deriveIncidents, incidentOfMark, incidentSummary } from '../../renderer/src/store/incidents.ts';
import { clientFailure } from '../../renderer/src/store/failure-reason.ts';
import { lastFault } from '../../renderer/src/store/faults.ts';
import type { HubState, LiveState, RouterLinkStatus, Snapshot } from '../../host/contract.ts';
import type { RouterStats } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const link = (label: string, state: RouterLinkStatus['state'], last_seen: number): RouterLinkStatus => ({
  label, url: `http://127.0.0.1:90${label.slice(1)}`, state, instance: `i-${label}`, replica: null, epoch: 1, seq: 10, last_seen,
  offset_ms: 0, rtt_ms: 1, events: 10, gaps: 0, reconnects: 0, requests: 0, error: state === 'lost' ? 'connection refused' : null,
});
const hubStats = (failed: number): RouterStats => ({
  instance: 'hub', started_at: 1000, t: 5000, workers: [],
  totals: { requests: 10, finished: 10 - failed, failed, cancelled: 0, migrations: 0, attempts_started: 10, tokens: 100, in_flight: 3 },
});
const hub = (r1: RouterLinkStatus['state'], owner_lost: string[]): HubState => ({ routers: [link('r0', 'connected', 5000), link('r1', r1, 2100)], workers: [], owner_lost });
const live = (h: HubState, failed = 1): LiveState => ({ t: 5000, router: hubStats(failed), faults: [], sim: null, probes: [], hub: h });

/** Two requests running at r1 and one at r0, one finished at r1. */
function running() {
  const store = createDashStore();
  store.getState().ingest([
    ...requestEvents('r1/a', 1000, 64, [{ worker: 'http://w0', tokens: 4 }], { finish: false }),
    ...requestEvents('r1/b', 1100, 64, [{ worker: 'http://w1', tokens: 3 }], { finish: false }),
    ...requestEvents('r0/c', 1200, 64, [{ worker: 'http://w0', tokens: 2 }], { finish: false }),
    ...requestEvents('r1/d', 900, 64, [{ worker: 'http://w1', tokens: 2 }]),
  ], 2000);
  store.getState().tick(5000);
  return store;
}

describe('a router lost behind the hub', () => {
  it('ends the requests it took with it as router lost, failed, their attempts cut where the router was last heard', () => {
    const store = running();
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b'])));
    const { book } = store.getState().model;
    for (const id of ['r1/a', 'r1/b']) {
      const r = book.get(id)!;
      expect(r.status).toBe('failed');
      expect(r.endedAt).toBe(2100);
      expect(clientFailure(r)?.type).toBe('router_lost');
      expect(r.attempts.map((a) => [a.outcome, a.endedAt, a.errorKind])).toEqual([['failed', 2100, null]]);
    }
    // The other router's request runs on; the one that finished stays finished.
    expect(book.get('r0/c')!.status).toBe('running');
    expect(book.get('r1/d')!.status).toBe('finished');
    expect(book.running).toBe(1);
  });

  it('counts them in FAILED beside the routers\' own totals, and in the page\'s failure series', () => {
    const store = running();
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b']), 1));
    expect(store.getState().routerLost).toBe(2);
    expect(store.getState().model.series.totals.failures).toBe(2);
    // The next poll lists them again: nothing is counted twice.
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b']), 1));
    expect(store.getState().routerLost).toBe(2);
    expect(store.getState().model.series.totals.failures).toBe(2);
  });

  it('flags the router\'s loss on the axis, as a fault that "since the last fault" counts from', () => {
    const store = running();
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b'])));
    const flags = store.getState().faults.filter((m) => m.kind === 'router_lost');
    expect(flags).toHaveLength(1);
    expect(flags[0]).toMatchObject({ t: 2100, worker: 'r1', url: 'http://127.0.0.1:901', detail: '2 requests cut' });
    expect(lastFault(store.getState().faults)?.kind).toBe('router_lost');
    // The host's marks of the next poll do not wash it away.
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b'])));
    expect(store.getState().faults.filter((m) => m.kind === 'router_lost')).toHaveLength(1);
  });

  it('draws an incident of its own with the requests it cut, the flag belonging to it, and no worker blamed', () => {
    const store = running();
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b'])));
    const { traces } = store.getState().model;
    const incidents = deriveIncidents(traces.all(), store.getState().faults);
    expect(incidents).toHaveLength(1);
    const i = incidents[0]!;
    expect(i).toMatchObject({ workerId: 'r1', worker: 'http://127.0.0.1:901', start: 2100, cause: 'router r1 lost', broken: 2, failed: 2, migrated: 0, open: 0, severity: 'minor' });
    expect(i.requestIds).toEqual(['r1/a', 'r1/b']);
    expect(incidentSummary(i)).toBe('2 broken · 0 migrated · 2 failed: router lost');
    const flag = store.getState().faults.find((m) => m.kind === 'router_lost')!;
    expect(incidentOfMark(incidents, flag)?.id).toBe(i.id);
    // No attempt row blames w0 or w1: the workers were not at fault.
    expect(traces.all().filter((r) => r.kind === 'attempt' && r.outcome === 'failed')).toEqual([]);
  });

  it('does the same for a page that opens after the loss (the snapshot\'s hub state), once', () => {
    const store = createDashStore();
    const inflight = [
      ...requestEvents('r1/a', 1000, 64, [{ worker: 'http://w0', tokens: 4 }], { finish: false }),
      ...requestEvents('r0/c', 1200, 64, [{ worker: 'http://w0', tokens: 2 }], { finish: false }),
    ];
    const snap: Snapshot = { routerUrl: 'http://hub', t: 5000, workers: [], rows: [], inflight, sim: null, traffic: null, router: hubStats(0), faults: [], hub: hub('lost', ['r1/a']) };
    store.getState().loadSnapshot(snap, 5000);
    expect(store.getState().model.book.get('r1/a')!.status).toBe('failed');
    expect(store.getState().model.book.get('r0/c')!.status).toBe('running');
    expect(store.getState().routerLost).toBe(1);
    store.getState().loadSnapshot(snap, 6000);
    expect(store.getState().routerLost).toBe(1);
    expect(store.getState().faults.filter((m) => m.kind === 'router_lost')).toHaveLength(1);
  });

  it('joins a later loss of the same router within the quiet time to its flag', () => {
    const store = running();
    store.getState().applyLive(live(hub('lost', ['r1/a'])));
    store.getState().applyLive(live(hub('lost', ['r1/a', 'r1/b'])));
    const flags = store.getState().faults.filter((m) => m.kind === 'router_lost');
    expect(flags.map((m) => [m.t, m.detail])).toEqual([[2100, '2 requests cut']]);
    const incidents = deriveIncidents(store.getState().model.traces.all(), store.getState().faults);
    expect(incidents.map((i) => i.requestIds)).toEqual([['r1/a', 'r1/b']]);
  });

  it('changes nothing without a hub, or while the hub lists no request lost', () => {
    const store = running();
    store.getState().applyLive(live(hub('connected', [])));
    expect(store.getState().model.book.running).toBe(3);
    expect(store.getState().routerLost).toBe(0);
    expect(store.getState().faults).toEqual([]);
  });
});
