// Incidents as objects: each starts at the first failure the router attributes to a worker (a
// kill, crash, reset, stall, drain, failed probe or deleted pod: a fault mark, or an attempt that
// ended with its worker blamed) and gathers what followed on that worker until it has been quiet
// for a while: the attempts broken there, the requests they belonged to and what became of each
// (migrated and finished, failed and with what reason), requests that found no worker at all
// meanwhile, and the recovery. Pure: derived from trace rows and fault marks alone, so a page, a
// trace file and an export all draw the same incidents (`deriveIncidents`).
import type { FaultKind, FaultMark } from '../../../host/contract.ts';
import type { AttemptRow, ErrorKind, RequestRow, TraceRow } from '../../../router/trace/row.ts';
import { failureWords } from './failure-reason.ts';
import { lastFault } from './faults.ts';

/** Marks that start or continue an incident (as "since the last fault" counts them). */
const ONSET_MARKS: ReadonlySet<FaultKind> = new Set<FaultKind>(['kill', 'hang', 'reset', 'reject', 'slow', 'drain', 'remove', 'down']);
/**
 * Onset marks that name a fault's cause, whose time keys its incident. Not `down`: the health
 * check's verdict comes seconds after the failures it confirms.
 */
const CAUSE_MARKS: ReadonlySet<FaultKind> = new Set<FaultKind>([...ONSET_MARKS].filter((k) => k !== 'down'));
/** Marks after which the worker is back: the end of its incident. */
const RECOVERY_MARKS: ReadonlySet<FaultKind> = new Set<FaultKind>(['restart', 'clear', 'undrain', 'add']);
/**
 * Attempt failures the router attributes to the worker (router/core/failure.ts BLAMES_WORKER),
 * and a drain's move (planned, but the worker is going away). Not a first-token timeout (a slow
 * queue is not the worker's fault), nor the request's own refusals.
 */
const ATTRIBUTED: ReadonlySet<ErrorKind> = new Set<ErrorKind>(['connect', 'http_5xx', 'stream_broken', 'stalled', 'engine_abort', 'drain', 'prefill_failed']);

/**
 * The worker an attempt's failure belongs to: a P/D attempt whose prefill leg failed
 * (`failed_leg: prefill`, docs/pd.md) broke on its prefill server, not on the decode worker that
 * `worker` names (the router benches the prefill server and leaves the decode worker alone).
 */
export function blamedWorker(row: Pick<AttemptRow, 'worker' | 'prefill_worker' | 'failed_leg'>): string {
  return row.failed_leg === 'prefill' && row.prefill_worker ? row.prefill_worker : row.worker;
}

export type Severity = 'contained' | 'minor' | 'major';

export interface Incident {
  /**
   * `<worker>@<t>`, stable while the incident grows: `t` is the time of the fault mark that
   * opened it (a kill, hang, reset, ... in its group: a mark's time never moves), else of its
   * first onset. Not `start`, which moves earlier when a row that ended just before the mark
   * arrives after it (the page reads marks by poll, rows by events).
   */
  id: string;
  /** The worker's URL (or its id, for a mark that named no URL). */
  worker: string;
  workerId: string | null;
  /** The first failure attributed to the worker (epoch ms). */
  start: number;
  /** The last thing it gathered: a failure on the worker, or the end of a request it touched. */
  end: number;
  /** What started it: `kill (dashboard)`, `w0 benched`, `stream_broken`, ... */
  cause: string;
  /** What the router read: the first broken attempt's `<error_kind>: <error_evidence>`, or the down mark's. */
  evidence: string | null;
  /** The health check's verdict, when a down mark carried one. */
  verdict: string | null;
  /** When the worker was back (a restart, clear or undrain mark, or the router reporting it healthy); null: not seen. */
  recoveredAt: number | null;
  marks: FaultMark[];
  /** Requests it touched, oldest first: those with an attempt broken on the worker, and those that found no worker meanwhile. */
  requestIds: string[];
  /** Attempts broken on the worker. */
  broken: number;
  /** Touched requests that continued on another worker and finished. */
  migrated: number;
  /** Touched requests that failed, by the reason their client got (`no_worker`, `migration_exhausted`, ...). */
  failed: number;
  failedBy: Record<string, number>;
  /** Touched requests whose end the rows do not hold yet (running, or their row is gone). */
  open: number;
  /** By failed requests: none `contained`, under 10 `minor`, else `major`. */
  severity: Severity;
}

export interface IncidentOptions {
  /** A worker quiet (no fault mark, no attributed failure) this long ends its incident. */
  quietMs?: number;
}

const QUIET_MS = 10_000;

interface Onset {
  t: number;
  mark: FaultMark | null;
  row: AttemptRow | null;
}

/**
 * The failure type of a failed request row: its client_error's type, else `no_worker` for no
 * attempt, else its last attempt's error kind (never a bare `failed`, which read `1 failed: failed`).
 */
function failureType(row: RequestRow, lastKind: ErrorKind | null = null): string {
  const text = row.client_error ?? null;
  if (text) {
    const colon = text.indexOf(': ');
    return colon > 0 ? text.slice(0, colon) : text;
  }
  return row.attempts === 0 ? 'no_worker' : lastKind ?? 'failed';
}

export function severityOf(failed: number): Severity {
  return failed === 0 ? 'contained' : failed < 10 ? 'minor' : 'major';
}

/**
 * The incidents in these rows and marks, oldest first. Rows and marks may come in any order
 * (the result does not depend on it), and rows of requests no fault touched change nothing.
 */
export function deriveIncidents(rows: readonly TraceRow[], marks: readonly FaultMark[], options: IncidentOptions = {}): Incident[] {
  const quiet = options.quietMs ?? QUIET_MS;
  const onsets = new Map<string, Onset[]>();
  const idOfUrl = new Map<string, string>();
  const urlOfId = new Map<string, string>();
  for (const m of marks) if (m.worker !== null && m.url !== null) { idOfUrl.set(m.url, m.worker); urlOfId.set(m.worker, m.url); }
  const push = (key: string, o: Onset) => {
    const list = onsets.get(key);
    if (list) list.push(o);
    else onsets.set(key, [o]);
  };
  const recoveries = new Map<string, number[]>();
  for (const m of marks) {
    const key = m.url ?? (m.worker !== null ? urlOfId.get(m.worker) ?? m.worker : null);
    if (key === null || m.kind === 'router_lost') continue;
    if (ONSET_MARKS.has(m.kind)) push(key, { t: m.t, mark: m, row: null });
    else if (RECOVERY_MARKS.has(m.kind)) recoveries.set(key, [...(recoveries.get(key) ?? []), m.t]);
  }
  const requests = new Map<string, RequestRow>();
  const noWorker: RequestRow[] = [];
  const lastKinds = new Map<string, { attempt: number; kind: ErrorKind | null }>();
  for (const r of rows) {
    if (r.kind === 'attempt' && (lastKinds.get(r.request_id)?.attempt ?? -1) < r.attempt) lastKinds.set(r.request_id, { attempt: r.attempt, kind: r.error_kind });
    if (r.kind === 'request') {
      requests.set(r.request_id, r);
      if (r.outcome === 'failed' && r.attempts === 0) noWorker.push(r);
    } else if (r.error_kind !== null && ATTRIBUTED.has(r.error_kind) && r.outcome !== 'finished' && r.outcome !== 'cancelled') {
      push(blamedWorker(r), { t: r.ended_at, mark: null, row: r });
    }
  }

  const kindOf = (id: string) => lastKinds.get(id)?.kind ?? null;
  const incidents: Building[] = [];
  for (const [worker, list] of onsets) {
    // Ties: a mark before a row, then by request id and attempt, so the order of the input never matters.
    list.sort((a, b) => a.t - b.t || (a.mark ? 0 : 1) - (b.mark ? 0 : 1) || onsetKey(a).localeCompare(onsetKey(b)));
    let group: Onset[] = [];
    const flush = () => {
      if (group.length > 0) incidents.push(build(worker, group, idOfUrl.get(worker) ?? null, requests, recoveries.get(worker) ?? [], kindOf));
      group = [];
    };
    for (const o of list) {
      if (group.length > 0 && o.t - group[group.length - 1]!.t > quiet) flush();
      group.push(o);
    }
    flush();
  }
  const workerIncidents = [...incidents];
  incidents.push(...routerLost(marks, requests.values(), quiet));
  incidents.sort((a, b) => a.start - b.start || a.worker.localeCompare(b.worker));

  // A request that found no worker at all belongs to the incident under way when it failed (the
  // latest to start, of those whose failures reach within `quiet` of it); a router's loss is no
  // reason for its peers to find no worker.
  for (const r of noWorker.sort((a, b) => a.ended_at - b.ended_at || a.request_id.localeCompare(b.request_id))) {
    let owner: Building | null = null;
    for (const i of workerIncidents) {
      if (i.start <= r.ended_at && r.ended_at <= i.lastFailure + quiet && (owner === null || i.start >= owner.start)) owner = i;
    }
    if (!owner || owner.touched.has(r.request_id)) continue;
    owner.touched.add(r.request_id);
    owner.requestIds.push(r.request_id);
    count(owner, r, null);
  }
  return incidents.map(({ touched: _t, lastFailure: _l, ...i }) => i);
}

/**
 * One incident per router lost with requests in flight (a `router_lost` mark, behind a dashboard
 * hub): the requests it cut are those of its label whose row says `router_lost`, each given to
 * the mark of its router nearest in time (within `quiet`). Its workers are not to blame.
 */
function routerLost(marks: readonly FaultMark[], requests: Iterable<RequestRow>, quiet: number): Building[] {
  const lost = marks.filter((m) => m.kind === 'router_lost').sort((a, b) => a.t - b.t || (a.worker ?? '').localeCompare(b.worker ?? ''));
  if (lost.length === 0) return [];
  const out = lost.map((m): Building => {
    const label = m.worker ?? m.url ?? '?';
    return {
      id: `router:${label}@${m.t}`, worker: m.url ?? label, workerId: label, start: m.t, end: m.t, cause: `router ${label} lost`,
      evidence: m.detail, verdict: null, recoveredAt: null, marks: [m], requestIds: [], broken: 0, migrated: 0, failed: 0, failedBy: {},
      open: 0, severity: 'contained', touched: new Set(), lastFailure: m.t,
    };
  });
  const cut = [...requests].filter((r) => r.outcome === 'failed' && failureType(r) === 'router_lost');
  cut.sort((a, b) => a.ended_at - b.ended_at || a.request_id.localeCompare(b.request_id));
  for (const r of cut) {
    let owner: Building | null = null;
    for (const i of out) {
      if (!r.request_id.startsWith(`${i.workerId}/`) || Math.abs(r.ended_at - i.start) > quiet) continue;
      if (owner === null || Math.abs(r.ended_at - i.start) < Math.abs(r.ended_at - owner.start)) owner = i;
    }
    if (!owner) continue;
    owner.touched.add(r.request_id);
    owner.requestIds.push(r.request_id);
    // Its running attempt was cut with the router.
    owner.broken++;
    count(owner, r, null);
  }
  return out;
}

function onsetKey(o: Onset): string {
  return o.row ? `r:${o.row.request_id}:${String(o.row.attempt).padStart(6, '0')}` : `m:${o.mark!.kind}:${o.mark!.source}`;
}

type Building = Incident & { touched: Set<string>; lastFailure: number };

function count(i: Building, r: RequestRow | undefined, lastKind: ErrorKind | null): void {
  if (!r) {
    i.open++;
    return;
  }
  i.end = Math.max(i.end, r.ended_at);
  if (r.outcome === 'failed') {
    i.failed++;
    const type = failureType(r, lastKind);
    i.failedBy[type] = (i.failedBy[type] ?? 0) + 1;
    i.severity = severityOf(i.failed);
  } else if (r.outcome === 'finished' && r.migrations > 0) {
    i.migrated++;
  }
}

function build(worker: string, group: Onset[], workerId: string | null, requests: Map<string, RequestRow>, recoveries: number[], kindOf: (id: string) => ErrorKind | null): Building {
  const first = group[0]!;
  const start = first.t;
  const lastFailure = group[group.length - 1]!.t;
  const marks = group.flatMap((o) => (o.mark ? [o.mark] : []));
  const down = marks.find((m) => m.kind === 'down') ?? null;
  const firstRow = group.find((o) => o.row !== null)?.row ?? null;
  const opener = marks.find((m) => CAUSE_MARKS.has(m.kind));
  const i: Building = {
    id: `${worker}@${opener ? opener.t : start}`,
    worker,
    workerId: workerId ?? marks.find((m) => m.worker !== null)?.worker ?? null,
    start,
    end: lastFailure,
    cause: first.mark
      ? first.mark.kind === 'down' ? `${first.mark.worker ?? worker} ${first.mark.detail ?? 'down'}` : `${first.mark.kind} (${first.mark.source})${first.mark.detail ? `: ${first.mark.detail}` : ''}${first.mark.pod ? ` · pod ${first.mark.pod}${first.mark.node ? ` on ${first.mark.node}` : ''}` : ''}`
      : first.row!.error_kind!,
    evidence: firstRow ? `${firstRow.error_kind}: ${firstRow.error_evidence ?? firstRow.error ?? 'no evidence recorded'}` : down?.evidence ?? null,
    verdict: down?.verdict ?? null,
    recoveredAt: null,
    marks,
    requestIds: [],
    broken: 0,
    migrated: 0,
    failed: 0,
    failedBy: {},
    open: 0,
    severity: 'contained',
    touched: new Set(),
    lastFailure,
  };
  const back = [...recoveries.filter((t) => t >= start), ...marks.flatMap((m) => (m.recoveredAt != null ? [m.recoveredAt] : []))].sort((a, b) => a - b)[0];
  if (back !== undefined) {
    i.recoveredAt = back;
    i.end = Math.max(i.end, back);
  }
  for (const o of group) {
    if (!o.row) continue;
    i.broken++;
    const id = o.row.request_id;
    if (i.touched.has(id)) continue;
    i.touched.add(id);
    i.requestIds.push(id);
    count(i, requests.get(id), kindOf(id));
  }
  return i;
}

/**
 * The incident a focus on `focus` (an id, and the requests it held when clicked) now is: the one
 * of that id, else, when its id moved (a cause mark read after the rows it explains, or two
 * incidents of a worker joined by a failure between them), the incident of the same worker that
 * holds one of its requests. Null: gone (its rows were let go).
 */
export function followFocus(incidents: readonly Incident[], focus: { id: string; ids: ReadonlySet<string> }): Incident | null {
  const exact = incidents.find((i) => i.id === focus.id);
  if (exact) return exact;
  const worker = focus.id.slice(0, focus.id.lastIndexOf('@'));
  return incidents.find((i) => i.id.slice(0, i.id.lastIndexOf('@')) === worker && i.requestIds.some((id) => focus.ids.has(id))) ?? null;
}

/** "31 broken · 29 migrated · 2 failed: no worker left". */
export function incidentSummary(i: Incident): string {
  const parts = [`${i.broken} broken`, `${i.migrated} migrated`];
  if (i.failed > 0) {
    const by = Object.entries(i.failedBy).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    parts.push(`${i.failed} failed: ${by.map(([type, n]) => (by.length > 1 ? `${n} ${failureWords(type)}` : failureWords(type))).join(', ')}`);
  } else {
    parts.push('0 failed');
  }
  if (i.open > 0) parts.push(`${i.open} still running`);
  return parts.join(' · ');
}

/** The incident a fault mark belongs to (the one whose marks hold it), else the one under way at its time on its worker. */
export function incidentOfMark(incidents: readonly Incident[], m: FaultMark): Incident | null {
  for (const i of incidents) if (i.marks.includes(m) || i.marks.some((x) => x.t === m.t && x.kind === m.kind && x.worker === m.worker)) return i;
  let best: Incident | null = null;
  for (const i of incidents) {
    if (i.start <= m.t && m.t <= i.end && (best === null || i.start > best.start)) best = i;
  }
  return best;
}

/**
 * When the last fault began: the start of the latest incident (its first broken attempt, or its
 * first fault mark), not the health check that confirmed it seconds later; a fault mark no
 * incident holds counts as it stands. Null: no fault yet.
 */
export function lastFaultStart(marks: readonly FaultMark[], incidents: readonly Incident[]): number | null {
  let t: number | null = null;
  for (const i of incidents) if (t === null || i.start > t) t = i.start;
  const f = lastFault(marks);
  if (f && !incidentOfMark(incidents, f) && (t === null || f.t > t)) t = f.t;
  return t;
}

/**
 * A time window that shows these rows: from the earliest start to the latest end, padded by a
 * tenth on each side (at least 1 s). For a filter whose rows are older than the live window,
 * and for an incident, so they never scroll out of view.
 */
export function fitWindow(spans: Iterable<{ from: number; to: number }>): { from: number; to: number } | null {
  let from = Infinity;
  let to = -Infinity;
  for (const s of spans) {
    if (s.from < from) from = s.from;
    if (s.to > to) to = s.to;
  }
  if (!Number.isFinite(from) || !Number.isFinite(to)) return null;
  const pad = Math.max(1000, (to - from) / 10);
  return { from: from - pad, to: to + pad };
}
