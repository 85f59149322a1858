// The dashboard's store. Large, fast-changing data (requests, series, trace rows, workers) lives
// in mutable models updated once per batch; the zustand state carries a `version` that bumps per
// batch, plus the small UI state. Components subscribe to what they draw.
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { BatonEvent, RouterStats } from '../../../router/events/types.ts';
import type { TraceRow } from '../../../router/trace/row.ts';
import type { FaultMark, HubState, LiveState, ProbeNote, SimWorkerState, Snapshot, TrafficStatus } from '../../../host/contract.ts';
import { RequestBook, DEFAULT_LIMITS, type BookLimits } from './request-book.ts';
import { Series } from './series.ts';
import { TraceRing } from './trace-ring.ts';
import { WorkerTable } from './workers.ts';
import { NO_FILTERS, type RequestFilters } from './filters.ts';
import { snapshotEvents } from './snapshot-events.ts';
import { deriveIncidents, lastFaultStart } from './incidents.ts';
import { lostAt, lostByRouter, routerLostMark, routerLostRow, routerName } from './router-lost.ts';
import { fmtClock } from '../views/format.ts';

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

/** A trace file opened offline (`baton view`, or dropped on the page). */
export interface FileInfo {
  name: string;
  rows: number;
  /** Lines that were not trace rows (blank lines aside). */
  skipped: number;
  /** Epoch ms of the earliest start and the latest end among its rows. */
  from: number;
  to: number;
}

/** The Traces view's filter; it lives in the store so it survives switching views. */
export interface TraceViewFilter {
  kind?: 'attempt' | 'request';
  /** A request id prefix. */
  request?: string;
  worker?: string;
  outcome?: string;
  /** Rows that ended in [since, until] (epoch ms). */
  since?: number;
  until?: number;
  /** Behind the hub: only one router's rows, by its label (the ids' `<label>/`). */
  router?: string;
}

export type Theme = 'system' | 'light' | 'dark';

/** The waterfall's time windows; 15 s is the default. */
export const REQUEST_WINDOWS = [15_000, 60_000, 300_000] as const;

export interface DashState {
  model: Model;
  version: number;
  now: number;
  /** `file`: the page shows a trace file; there is no router and nothing is live. */
  mode: 'live' | 'file';
  file: FileInfo | null;
  connection: ConnectionState;
  /** When the connection dropped: the clock stops there, so running bars freeze. */
  frozenAt: number | null;
  routerUrl: string | null;
  /** The router's identity and totals since it started, as last read. */
  router: RouterStats | null;
  faults: FaultMark[];
  probes: ProbeNote[];
  /** Behind a dashboard hub: its routers and the worker matrix (null: one router). */
  hub: HubState | null;
  /**
   * Requests this page ended as `router_lost` (behind a hub, their router died with them in
   * flight): failed, though no router counts them in its totals.
   */
  routerLost: number;
  sim: SimWorkerState[] | null;
  traffic: TrafficStatus | null;
  /** Something the page did on its own that the user should know (the view was reset, ...). */
  notice: string | null;
  view: View;
  /** The request open in the detail panel. */
  selected: string | null;
  /** The keyboard cursor in the Requests list. */
  cursor: string | null;
  filters: RequestFilters;
  traceFilter: TraceViewFilter;
  /** The Requests waterfall's window in ms, and the Charts window's index: both survive view switches. */
  requestWindow: number;
  chartWindow: number;
  theme: Theme;
  ingest(events: readonly BatonEvent[], now?: number): void;
  loadSnapshot(snapshot: Snapshot, now?: number): void;
  /** The host's poll: router figures (workers, totals), faults, sim, probe errors. Returns false when another router instance answered. */
  applyLive(live: LiveState): boolean;
  /** Forgets every request, row and figure (another router answered). */
  reset(notice: string | null): void;
  tick(now?: number): void;
  setConnection(connection: ConnectionState): void;
  setSim(sim: SimWorkerState[] | null): void;
  setTraffic(traffic: TrafficStatus | null): void;
  setView(view: View): void;
  select(id: string | null): void;
  setCursor(id: string | null): void;
  setFilters(patch: Partial<RequestFilters>): void;
  setTraceFilter(filter: TraceViewFilter): void;
  setRequestWindow(ms: number): void;
  setChartWindow(index: number): void;
  setTheme(theme: Theme): void;
  setNotice(notice: string | null): void;
  /** When the last fault began (its incident's first broken attempt or fault marker), or null. */
  lastFaultAt(): number | null;
}

export type DashStore = StoreApi<DashState>;

export interface StoreOptions {
  limits?: BookLimits;
  /** The page's trace-row quotas (ordinary, migrated or failed). */
  traceRows?: [number, number];
  mode?: 'live' | 'file';
  /** Where UI preferences (windows, theme) persist; none in tests. */
  storage?: Pick<Storage, 'getItem' | 'setItem'> | null;
}

function rowsOf(events: readonly BatonEvent[]): TraceRow[] {
  const rows: TraceRow[] = [];
  for (const e of events) if (e.type === 'attempt_ended' || e.type === 'request_finished') rows.push(e.row);
  return rows;
}

const PREFS_KEY = 'baton.prefs';
interface Prefs { requestWindow?: number; chartWindow?: number; theme?: Theme }

function readPrefs(storage: StoreOptions['storage']): Prefs {
  try {
    const prefs = JSON.parse(storage?.getItem(PREFS_KEY) ?? '{}') as Prefs;
    return typeof prefs === 'object' && prefs !== null ? prefs : {};
  } catch {
    return {};
  }
}

export function createDashStore(options: BookLimits | StoreOptions = {}): DashStore {
  const opts: StoreOptions = 'maxFinished' in options ? { limits: options } : options;
  const limits = opts.limits ?? DEFAULT_LIMITS;
  const [ordinaryRows, notableRows] = opts.traceRows ?? [20_000, 10_000];
  const newModel = (): Model => ({ book: new RequestBook(limits), series: new Series(), traces: new TraceRing(ordinaryRows, notableRows), workers: new WorkerTable() });
  const model: Model = newModel();
  const storage = opts.storage ?? null;
  const prefs = readPrefs(storage);
  const savePrefs = (patch: Prefs) => {
    try {
      storage?.setItem(PREFS_KEY, JSON.stringify({ ...readPrefs(storage), ...patch }));
    } catch {
      // a private window may refuse storage; the preference then lasts as long as the page
    }
  };

  const ingest = (events: readonly BatonEvent[]) => {
    const effects = model.book.applyBatch(events);
    for (let i = 0; i < events.length; i++) model.series.add(events[i]!.t, effects[i]!);
    model.traces.add(rowsOf(events));
    model.workers.apply(events);
  };

  // The page's own marks of routers lost behind a hub (the host's marks are replaced every poll).
  let lostMarks: FaultMark[] = [];
  const withLostMarks = (faults: FaultMark[]): FaultMark[] =>
    lostMarks.length === 0 ? faults : [...faults, ...lostMarks].sort((a, b) => a.t - b.t);
  /**
   * Ends the requests the hub lists as lost with their router: their router will never write
   * their end. Each gets a failed `router_lost` row (list, FAILED, Traces, incidents), and each
   * router a flag; a router's later losses within the incident's quiet time join its flag.
   * Returns how many it ended.
   */
  const endLost = (hub: HubState | null | undefined, now: number): number => {
    if (!hub || hub.owner_lost.length === 0) return 0;
    let ended = 0;
    for (const [label, requests] of lostByRouter(hub, (id) => model.book.get(id))) {
      const router = hub.routers.find((r) => r.label === label);
      const name = routerName(router, label);
      const events: BatonEvent[] = [];
      let first = Infinity;
      for (const r of requests) {
        const t = lostAt(router, r, now);
        first = Math.min(first, t);
        const row = routerLostRow(r, t, name);
        model.book.endAttempts(r.id, t, row.error!);
        events.push({ type: 'request_finished', t, row });
      }
      ingest(events);
      ended += requests.length;
      const near = lostMarks.find((m) => m.worker === label && Math.abs(m.t - first) <= 10_000);
      const cut = requests.length + (near ? Number.parseInt(near.detail ?? '0', 10) || 0 : 0);
      const mark = routerLostMark(label, router, near ? Math.min(near.t, first) : first, cut);
      lostMarks = [...lostMarks.filter((m) => m !== near), mark].sort((a, b) => a.t - b.t);
    }
    return ended;
  };

  return createStore<DashState>()((set, get) => ({
    model,
    version: 0,
    now: Date.now(),
    mode: opts.mode ?? 'live',
    file: null,
    connection: { status: 'connecting', message: null },
    frozenAt: null,
    routerUrl: null,
    router: null,
    faults: [],
    probes: [],
    hub: null,
    routerLost: 0,
    sim: null,
    traffic: null,
    notice: null,
    view: 'live',
    selected: null,
    cursor: null,
    filters: NO_FILTERS,
    traceFilter: {},
    requestWindow: (REQUEST_WINDOWS as readonly number[]).includes(prefs.requestWindow ?? 0) ? prefs.requestWindow! : REQUEST_WINDOWS[0],
    chartWindow: typeof prefs.chartWindow === 'number' && prefs.chartWindow >= 0 && prefs.chartWindow <= 2 ? prefs.chartWindow : 0,
    theme: prefs.theme === 'light' || prefs.theme === 'dark' ? prefs.theme : 'system',
    ingest(events, now = Date.now()) {
      if (events.length === 0) return;
      ingest(events);
      const clock = get().frozenAt ?? (get().mode === 'file' ? get().now : now);
      // A file is the whole truth however long it spans: nothing of it ages out of the charts.
      if (get().mode !== 'file') model.series.prune(clock);
      set({ version: get().version + 1, now: clock });
    },
    loadSnapshot(snapshot, now = Date.now()) {
      const known = get().router;
      const incoming = snapshot.router ?? null;
      if (known && incoming && known.instance !== incoming.instance) {
        get().reset(anotherRouter(known, incoming));
      }
      // A snapshot is the whole truth about workers; requests merge (the reducer is idempotent
      // for rows and events it has already seen).
      model.workers.reset(snapshot.workers, incoming?.t ?? null);
      ingest(snapshotEvents(snapshot));
      // Requests this page saw running that the host no longer has in flight ended while the
      // page was not listening; the snapshot's rows told the end of those it still holds.
      const inflight = new Set<string>();
      for (const e of snapshot.inflight) inflight.add('request_id' in e ? e.request_id : e.type === 'attempt_ended' ? e.row.request_id : '');
      model.book.markLost(model.book.runningIds().filter((id) => !inflight.has(id)));
      const ended = endLost(snapshot.hub, now);
      if (get().mode !== 'file') model.series.prune(now);
      set({
        version: get().version + 1, now, frozenAt: null, routerUrl: snapshot.routerUrl, sim: snapshot.sim, traffic: snapshot.traffic,
        router: incoming ?? get().router, faults: withLostMarks(snapshot.faults ?? get().faults.filter((m) => m.kind !== 'router_lost')), hub: snapshot.hub ?? null,
        routerLost: get().routerLost + ended,
        connection: { status: 'live', message: null },
      });
    },
    applyLive(live) {
      const known = get().router;
      if (known && live.router && known.instance !== live.router.instance) return false;
      // While the feed is lost the picture stays frozen; the snapshot after the reconnect catches up.
      if (get().connection.status === 'lost') return true;
      if (live.router) model.workers.reset(live.router.workers, live.router.t);
      const ended = endLost(live.hub, Math.max(get().now, live.t));
      set({
        version: get().version + 1, router: live.router ?? known, faults: withLostMarks(live.faults), probes: live.probes, hub: live.hub ?? null,
        routerLost: get().routerLost + ended,
        ...(live.sim !== null || get().sim === null ? { sim: live.sim } : {}),
      });
      return true;
    },
    reset(notice) {
      const fresh = newModel();
      Object.assign(model, fresh);
      lostMarks = [];
      set({ version: get().version + 1, router: null, faults: [], probes: [], routerLost: 0, selected: null, cursor: null, notice, frozenAt: null });
    },
    tick: (now = Date.now()) => {
      if (get().frozenAt !== null || get().mode === 'file') return;
      set({ now });
    },
    setConnection: (connection) => {
      const lost = connection.status === 'lost';
      set({ connection, frozenAt: lost ? get().frozenAt ?? get().now : get().frozenAt });
    },
    setSim: (sim) => set({ sim }),
    setTraffic: (traffic) => set({ traffic }),
    setView: (view) => set({ view }),
    select: (selected) => set(selected ? { selected, cursor: selected } : { selected }),
    setCursor: (cursor) => set({ cursor }),
    setFilters: (patch) => set({ filters: { ...get().filters, ...patch } }),
    setTraceFilter: (traceFilter) => set({ traceFilter }),
    setRequestWindow: (requestWindow) => {
      savePrefs({ requestWindow });
      set({ requestWindow });
    },
    setChartWindow: (chartWindow) => {
      savePrefs({ chartWindow });
      set({ chartWindow });
    },
    setTheme: (theme) => {
      savePrefs({ theme });
      set({ theme });
    },
    setNotice: (notice) => set({ notice }),
    lastFaultAt: () => lastFaultStart(get().faults, deriveIncidents(model.traces.all(), get().faults)),
  }));
}

function anotherRouter(known: RouterStats, incoming: RouterStats): string {
  // 24-hour HH:MM:SS like every other time on the page (the locale's format may be 12-hour).
  const at = fmtClock(incoming.started_at).slice(0, 8);
  return `Another router answered (instance ${incoming.instance.slice(0, 8)}, started ${at}; was ${known.instance.slice(0, 8)}): the view was reset.`;
}
