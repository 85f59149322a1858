// The dashboard's store. Large, fast-changing data (requests, series, trace rows, workers) lives
// in mutable models updated once per batch; the zustand state carries a `version` that bumps per
// batch, plus the small UI state. Components subscribe to what they draw.
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { BatonEvent } from '../../../router/events/types.ts';
import type { TraceRow } from '../../../router/trace/row.ts';
import type { SimWorkerState, Snapshot, TrafficStatus } from '../../../host/contract.ts';
import { RequestBook, DEFAULT_LIMITS, type BookLimits } from './request-book.ts';
import { Series } from './series.ts';
import { TraceRing } from './trace-ring.ts';
import { WorkerTable } from './workers.ts';
import { NO_FILTERS, type RequestFilters } from './filters.ts';
import { snapshotEvents } from './snapshot-events.ts';

export type View = 'live' | 'workers' | 'charts' | 'traces' | 'traffic';

export interface ConnectionState {
  status: 'connecting' | 'live' | 'lost';
  message: string | null;
}

export interface Model {
  book: RequestBook;
  series: Series;
  traces: TraceRing;
  workers: WorkerTable;
}

export interface DashState {
  model: Model;
  version: number;
  now: number;
  connection: ConnectionState;
  routerUrl: string | null;
  sim: SimWorkerState[] | null;
  traffic: TrafficStatus | null;
  view: View;
  /** The request open in the detail panel. */
  selected: string | null;
  /** The keyboard cursor in the Requests list. */
  cursor: string | null;
  filters: RequestFilters;
  ingest(events: readonly BatonEvent[], now?: number): void;
  loadSnapshot(snapshot: Snapshot, now?: number): void;
  tick(now?: number): void;
  setConnection(connection: ConnectionState): void;
  setSim(sim: SimWorkerState[] | null): void;
  setTraffic(traffic: TrafficStatus | null): void;
  setView(view: View): void;
  select(id: string | null): void;
  setCursor(id: string | null): void;
  setFilters(patch: Partial<RequestFilters>): void;
}

export type DashStore = StoreApi<DashState>;

function rowsOf(events: readonly BatonEvent[]): TraceRow[] {
  const rows: TraceRow[] = [];
  for (const e of events) if (e.type === 'attempt_ended' || e.type === 'request_finished') rows.push(e.row);
  return rows;
}

export function createDashStore(limits: BookLimits = DEFAULT_LIMITS): DashStore {
  const model: Model = { book: new RequestBook(limits), series: new Series(), traces: new TraceRing(), workers: new WorkerTable() };

  const ingest = (events: readonly BatonEvent[]) => {
    const effects = model.book.applyBatch(events);
    for (let i = 0; i < events.length; i++) model.series.add(events[i]!.t, effects[i]!);
    model.traces.add(rowsOf(events));
    model.workers.apply(events);
  };

  return createStore<DashState>()((set, get) => ({
    model,
    version: 0,
    now: Date.now(),
    connection: { status: 'connecting', message: null },
    routerUrl: null,
    sim: null,
    traffic: null,
    view: 'live',
    selected: null,
    cursor: null,
    filters: NO_FILTERS,
    ingest(events, now = Date.now()) {
      if (events.length === 0) return;
      ingest(events);
      model.series.prune(now);
      set({ version: get().version + 1, now });
    },
    loadSnapshot(snapshot, now = Date.now()) {
      // A snapshot is the whole truth about workers; requests merge (the reducer is idempotent
      // for rows and events it has already seen).
      model.workers.reset(snapshot.workers);
      ingest(snapshotEvents(snapshot));
      model.series.prune(now);
      set({
        version: get().version + 1, now, routerUrl: snapshot.routerUrl, sim: snapshot.sim, traffic: snapshot.traffic,
        connection: { status: 'live', message: null },
      });
    },
    tick: (now = Date.now()) => set({ now }),
    setConnection: (connection) => set({ connection }),
    setSim: (sim) => set({ sim }),
    setTraffic: (traffic) => set({ traffic }),
    setView: (view) => set({ view }),
    select: (selected) => set(selected ? { selected, cursor: selected } : { selected }),
    setCursor: (cursor) => set({ cursor }),
    setFilters: (patch) => set({ filters: { ...get().filters, ...patch } }),
  }));
}
