// The host's side of the dashboard's live figures and incidents: fault markers every page sees,
// the router's figures polled through /api/live, a request's rows and body by id, snapshots that
// keep older migrated and failed requests, and the probe error of an unhealthy worker.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import { FaultLog } from '../../host/fault-log.ts';
import { ProbeNotes, probeHealth } from '../../host/probe-notes.ts';
import { snapshotRows } from '../../host/actions.ts';
import { TrafficGenerator } from '../../host/traffic.ts';
import type { SimClusterLike } from '../../host/sim-control.ts';
import type { LiveState, Snapshot } from '../../host/contract.ts';
import type { RouterStats, WorkerInfo } from '../../router/events/types.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import { startFakeRouter, type FakeRouter } from './fake-router.ts';

const json = { 'content-type': 'application/json' };
const info = (id: string, health: WorkerInfo['health']): WorkerInfo => ({
  id, url: `http://127.0.0.1:1${id.slice(1)}`, health, circuit: 'closed', format: 'sglang', token_only: true, incremental: false, model_path: null, weight_version: null,
  in_flight: 0, simulated: false, sim_index: null, draining: false,
});

describe('FaultLog', () => {
  it('records actions, and a worker the router reports going down (once per transition)', () => {
    let now = 100;
    const log = new FaultLog(3, () => now);
    log.record('kill', 'w1', 'http://w1');
    log.observe({ type: 'worker_state', t: 101, worker: info('w1', 'healthy') });
    log.observe({ type: 'worker_state', t: 102, worker: info('w1', 'dead') });
    log.observe({ type: 'worker_state', t: 103, worker: info('w1', 'circuit_open') });
    log.observe({ type: 'worker_state', t: 104, worker: info('w2', 'dead') }); // first sight: not a transition
    now = 200;
    log.record('restart', 'w1', null);
    expect(log.list().map((m) => [m.t, m.kind, m.source, m.detail])).toEqual([[100, 'kill', 'dashboard', null], [102, 'down', 'router', 'dead'], [200, 'restart', 'dashboard', null]]);
    log.record('drain', 'w2', null);
    expect(log.list()).toHaveLength(3);
    // An action stamped before a mark already recorded takes its place in time.
    log.record('hang', 'w0', null, 'dashboard', null, 150);
    expect(log.list().map((m) => m.t)).toEqual([150, 200, 200]);
  });
  it("marks a worker down at the router's first blame (benched), with what the router read, then the health check's verdict", () => {
    const log = new FaultLog(10, () => 0);
    const w1 = info('w1', 'healthy');
    const attempt = (t: number, kind: string | null, evidence: string | null) => ({
      type: 'attempt_ended' as const, t,
      row: { kind: 'attempt', request_id: `r${t}`, attempt: 0, worker: w1.url, ended_at: t, outcome: kind ? 'failed' : 'finished', error_kind: kind, error: 'ERR_WORKER_CLOSED', error_evidence: evidence } as never,
    });
    log.observe({ type: 'worker_state', t: 1000, worker: w1 });
    log.observe(attempt(1500, null, null));
    // A kill -9 outside the dashboard: the first broken stream benches the worker, then its row is written.
    log.observe({ type: 'worker_state', t: 2000, worker: { ...w1, health: 'benched' } });
    expect(log.list().map((m) => [m.t, m.kind, m.detail, m.evidence])).toEqual([[2000, 'down', 'benched', null]]);
    log.observe(attempt(2001, 'stream_broken', 'transport error ERR_WORKER_CLOSED after the response started'));
    log.observe({ type: 'worker_state', t: 2002, worker: { ...w1, health: 'benched' } }); // the next broken stream: the same incident
    log.observe(attempt(2003, 'stream_broken', 'something later'));
    expect(log.list()).toHaveLength(1);
    expect(log.list()[0]!.evidence).toBe('stream_broken: transport error ERR_WORKER_CLOSED after the response started');
    // The health check, seconds later, agrees: added to the same mark, not a new one.
    log.observe({ type: 'worker_state', t: 6000, worker: { ...w1, health: 'dead' } });
    expect(log.list().map((m) => [m.t, m.detail, m.verdict, m.verdictAt])).toEqual([[2000, 'benched', 'dead', 6000]]);
    // Back (the poll says so: a bench that runs out has no event), then blamed again: a second mark.
    log.sync([{ ...w1, health: 'healthy' }], 9000);
    expect(log.list()[0]!.recoveredAt).toBe(9000);
    log.sync([{ ...w1, health: 'benched' }], 9500);
    expect(log.list().map((m) => [m.t, m.detail])).toEqual([[2000, 'benched'], [9500, 'benched']]);
  });
});

describe('ProbeNotes', () => {
  it('probes only workers the router reports unhealthy, at most every few seconds, and forgets recovered ones', async () => {
    const asked: string[] = [];
    const notes = new ProbeNotes(async (url) => { asked.push(url); return 'connect ECONNREFUSED'; }, 1000);
    notes.update([info('w0', 'healthy'), info('w1', 'dead')], 0);
    await new Promise((r) => setTimeout(r, 10));
    expect(notes.update([info('w0', 'healthy'), info('w1', 'dead')], 500)).toEqual([expect.objectContaining({ worker: 'w1', error: 'connect ECONNREFUSED' })]);
    expect(asked).toEqual(['http://127.0.0.1:11']);
    notes.update([info('w1', 'dead')], 1600);
    expect(asked).toHaveLength(2);
    expect(notes.update([info('w1', 'healthy')], 5000)).toEqual([]);
  });

  it('says what a real probe met: a refused connection, an error status', async () => {
    const server = createServer((_req, res) => res.writeHead(503).end());
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const { port } = server.address() as AddressInfo;
    expect(await probeHealth(`http://127.0.0.1:${port}`, 2000)).toBe('/health answered HTTP 503');
    await new Promise<void>((ok) => server.close(() => ok()));
    expect(await probeHealth(`http://127.0.0.1:${port}`, 2000)).toMatch(/ECONNREFUSED/);
  });
});

describe('snapshotRows', () => {
  const row = (id: string, kind: 'attempt' | 'request', extra: Partial<TraceRow> = {}) => ({ kind, request_id: id, attempt: 0, outcome: 'finished', migrations: 0, ...extra }) as TraceRow;
  it('sends the recent rows, and before them every row of older requests that migrated or failed', () => {
    const rows = [
      row('old-ok', 'attempt'), row('old-ok', 'request'),
      row('old-moved', 'attempt', { outcome: 'failed' }), row('old-moved', 'attempt', { attempt: 1 } as never), row('old-moved', 'request', { migrations: 1 } as never),
      row('new', 'attempt'), row('new', 'request'),
    ];
    expect(snapshotRows(rows, 2).map((r) => r.request_id)).toEqual(['old-moved', 'old-moved', 'old-moved', 'new', 'new']);
    expect(snapshotRows(rows, 2, 1).map((r) => r.request_id)).toEqual(['old-moved', 'new', 'new']);
    expect(snapshotRows(rows, 100)).toEqual(rows);
  });
});

describe('the host API for live figures', () => {
  let app: AppHandle | null = null;
  let router: FakeRouter;
  afterEach(async () => {
    await app?.close();
    app = null;
  });

  async function start(stats: RouterStats | null) {
    router = await startFakeRouter();
    if (stats) router.stats = async () => ({ ...stats, workers: router.workers() });
    const cluster: SimClusterLike = {
      workers: () => [{ index: 0, url: 'http://127.0.0.1:40000', port: 40000, pid: 1, alive: true }],
      kill: () => {}, restart: () => {}, fault: () => {}, onChange: () => () => {}, stop: () => {},
    };
    app = await startApp({ staticRoot: null, traffic: false, sim: 1, deps: { startRouter: () => router, startCluster: () => cluster } });
  }

  it('answers /api/live with the router\'s figures and the markers of actions taken through it', async () => {
    const stats: RouterStats = { instance: 'i-1', started_at: 1, t: 2, workers: [], totals: { requests: 1, finished: 1, failed: 0, cancelled: 0, migrations: 7, attempts_started: 2, tokens: 9, in_flight: 0 } };
    await start(stats);
    expect((await fetch(`${router.url}/api/sim/0/kill`, { method: 'POST', headers: json, body: '{}' })).status).toBe(200);
    expect((await fetch(`${router.url}/api/workers/w0/drain`, { method: 'POST', headers: json, body: '{"draining":true}' })).status).toBe(200);
    const live = (await (await fetch(`${router.url}/api/live`)).json()) as LiveState;
    expect(live.router).toMatchObject({ instance: 'i-1', totals: { migrations: 7 }, workers: [{ id: 'w0' }] });
    expect(live.faults.map((f) => [f.kind, f.worker, f.source])).toEqual([['kill', 'w0', 'dashboard'], ['drain', 'w0', 'dashboard']]);
    expect(live.sim).toHaveLength(1);
    const snap = (await (await fetch(`${router.url}/api/snapshot`)).json()) as Snapshot;
    expect(snap.router?.instance).toBe('i-1');
    expect(snap.faults).toHaveLength(2);
  });

  it('still answers without router figures (a router that has none), and says so with null', async () => {
    await start(null);
    const live = (await (await fetch(`${router.url}/api/live`)).json()) as LiveState;
    expect(live.router).toBeNull();
  });

  it('gives one request\'s rows by id, and 404 for a body it did not send', async () => {
    await start(null);
    router.rows.push({ kind: 'request', request_id: 'a' } as TraceRow);
    const res = await fetch(`${router.url}/api/requests/a/rows`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { rows: TraceRow[] }).rows).toEqual([{ kind: 'request', request_id: 'a' }]);
    expect((await fetch(`${router.url}/api/requests/a/body`)).status).toBe(404);
  });
});

describe('TrafficGenerator bodies', () => {
  let server: Server | null = null;
  afterEach(async () => {
    await new Promise<void>((ok) => (server ? (server.closeAllConnections(), server.close(() => ok())) : ok()));
    server = null;
  });

  it('names each request with x-request-id and keeps its body under that id, bounded', async () => {
    const seen: { id: string; body: unknown }[] = [];
    server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        seen.push({ id: String(req.headers['x-request-id']), body: JSON.parse(raw) });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"output_ids":[1],"meta_info":{}}');
      });
    });
    await new Promise<void>((ok) => server!.listen(0, '127.0.0.1', ok));
    const { port } = server.address() as AddressInfo;
    const gen = new TrafficGenerator({ url: `http://127.0.0.1:${port}`, settings: { rate: 100, streamShare: 0 }, tickMs: 10, keepBodies: 5 });
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBeGreaterThan(8);
    // Stop sending and let what is on its way arrive before stopping (stop aborts what is in
    // flight: on a loaded machine the last few requests, the ones the ring keeps, may not have
    // reached the server yet). Then the bodies kept are the latest requests', each under its id.
    gen.update({ running: false });
    await expect.poll(() => gen.status().inFlight, { timeout: 10_000 }).toBe(0);
    await gen.stop();
    for (const s of seen) expect(s.id).toMatch(/^[0-9a-f]{32}$/);
    const kept = seen.filter((s) => gen.body(s.id) !== undefined);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThanOrEqual(5);
    for (const s of kept) expect(gen.body(s.id)).toEqual(s.body);
    expect(gen.body(seen[0]!.id)).toBeUndefined();
  });
});
