// A stand-in for the router in host tests: a real HTTP server with addRoute and `:param` paths,
// workers kept in a list, events pushed by the test. Only what the host uses.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EventListener, RouteHandler, RouterHandle, TraceFilter } from '../../router/api.ts';
import type { BatonEvent, WorkerInfo } from '../../router/events/types.ts';
import type { TraceRow } from '../../router/trace/row.ts';

interface Route { method: string; parts: string[]; handler: RouteHandler }

export interface FakeRouter extends RouterHandle {
  emit(event: BatonEvent): void;
  rows: TraceRow[];
  added: { url: string; opts?: { simulated?: boolean; simIndex?: number } }[];
}

export async function startFakeRouter(): Promise<FakeRouter> {
  const routes: Route[] = [];
  const listeners = new Set<EventListener>();
  const workers: WorkerInfo[] = [];
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const parts = path.split('/').filter(Boolean);
    for (const route of routes) {
      if (route.method !== req.method || route.parts.length !== parts.length) continue;
      const params: Record<string, string> = {};
      const match = route.parts.every((p, i) => {
        if (p.startsWith(':')) { params[p.slice(1)] = decodeURIComponent(parts[i] ?? ''); return true; }
        return p === parts[i];
      });
      if (match) return void route.handler(req, res, params);
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  const fake: FakeRouter = {
    url: `http://127.0.0.1:${port}`,
    host: '127.0.0.1',
    port,
    rows: [],
    added: [],
    requestOutput: () => undefined,
    emit: (event) => listeners.forEach((l) => l(event)),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    workers: () => workers.map((w) => ({ ...w })),
    async addWorker(url, opts) {
      fake.added.push({ url, ...(opts ? { opts } : {}) });
      const info: WorkerInfo = {
        id: `w${workers.length}`, url, health: 'healthy', circuit: 'closed', format: 'sglang', token_only: true, incremental: false, model_path: null, weight_version: null,
        in_flight: 0, simulated: opts?.simulated ?? false, sim_index: opts?.simIndex ?? null, draining: false,
      };
      workers.push(info);
      return info;
    },
    removeWorker(id) {
      const i = workers.findIndex((w) => w.id === id);
      if (i < 0) return false;
      workers.splice(i, 1);
      return true;
    },
    drainWorker(id, draining = true) {
      const w = workers.find((x) => x.id === id);
      if (!w) return false;
      w.draining = draining;
      return true;
    },
    traceRows: (_filter?: TraceFilter) => [...fake.rows],
    addRoute(method, path, handler) {
      routes.push({ method, parts: path.split('/').filter(Boolean), handler });
    },
    close: () => new Promise<void>((ok) => { server.closeAllConnections(); server.close(() => ok()); }),
  };
  return fake;
}
