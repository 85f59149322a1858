// The hub's pieces without processes: SSE splitting, the clock offset rule, worker merging and
// request ids keyed by router, against stand-in routers serving /stats, /events and /traces.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { EventBus } from '../../router/events/bus.ts';
import type { RouterStats, WorkerInfo } from '../../router/events/types.ts';
import type { RequestRow } from '../../router/trace/row.ts';
import { serveEvents } from '../../router/http/events-endpoint.ts';
import { bestOffset, sseSplit } from '../../host/hub/link.ts';
import { startHub, type HubHandle } from '../../host/hub/server.ts';
import type { HubState } from '../../host/contract.ts';

const worker = (id: string, url: string, health: WorkerInfo['health'], inFlight: number): WorkerInfo => ({
  id, url, health, circuit: 'closed', format: 'sglang', token_only: true, incremental: false, model_path: null, weight_version: null, in_flight: inFlight,
  simulated: false, sim_index: null, draining: false,
});

interface FakeRouter {
  url: string;
  bus: EventBus;
  workers: WorkerInfo[];
  skewMs: number;
  server: Server;
  /** What GET /traces answers. */
  traces: RequestRow[];
  /** GET /stats answers this late. */
  statsDelayMs: number;
  /** Called when a client opens /events (after the stream's head went out). */
  onEvents: () => void;
}

async function fakeRouter(workers: WorkerInfo[], skewMs = 0): Promise<FakeRouter> {
  const bus = new EventBus(1000);
  const f = { bus, workers, skewMs, traces: [], statsDelayMs: 0, onEvents: () => undefined } as unknown as FakeRouter;
  const json = (res: ServerResponse, body: unknown) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  f.server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/events') {
      serveEvents(bus, req, res, { flushMs: 10, maxQueued: 1000, router: 'fake' });
      return f.onEvents();
    }
    if (path === '/stats') {
      const stats: RouterStats = { instance: 'i', started_at: 0, t: Date.now() + f.skewMs, totals: { requests: 0, finished: 0, failed: 0, cancelled: 0, migrations: 0, attempts_started: 0, tokens: 0, in_flight: 0 }, workers: f.workers };
      setTimeout(() => json(res, stats), f.statsDelayMs);
      return;
    }
    if (path === '/traces') {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      return res.end(f.traces.map((r) => `${JSON.stringify(r)}\n`).join(''));
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((r) => f.server.listen(0, '127.0.0.1', () => r()));
  f.url = `http://127.0.0.1:${(f.server.address() as AddressInfo).port}`;
  return f;
}

async function until(fn: () => boolean, ms = 5000): Promise<void> {
  const t0 = Date.now();
  while (!fn()) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('hub pieces', () => {
  it('splits SSE text into (id, data) messages, keeping the unfinished rest', () => {
    fc.assert(fc.property(fc.array(fc.tuple(fc.nat(), fc.string({ unit: fc.constantFrom('a', '{', '"', ' ', ':') })), { maxLength: 20 }), fc.nat(), (msgs, cutAt) => {
      const text = msgs.map(([id, d]) => `id: 1:${id}\ndata: ${d}\n\n`).join('') + ': keep-alive\n\n';
      const cut = cutAt % (text.length + 1);
      const got: [string | null, string][] = [];
      const rest = sseSplit(text.slice(0, cut), (id, d) => got.push([id, d]));
      sseSplit(rest + text.slice(cut), (id, d) => got.push([id, d]));
      expect(got).toEqual(msgs.map(([id, d]) => [`1:${id}`, d]));
    }));
  });

  it('takes the offset of the fastest round trip', () => {
    expect(bestOffset([{ rtt: 9, offset: 40 }, { rtt: 1, offset: 10 }, { rtt: 5, offset: -3 }])).toEqual({ rtt: 1, offset: 10 });
    expect(bestOffset([])).toBeNull();
  });
});

describe('hub over stand-in routers', () => {
  const routers: FakeRouter[] = [];
  let hub: HubHandle | null = null;
  afterEach(async () => {
    await hub?.close();
    hub = null;
    for (const r of routers.splice(0)) {
      r.server.closeAllConnections();
      await new Promise<void>((res) => r.server.close(() => res()));
    }
  });

  it('keys requests by router, sums in-flight and shows health as a matrix, estimates the clock offset', async () => {
    routers.push(await fakeRouter([worker('w0', 'http://a:1', 'healthy', 2), worker('w1', 'http://b:1', 'healthy', 1)], 5000));
    routers.push(await fakeRouter([worker('w0', 'http://b:1', 'dead', 0), worker('w1', 'http://a:1', 'healthy', 3)]));
    hub = await startHub({ routers: routers.map((r) => r.url) });
    const h = hub;
    await until(() => h.status().routers.every((r) => r.state === 'connected' && r.offset_ms !== null));
    expect(Math.abs(h.status().routers[0]!.offset_ms! - 5000)).toBeLessThan(500);
    expect(Math.abs(h.status().routers[1]!.offset_ms!)).toBeLessThan(500);

    const matrix = h.hub.matrix();
    const a = matrix.find((w) => w.url === 'http://a:1')!;
    const b = matrix.find((w) => w.url === 'http://b:1')!;
    expect(a).toMatchObject({ in_flight: 5, healthy: 2, of: 2 });
    expect(b).toMatchObject({ in_flight: 1, healthy: 1, of: 2, health: { r0: 'healthy', r1: 'dead' } });
    // One id per URL at the hub, whatever each router calls it; the merged health is the worst.
    expect(h.hub.workers().find((w) => w.url === 'http://b:1')!.health).toBe('dead');

    // The same request id at two routers: two requests at the hub.
    for (const r of routers) r.bus.emit({ type: 'request_admitted', t: Date.now(), request_id: 'same', admitted: true, reason: null, stream: true, prompt_tokens: 1, max_new_tokens: 4, trace_id: null });
    await until(() => (h.hub.snapshot(h.url).inflight.length === 2));
    expect(h.hub.snapshot(h.url).inflight.map((e) => ('request_id' in e ? e.request_id : '')).sort()).toEqual(['r0/same', 'r1/same']);
    const rows = await fetch(`${h.url}/api/requests/nohub/rows`);
    expect(rows.status).toBe(404);
    expect(((await rows.json()) as { error: { message: string } }).error.message).toMatch(/<router>\/<id>/);
  });

  it('holds the rows a router ended before the hub followed it, whatever comes first: a streamed row or the first /stats', async () => {
    const row = (id: string, at: number): RequestRow => ({
      kind: 'request', format: 'sglang', request_id: id, attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 4, completion_tokens: 3,
      cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: at - 1, ended_at: at, stream: true, max_new_tokens: 3, error: null, trace_id: null,
    });
    const r = await fakeRouter([worker('w0', 'http://a:1', 'healthy', 0)]);
    routers.push(r);
    // 'before' ended before the hub came; 'during' ends as its stream opens, before /stats answers.
    const before = row('before', 1000);
    const during = row('during', 2000);
    r.traces = [before];
    r.statsDelayMs = 400;
    r.onEvents = () => {
      r.traces = [before, during];
      setTimeout(() => r.bus.emit({ type: 'request_finished', t: Date.now(), row: during }), 30);
    };
    hub = await startHub({ routers: [r.url] });
    const h = hub;
    await until(() => h.status().routers[0]!.state === 'connected' && h.hub.rows().some((x) => x.request_id === 'r0/during'));
    await until(() => h.hub.rows().length === 2, 3000).catch(() => undefined);
    expect(h.hub.rows().map((x) => x.request_id).sort()).toEqual(['r0/before', 'r0/during']);
    expect(h.status().merged.requests).toBe(2);
    // The first stream stayed open: a stream is judged silent from when it opened, not from 1970.
    expect(h.status().routers[0]!.reconnects).toBe(0);
  });

  it('marks a router lost when it stops answering, with its in-flight requests "router lost"', async () => {
    routers.push(await fakeRouter([worker('w0', 'http://a:1', 'healthy', 0)]));
    routers.push(await fakeRouter([worker('w0', 'http://a:1', 'healthy', 0)]));
    hub = await startHub({ routers: routers.map((r) => r.url) });
    const h = hub;
    await until(() => h.status().routers.every((r) => r.state === 'connected'));
    routers[1]!.bus.emit({ type: 'request_admitted', t: Date.now(), request_id: 'q', admitted: true, reason: null, stream: true, prompt_tokens: 1, max_new_tokens: 4, trace_id: null });
    await until(() => h.hub.snapshot(h.url).inflight.length === 1);
    const dead = routers.pop()!;
    dead.server.closeAllConnections();
    await new Promise<void>((res) => dead.server.close(() => res()));
    const t0 = Date.now();
    await until(() => h.status().routers[1]!.state === 'lost', 5000);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(h.hub.state().owner_lost).toEqual(['r1/q']);
    expect(h.hub.matrix()[0]).toMatchObject({ healthy: 1, of: 1 });
  });

  it('lists as owner_lost only requests still in flight: not one whose end came from /traces before its stream events', async () => {
    const r = await fakeRouter([worker('w0', 'http://a:1', 'healthy', 0)]);
    routers.push(r);
    const done: RequestRow = {
      kind: 'request', format: 'sglang', request_id: 'done', attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 4, completion_tokens: 3,
      cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: Date.now() - 2, ended_at: Date.now() - 1, stream: true, max_new_tokens: 3, error: null, trace_id: null,
    };
    r.traces = [done];
    hub = await startHub({ routers: [r.url] });
    const h = hub;
    await until(() => h.status().routers[0]!.state === 'connected' && h.hub.rows().some((x) => x.request_id === 'r0/done'));
    // The stream brings what /traces already ended ('done': admitted, then its finish again), and one request still running.
    const admitted = (id: string) => r.bus.emit({ type: 'request_admitted', t: Date.now(), request_id: id, admitted: true, reason: null, stream: true, prompt_tokens: 1, max_new_tokens: 4, trace_id: null });
    admitted('done');
    r.bus.emit({ type: 'request_finished', t: Date.now(), row: done });
    admitted('live');
    await until(() => h.hub.snapshot(h.url).inflight.some((e) => 'request_id' in e && e.request_id === 'r0/live'));
    routers.pop();
    r.server.closeAllConnections();
    await new Promise<void>((res) => r.server.close(() => res()));
    await until(() => h.status().routers[0]!.state === 'lost', 5000);
    expect(h.hub.state().owner_lost).toEqual(['r0/live']);
  });

  it("names the routers' shared port to pages when it has one (--replicas), none when each router is its own (--router)", async () => {
    routers.push(await fakeRouter([worker('w0', 'http://a:1', 'healthy', 0)]));
    hub = await startHub({ routers: [routers[0]!.url] });
    expect(((await (await fetch(`${hub.url}/hub`)).json()) as HubState).front).toBeNull();
    await hub.close();
    hub = await startHub({ routers: [routers[0]!.url], routerUrl: 'http://127.0.0.1:30080' });
    expect(((await (await fetch(`${hub.url}/hub`)).json()) as HubState).front).toBe('http://127.0.0.1:30080');
    expect(hub.hub.snapshot(hub.url).hub?.front).toBe('http://127.0.0.1:30080');
  });

  it('follows the routers a discovery source lists (the seam the Kubernetes sources report to)', async () => {
    routers.push(await fakeRouter([worker('w0', 'http://a:1', 'healthy', 0)]));
    const url = routers[0]!.url;
    let stopped = false;
    hub = await startHub({
      routers: [],
      sources: [{ name: 'k8s-pods', start: async (sink) => sink.resync([{ key: 'uid-1', url: `${url}/` }]), stop: async () => void (stopped = true) }],
    });
    const h = hub;
    await until(() => h.status().routers.length === 1 && h.status().routers[0]!.state === 'connected');
    expect(h.status().routers[0]!.url).toBe(url);
    await h.close();
    hub = null;
    expect(stopped).toBe(true);
  });

  it('refuses a hub without routers or with a bad URL', async () => {
    await expect(startHub({ routers: [] })).rejects.toThrow(/at least one router URL or a discovery source/);
    await expect(startHub({ routers: ['ftp://x'] })).rejects.toThrow(/http or https/);
    await expect(startHub({ routers: ['not a url'] })).rejects.toThrow(/not a router URL/);
  });
});
