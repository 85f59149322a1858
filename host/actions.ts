// The host's actions over the router, the simulated cluster and the traffic generator. Both
// front doors (HTTP routes in browser mode, IPC handlers in Electron) call these and nothing else,
// so the two hosts cannot drift apart.
import type { RouterHandle } from '../router/api.ts';
import type { RouterStats } from '../router/events/types.ts';
import type { TraceRow } from '../router/trace/row.ts';
import type { FaultMark, HostActions, LiveState, SimAction, Snapshot, TrafficSettings } from './contract.ts';
import { FaultLog } from './fault-log.ts';
import { HostError } from './host-error.ts';
import { ProbeNotes } from './probe-notes.ts';
import type { InFlightEvents } from './inflight.ts';
import { SimActionError, isSimAction, type SimControl } from './sim-control.ts';
import { parseTrafficPatch, TrafficSettingsError } from './traffic-settings.ts';
import type { TrafficGenerator } from './traffic.ts';

export interface ActionContext {
  router: RouterHandle;
  inflight: InFlightEvents;
  sim: SimControl | null;
  traffic: TrafficGenerator | null;
  faults?: FaultLog;
  probes?: ProbeNotes;
}

/** How many trace rows a snapshot carries: enough to fill the lists, small enough to send at once. */
export const SNAPSHOT_ROWS = 3000;
/** And at most this many more: the rows of older requests that migrated or failed. */
export const SNAPSHOT_NOTABLE_ROWS = 3000;

/** A row of a request an incident is about: it migrated, or something failed. */
export function isNotableRow(row: TraceRow): boolean {
  return row.kind === 'attempt' ? row.attempt > 0 || row.outcome === 'failed' : row.migrations > 0 || row.outcome === 'failed';
}

/** The last `recent` rows, and before them the rows of older notable requests (at most `notable`), oldest first. */
export function snapshotRows(rows: readonly TraceRow[], recent = SNAPSHOT_ROWS, notable = SNAPSHOT_NOTABLE_ROWS): TraceRow[] {
  if (rows.length <= recent) return [...rows];
  const cut = rows.length - recent;
  const ids = new Set<string>();
  for (let i = 0; i < cut; i++) if (isNotableRow(rows[i]!)) ids.add(rows[i]!.request_id);
  const older: TraceRow[] = [];
  for (let i = 0; i < cut; i++) if (ids.has(rows[i]!.request_id)) older.push(rows[i]!);
  return [...(older.length > notable ? older.slice(older.length - notable) : older), ...rows.slice(cut)];
}

async function routerStats(router: RouterHandle): Promise<RouterStats | null> {
  try {
    return router.stats ? await router.stats() : null;
  } catch {
    return null;
  }
}

export function workerUrl(input: unknown): string {
  if (typeof input !== 'string') throw new HostError(400, 'url must be a string');
  let url: URL;
  try {
    url = new URL(input.trim());
  } catch {
    throw new HostError(400, `not a URL: '${input}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new HostError(400, 'worker URL must be http or https');
  return url.toString().replace(/\/$/, '');
}

/** What pages draw of a fault log: the markers of the last 15 minutes (the longest chart window), at most 200. */
export function recentFaults(faults: FaultLog): FaultMark[] {
  const since = Date.now() - 15 * 60_000;
  return faults.list().filter((m) => m.t >= since).slice(-200);
}

/** What the host runs itself beside the routing: the same whether one router or a hub of replicas routes. */
export interface LocalParts {
  sim: SimControl | null;
  traffic: TrafficGenerator | null;
  faults: FaultLog;
  /** The worker (as the page names it) of a simulated index, for the fault marker of an action on it. */
  simWorker(index: number): { id: string; url: string } | null;
  /** The id the traffic generator gave a request, from the id the page shows (a hub's `r0/<id>`). */
  sentId?(requestId: string): string;
}

/** The actions on the simulated cluster and the traffic generator, for createActions and the hub's actions alike. */
export function localActions(ctx: LocalParts): Pick<HostActions, 'requestBody' | 'simWorkers' | 'simAction' | 'traffic' | 'setTraffic'> {
  const sim = (): SimControl => {
    if (!ctx.sim) throw new HostError(404, 'no simulated cluster is running');
    return ctx.sim;
  };
  const traffic = (): TrafficGenerator => {
    if (!ctx.traffic) throw new HostError(404, 'no traffic generator is running');
    return ctx.traffic;
  };
  return {
    requestBody(requestId: string) {
      const sent = ctx.sentId?.(String(requestId)) ?? String(requestId);
      const body = ctx.traffic?.body(sent);
      if (body === undefined || body === null) return null;
      const path = ctx.traffic?.path(sent);
      return { request_id: String(requestId), body, ...(path ? { path } : {}) };
    },
    simWorkers: () => ctx.sim?.workers() ?? null,
    async simAction(index: number, action: SimAction) {
      if (!Number.isInteger(index) || index < 0) throw new HostError(400, 'sim index must be a non-negative integer');
      if (!isSimAction(action)) throw new HostError(400, `unknown sim action '${String(action)}'`);
      try {
        const before = ctx.simWorker(index);
        const t = Date.now(); // when it was asked for: a kill lands now, not when the process is reaped
        const after = await sim().apply(index, action);
        ctx.faults.record(action, before?.id ?? null, before?.url ?? after.find((w) => w.index === index)?.url ?? null, 'dashboard', null, t);
        return after;
      } catch (err) {
        if (err instanceof SimActionError) throw new HostError(404, err.message);
        throw err;
      }
    },
    traffic: () => ctx.traffic?.status() ?? null,
    setTraffic(patch: Partial<TrafficSettings>) {
      try {
        return traffic().update(parseTrafficPatch(patch));
      } catch (err) {
        if (err instanceof TrafficSettingsError) throw new HostError(400, err.message);
        throw err;
      }
    },
  };
}

export function createActions(ctx: ActionContext): HostActions {
  const faults = ctx.faults ?? new FaultLog();
  const probes = ctx.probes ?? new ProbeNotes();
  const workerById = (id: string) => ctx.router.workers().find((w) => w.id === id) ?? null;
  const simWorker = (index: number) => ctx.router.workers().find((w) => w.sim_index === index) ?? null;

  return {
    async snapshot(): Promise<Snapshot> {
      const router = await routerStats(ctx.router);
      return {
        routerUrl: ctx.router.url,
        t: Date.now(),
        workers: router?.workers ?? ctx.router.workers(),
        rows: snapshotRows(ctx.router.traceRows()),
        inflight: ctx.inflight.events(),
        sim: ctx.sim?.workers() ?? null,
        traffic: ctx.traffic?.status() ?? null,
        router,
        faults: recentFaults(faults),
      };
    },
    async live(): Promise<LiveState> {
      const router = await routerStats(ctx.router);
      const workers = router?.workers ?? ctx.router.workers();
      faults.sync(workers);
      return { t: Date.now(), router, faults: recentFaults(faults), sim: ctx.sim?.workers() ?? null, probes: probes.update(workers) };
    },
    traceRows(requestId: string) {
      if (typeof requestId !== 'string' || requestId === '') throw new HostError(400, 'request id must be a non-empty string');
      return ctx.router.traceRows({ request: requestId });
    },
    ...localActions({ sim: ctx.sim, traffic: ctx.traffic, faults, simWorker }),
    async addWorker(url: string) {
      const info = await ctx.router.addWorker(workerUrl(url));
      faults.record('add', info.id, info.url);
      return info;
    },
    removeWorker(id: string) {
      const before = workerById(String(id));
      if (!ctx.router.removeWorker(String(id))) throw new HostError(404, `no worker '${id}'`);
      faults.record('remove', String(id), before?.url ?? null);
      return true;
    },
    drainWorker(id: string, draining: boolean) {
      if (!ctx.router.drainWorker(String(id), Boolean(draining))) throw new HostError(404, `no worker '${id}'`);
      faults.record(draining ? 'drain' : 'undrain', String(id), workerById(String(id))?.url ?? null);
      return true;
    },
  };
}
