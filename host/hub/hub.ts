// The dashboard hub: one picture over several routers (replicas of `baton router --replicas`,
// routers given by URL, or the pods of a Service). It follows each router (link.ts), renames
// what would collide (request ids become `<label>/<id>`; workers get the hub's own ids, one per
// URL), and re-emits everything on one event bus of its own, so pages read the hub exactly as
// they read one router: the same /events envelopes and replay, the same Snapshot and LiveState.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { EventBus } from '../../router/events/bus.ts';
import type { BatonEvent, DiscoveryStatus, RouterStats, RouterTotals, WorkerHealth, WorkerInfo } from '../../router/events/types.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import { snapshotRows } from '../actions.ts';
import type { HubState, RouterLinkStatus, Snapshot, WorkerMatrixRow } from '../contract.ts';
import { InFlightEvents } from '../inflight.ts';
import type { DiscoverySink, DiscoverySource } from '../../router/discovery/types.ts';
import { DEFAULT_TIMINGS, RouterLink, type LinkHandlers, type LinkTimings } from './link.ts';

export interface HubOptions {
  /** Router URLs. Each is asked for GET /replicas: a `--replicas` primary brings each of its replicas. */
  routers: string[];
  /** Headers for every call to a router (an admin token: `authorization: Bearer ...`). */
  headers?: Record<string, string>;
  timings?: Partial<LinkTimings>;
  /** Rows kept per router (the hub's copy of its /traces). */
  rowsPerRouter?: number;
  /** How often each given URL's /replicas is read again (replicas restart, new ones appear). */
  replicasMs?: number;
  /**
   * The index of a worker URL in the host's own simulated cluster, else null (`baton serve
   * --replicas`): the routers were given it as a plain URL, the hub marks it simulated so that
   * pages show its fault buttons.
   */
  simIndex?(url: string): number | null;
  /**
   * The address clients send requests to when the routers share one (a `--replicas` primary's
   * port); absent: each router is sent to at its own URL (`serve --router`).
   */
  front?: string | null;
}

/** A row of GET /replicas (the replicas' contract). */
interface ReplicaEntry {
  id: string;
  index: number;
  epoch: number;
  url: string;
  state?: string;
}

const SEP = '/';
const HEALTH_RANK: Record<WorkerHealth, number> = { healthy: 0, unknown: 1, draining: 2, benched: 3, unhealthy: 4, circuit_open: 5, dead: 6 };
const CIRCUIT_RANK = { closed: 0, half_open: 1, open: 2 } as const;

interface LinkData {
  link: RouterLink;
  inflight: InFlightEvents;
  rows: TraceRow[];
  keys: Set<string>;
  /** The router's worker infos by URL, and its worker ids to URLs. */
  workers: Map<string, WorkerInfo>;
  loading: boolean;
  reload: boolean;
}

const rowKey = (r: TraceRow) => (r.kind === 'request' ? `q|${r.request_id}` : `a|${r.request_id}|${r.attempt}`);

function requestIds(events: BatonEvent[]): string[] {
  const ids = new Set<string>();
  for (const e of events) if ('request_id' in e) ids.add(e.request_id);
  return [...ids];
}

/** The event with its request ids under `label/`; worker events are handled by the hub itself. */
function renamed(e: BatonEvent, prefix: string): BatonEvent {
  if (e.type === 'attempt_ended') return { ...e, row: { ...e.row, request_id: prefix + e.row.request_id } };
  if (e.type === 'request_finished') return { ...e, row: { ...e.row, request_id: prefix + e.row.request_id } };
  if ('request_id' in e) return { ...e, request_id: prefix + e.request_id };
  return e;
}

export class Hub {
  readonly bus = new EventBus();
  readonly instance = randomUUID();
  readonly startedAt = Date.now();
  private readonly links = new Map<string, LinkData>();
  private readonly byLabel = new Map<string, LinkData>();
  /** Hub worker ids by worker URL, for the life of the hub (stable colours). */
  private readonly workerIds = new Map<string, string>();
  /** The last merged info sent per worker URL, less the figures that move every poll. */
  private readonly sentWorkers = new Map<string, string>();
  private readonly ownerLost: string[] = [];
  private readonly timings: LinkTimings;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private readonly sources: DiscoverySource[] = [];
  /** Events that threw while being merged (a bug: the first is printed). */
  ingestErrors = 0;

  constructor(private readonly opts: HubOptions) {
    this.timings = { ...DEFAULT_TIMINGS, ...opts.timings };
  }

  async start(): Promise<void> {
    // One after the other: labels (r0, r1, ...) follow the order the routers were given in.
    for (const [i, url] of this.opts.routers.entries()) await this.resolve(url.replace(/\/$/, ''), i);
    const t = setInterval(() => {
      for (const [i, url] of this.opts.routers.entries()) void this.resolve(url.replace(/\/$/, ''), i);
    }, this.opts.replicasMs ?? 1000);
    t.unref();
    this.timers.push(t);
  }

  /**
   * Routers found by a discovery source (router/discovery/: the Kubernetes Pods or EndpointSlices
   * source, configured to select the router pods): each one it lists is followed. A router pod
   * that goes away stays in the strip as lost; one that comes back under the same key is followed
   * at its new address.
   */
  async addSource(source: DiscoverySource): Promise<void> {
    const sink: DiscoverySink = {
      upsert: (w) => this.follow(`${source.name}:${w.key}`, w.url.replace(/\/$/, '')),
      drain: () => undefined,
      remove: () => undefined,
      resync: (all) => {
        for (const w of all) this.follow(`${source.name}:${w.key}`, w.url.replace(/\/$/, ''));
      },
      state: () => undefined,
    };
    this.sources.push(source);
    await source.start(sink);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.sources.map((s) => s.stop().catch(() => undefined)));
    for (const t of this.timers) clearInterval(t);
    await Promise.all([...this.links.values()].map((d) => d.link.stop()));
  }

  /** A given URL's routers: its /replicas when it answers one, else itself. */
  private async resolve(url: string, source: number): Promise<void> {
    if (this.stopped) return;
    let replicas: ReplicaEntry[] | null = null;
    let draining: { index: number; epoch: number }[] = [];
    try {
      const res = await request(`${url}/replicas`, { headers: this.opts.headers ?? {}, headersTimeout: 1000, bodyTimeout: 1000 });
      if (res.statusCode === 200) {
        const list = (await res.body.json()) as { replicas?: ReplicaEntry[]; reload?: { draining?: { index: number; epoch: number }[] } };
        replicas = list.replicas ?? null;
        draining = list.reload?.draining ?? [];
      } else await res.body.dump();
    } catch {
      // unreachable now: follow the URL itself, which the link reports as lost
    }
    if (!replicas || replicas.length === 0) {
      // Unreachable (or no /replicas): a source already followed keeps its links, which report
      // the router lost and reconnect to it; a second link to the same router would count it twice.
      if (this.hasSource(source)) return;
      return this.follow(`${source}`, url);
    }
    const plain = this.links.get(`${source}`);
    for (const r of replicas) {
      if (typeof r.url !== 'string') continue;
      const own = r.url.replace(/\/$/, '');
      // Followed already as a plain URL (it was unreachable when first asked): the same router.
      if (plain && plain.link.url === own) continue;
      // A reload (SIGHUP) replaced this slot's process and the old one still drains: keep
      // following the old one until it has gone, so that the requests it finishes reach the hub;
      // then the new one's epoch makes the hub read its /traces, and nothing is missed.
      const followed = this.links.get(`${source}.${r.index}`)?.link;
      if (followed && followed.url !== own && draining.some((d) => d.index === r.index && d.epoch === followed.replica?.epoch)) continue;
      this.follow(`${source}.${r.index}`, own);
    }
  }

  private hasSource(source: number): boolean {
    for (const key of this.links.keys()) if (key === `${source}` || key.startsWith(`${source}.`)) return true;
    return false;
  }

  private follow(key: string, url: string): void {
    const known = this.links.get(key);
    if (known) return known.link.retarget(url);
    if (this.stopped) return;
    const label = `r${this.links.size}`;
    const link = new RouterLink(label, url, this.handlers, this.timings, this.opts.headers ?? {});
    const data: LinkData = { link, inflight: new InFlightEvents(), rows: [], keys: new Set(), workers: new Map(), loading: false, reload: false };
    this.links.set(key, data);
    this.byLabel.set(label, data);
    link.start();
  }

  private readonly handlers: LinkHandlers = {
    events: (link, events) => {
      const d = this.byLabel.get(link.label)!;
      const prefix = link.label + SEP;
      for (const e of events) {
        try {
          this.ingest(d, e, prefix);
        } catch (err) {
          // One event the hub cannot merge must not cost the rest of the message.
          this.ingestErrors++;
          if (this.ingestErrors === 1) console.error(`baton hub: could not merge a ${e.type} event of ${link.label}: ${(err as Error).stack ?? err}`);
        }
      }
    },
    reset: (link, reason) => {
      const d = this.byLabel.get(link.label)!;
      // Another life of the router: what was in flight there will never end. In each case what
      // ended unheard is in its /traces.
      if (reason === 'epoch') this.orphan(d);
      void this.load(d);
    },
    stats: (link, stats, restarted) => {
      const d = this.byLabel.get(link.label)!;
      if (restarted) this.orphan(d);
      const before = new Set(d.workers.keys());
      d.workers = new Map(stats.workers.map((w) => [w.url, w]));
      for (const url of new Set([...before, ...d.workers.keys()])) this.sendWorker(url);
    },
    state: (link, _from, to) => {
      const d = this.byLabel.get(link.label)!;
      if (to === 'lost') for (const id of requestIds(d.inflight.events())) this.noteLost(id);
      // Its view of the workers no longer counts in the matrix (or counts again).
      for (const url of d.workers.keys()) this.sendWorker(url);
    },
  };

  private ingest(d: LinkData, e: BatonEvent, prefix: string): void {
    switch (e.type) {
      case 'worker_state':
        d.workers.set(e.worker.url, e.worker);
        return this.sendWorker(e.worker.url);
      case 'worker_removed': {
        for (const [url, w] of d.workers) {
          if (w.id !== e.worker_id) continue;
          d.workers.delete(url);
          this.sendWorker(url);
        }
        return;
      }
      case 'discovery_state':
        return this.bus.emit(e);
      case 'attempt_ended':
      case 'request_finished': {
        const out = renamed(e, prefix) as Extract<BatonEvent, { row: TraceRow }>;
        if (!this.keep(d, out.row)) {
          // A finish already held (read from /traces first) still ends what the stream tracked since.
          if (out.type === 'request_finished') d.inflight.add(out);
          return;
        }
        if (out.type === 'request_finished' || !d.keys.has(`q|${out.row.request_id}`)) d.inflight.add(out);
        return this.bus.emit(out);
      }
      default: {
        const out = renamed(e, prefix);
        // /traces and the stream race: a request whose end the hub already holds is not in flight
        // (tracked, it would be listed owner_lost when its router goes).
        if ('request_id' in out && d.keys.has(`q|${out.request_id}`)) return this.bus.emit(out);
        d.inflight.add(out);
        return this.bus.emit(out);
      }
    }
  }

  /** Keeps a row unless it is already held (a row both loaded from /traces and received as an event). */
  private keep(d: LinkData, row: TraceRow): boolean {
    const key = rowKey(row);
    if (d.keys.has(key)) return false;
    d.keys.add(key);
    d.rows.push(row);
    const cap = this.opts.rowsPerRouter ?? 50_000;
    if (d.rows.length > cap * 1.25) {
      for (const r of d.rows.splice(0, d.rows.length - cap)) d.keys.delete(rowKey(r));
    }
    return true;
  }

  /** The router's /traces: rows it ended before the hub heard of them (the hub's start, a gap). */
  private async load(d: LinkData): Promise<void> {
    // A load asked for while one runs must read /traces again afterwards: the running one may have
    // read it before the stream that makes the rest arrive was open.
    if (d.loading) {
      d.reload = true;
      return;
    }
    d.loading = true;
    try {
      do {
        d.reload = false;
        await this.loadOnce(d);
      } while (d.reload && !this.stopped);
    } finally {
      d.loading = false;
    }
  }

  private async loadOnce(d: LinkData): Promise<void> {
    try {
      const res = await request(`${d.link.url}/traces?format=jsonl`, { headers: this.opts.headers ?? {}, headersTimeout: 5000, bodyTimeout: 30_000 });
      if (res.statusCode !== 200) {
        await res.body.dump();
        return;
      }
      const text = await res.body.text();
      const prefix = d.link.label + SEP;
      for (const line of text.split('\n')) {
        if (line === '') continue;
        const row = JSON.parse(line) as TraceRow;
        const e: BatonEvent = row.kind === 'request' ? { type: 'request_finished', t: row.ended_at, row } : { type: 'attempt_ended', t: row.ended_at, row };
        this.ingest(d, e, prefix);
      }
    } catch {
      // the router went away mid-read: the next reset or restart loads again
    }
  }

  /** Its requests in flight are its previous life's: gone with it. */
  private orphan(d: LinkData): void {
    for (const id of requestIds(d.inflight.events())) this.noteLost(id);
    d.inflight = new InFlightEvents();
  }

  private noteLost(id: string): void {
    if (this.ownerLost.includes(id)) return;
    this.ownerLost.push(id);
    if (this.ownerLost.length > 500) this.ownerLost.shift();
  }

  /** The views that count for a worker: the routers not lost that know it. */
  private views(url: string): { label: string; info: WorkerInfo }[] {
    const out: { label: string; info: WorkerInfo }[] = [];
    for (const d of this.byLabel.values()) {
      if (d.link.state === 'lost') continue;
      const info = d.workers.get(url);
      if (info) out.push({ label: d.link.label, info });
    }
    return out;
  }

  private hubWorkerId(url: string): string {
    let id = this.workerIds.get(url);
    if (!id) this.workerIds.set(url, (id = `w${this.workerIds.size}`));
    return id;
  }

  /** One worker across routers: the worst health and circuit, in flight summed, draining if any drains it. */
  mergedWorker(url: string): WorkerInfo | null {
    const views = this.views(url);
    if (views.length === 0) return null;
    let worst = views[0]!.info;
    let circuit = worst.circuit;
    let inFlight = 0;
    let draining = false;
    for (const { info } of views) {
      if (HEALTH_RANK[info.health] > HEALTH_RANK[worst.health]) worst = info;
      if (CIRCUIT_RANK[info.circuit] > CIRCUIT_RANK[circuit]) circuit = info.circuit;
      inFlight += info.in_flight;
      draining ||= info.draining;
    }
    const simIndex = this.opts.simIndex?.(url) ?? null;
    return { ...worst, id: this.hubWorkerId(url), circuit, in_flight: inFlight, draining, ...(simIndex !== null ? { simulated: true, sim_index: simIndex } : {}) };
  }

  private sendWorker(url: string): void {
    const merged = this.mergedWorker(url);
    const id = this.hubWorkerId(url);
    if (!merged) {
      if (this.sentWorkers.delete(url)) this.bus.emit({ type: 'worker_removed', t: Date.now(), worker_id: id });
      return;
    }
    const { in_flight: _f, reported_load: _l, hit_rate: _h, ...shape } = merged;
    const text = JSON.stringify(shape);
    if (this.sentWorkers.get(url) === text) return;
    this.sentWorkers.set(url, text);
    this.bus.emit({ type: 'worker_state', t: Date.now(), worker: merged });
  }

  workers(): WorkerInfo[] {
    const urls = new Set<string>();
    for (const d of this.byLabel.values()) for (const url of d.workers.keys()) urls.add(url);
    const out: WorkerInfo[] = [];
    for (const url of urls) {
      const w = this.mergedWorker(url);
      if (w) out.push(w);
    }
    return out.sort((a, b) => Number(a.id.slice(1)) - Number(b.id.slice(1)));
  }

  matrix(): WorkerMatrixRow[] {
    return this.workers().map((w) => {
      const views = this.views(w.url);
      const health: Record<string, WorkerHealth> = {};
      for (const v of views) health[v.label] = v.info.health;
      return { id: w.id, url: w.url, in_flight: w.in_flight, healthy: views.filter((v) => v.info.health === 'healthy').length, of: views.length, health };
    });
  }

  /** Request rows of the router's current life (its /traces count). */
  private requestsOf(d: LinkData): number {
    const since = d.link.stats?.started_at ?? 0;
    let n = 0;
    for (const r of d.rows) if (r.kind === 'request' && r.ended_at >= since) n++;
    return n;
  }

  routers(): RouterLinkStatus[] {
    return [...this.byLabel.values()].map((d) => d.link.status(this.requestsOf(d)));
  }

  state(): HubState {
    return { routers: this.routers(), workers: this.matrix(), owner_lost: [...this.ownerLost], front: this.opts.front ?? null };
  }

  /** The routers' figures as one router's: totals summed over their latest readings. */
  stats(): RouterStats {
    const totals: RouterTotals = { requests: 0, finished: 0, failed: 0, cancelled: 0, migrations: 0, attempts_started: 0, tokens: 0, in_flight: 0 };
    const discovery: DiscoveryStatus[] = [];
    for (const d of this.byLabel.values()) {
      const s = d.link.stats;
      if (!s) continue;
      for (const k of Object.keys(totals) as (keyof RouterTotals)[]) totals[k] += s.totals[k];
      if (s.discovery) discovery.push(...s.discovery);
    }
    return { instance: this.instance, started_at: this.startedAt, t: Date.now(), totals, workers: this.workers(), ...(discovery.length > 0 ? { discovery } : {}) };
  }

  /** Every router's rows, merged by end time, oldest first. */
  rows(): TraceRow[] {
    const all: TraceRow[] = [];
    for (const d of this.byLabel.values()) all.push(...d.rows);
    return all.sort((a, b) => a.ended_at - b.ended_at);
  }

  snapshot(url: string): Snapshot {
    const inflight: BatonEvent[] = [];
    for (const d of this.byLabel.values()) inflight.push(...d.inflight.events());
    const router = this.stats();
    return { routerUrl: url, t: Date.now(), workers: router.workers, rows: snapshotRows(this.rows()), inflight, sim: null, traffic: null, router, faults: [], hub: this.state() };
  }

  /** The router that owns a hub request id, and the id it knows. */
  owner(hubId: string): { link: RouterLink; id: string; rows: () => TraceRow[] } | null {
    const cut = hubId.indexOf(SEP);
    if (cut < 0) return null;
    const d = this.byLabel.get(hubId.slice(0, cut));
    if (!d) return null;
    return { link: d.link, id: hubId.slice(cut + 1), rows: () => d.rows.filter((r) => r.request_id === hubId) };
  }

  /** Links by label, for worker actions sent to every router. */
  allLinks(): RouterLink[] {
    return [...this.byLabel.values()].map((d) => d.link);
  }

  /** The router's own worker id for a hub worker id, per router. */
  routerWorkerIds(hubWorkerId: string): { link: RouterLink; id: string }[] {
    const url = [...this.workerIds].find(([, id]) => id === hubWorkerId)?.[0];
    if (!url) return [];
    const out: { link: RouterLink; id: string }[] = [];
    for (const d of this.byLabel.values()) {
      const w = d.workers.get(url);
      if (w) out.push({ link: d.link, id: w.id });
    }
    return out;
  }
}
