// The host's actions over the router, the simulated cluster and the traffic generator. Both
// front doors (HTTP routes in browser mode, IPC handlers in Electron) call these and nothing else,
// so the two hosts cannot drift apart.
import type { RouterHandle } from '../router/api.ts';
import type { HostActions, SimAction, Snapshot, TrafficSettings } from './contract.ts';
import { HostError } from './host-error.ts';
import type { InFlightEvents } from './inflight.ts';
import { SimActionError, isSimAction, type SimControl } from './sim-control.ts';
import { parseTrafficPatch, TrafficSettingsError } from './traffic-settings.ts';
import type { TrafficGenerator } from './traffic.ts';

export interface ActionContext {
  router: RouterHandle;
  inflight: InFlightEvents;
  sim: SimControl | null;
  traffic: TrafficGenerator | null;
}

/** How many trace rows a snapshot carries: enough to fill the lists, small enough to send at once. */
export const SNAPSHOT_ROWS = 3000;

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

export function createActions(ctx: ActionContext): HostActions {
  const sim = (): SimControl => {
    if (!ctx.sim) throw new HostError(404, 'no simulated cluster is running');
    return ctx.sim;
  };
  const traffic = (): TrafficGenerator => {
    if (!ctx.traffic) throw new HostError(404, 'no traffic generator is running');
    return ctx.traffic;
  };

  return {
    snapshot(): Snapshot {
      const rows = ctx.router.traceRows();
      return {
        routerUrl: ctx.router.url,
        t: Date.now(),
        workers: ctx.router.workers(),
        rows: rows.length > SNAPSHOT_ROWS ? rows.slice(rows.length - SNAPSHOT_ROWS) : rows,
        inflight: ctx.inflight.events(),
        sim: ctx.sim?.workers() ?? null,
        traffic: ctx.traffic?.status() ?? null,
      };
    },
    simWorkers: () => ctx.sim?.workers() ?? null,
    async simAction(index: number, action: SimAction) {
      if (!Number.isInteger(index) || index < 0) throw new HostError(400, 'sim index must be a non-negative integer');
      if (!isSimAction(action)) throw new HostError(400, `unknown sim action '${String(action)}'`);
      try {
        return await sim().apply(index, action);
      } catch (err) {
        if (err instanceof SimActionError) throw new HostError(404, err.message);
        throw err;
      }
    },
    addWorker: (url: string) => ctx.router.addWorker(workerUrl(url)),
    removeWorker(id: string) {
      if (!ctx.router.removeWorker(String(id))) throw new HostError(404, `no worker '${id}'`);
      return true;
    },
    drainWorker(id: string, draining: boolean) {
      if (!ctx.router.drainWorker(String(id), Boolean(draining))) throw new HostError(404, `no worker '${id}'`);
      return true;
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
