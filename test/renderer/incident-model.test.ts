// Incidents as objects (renderer/src/store/incidents.ts): a scenario read as an on-call engineer
// would ("31 broken · 29 migrated · 2 failed: no worker left"), and the model's laws as
// properties over random rows and marks: every failure attributed to a worker is in exactly one
// incident of that worker, incidents of a worker are apart by more than the quiet time, the
// order of the input never matters, and ordinary traffic changes nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blamedWorker, deriveIncidents, fitWindow, followFocus, incidentOfMark, incidentSummary, lastFaultStart, type Incident } from '../../renderer/src/store/incidents.ts';
import { clientFailure, uncovered } from '../../renderer/src/store/failure-reason.ts';
import type { FaultMark } from '../../host/contract.ts';
import type { AttemptRow, ErrorKind, RequestRow, TraceRow } from '../../router/trace/row.ts';
import type { RequestView } from '../../renderer/src/store/request-view.ts';
import { NO_FILTERS, visibleIds } from '../../renderer/src/store/filters.ts';
import { faultLabel } from '../../renderer/src/store/faults.ts';

const W0 = 'http://127.0.0.1:9000';
const W1 = 'http://127.0.0.1:9001';

function attempt(id: string, n: number, worker: string, t0: number, t1: number, kind: ErrorKind | null, tokens = 10): AttemptRow {
  return {
    kind: 'attempt', format: 'sglang', request_id: id, attempt: n, rid: `${id}~m${n}`, worker, started_at: t0, ended_at: t1, ttft_ms: 5,
    prompt_tokens_sent: 8, replayed_tokens: 0, tokens, budget_before: 100, budget_after: 90, cached_tokens: 0, placement_prefix: null, placement_reason: null,
    outcome: kind === null ? 'finished' : kind === 'drain' ? 'drained' : 'failed', error_kind: kind, error: kind ? 'ERR_WORKER_CLOSED' : null,
    error_evidence: kind ? 'transport error ERR_WORKER_CLOSED after the response started' : null, finish_reason: kind ? null : 'length', trace_id: null,
  };
}

function request(id: string, t0: number, t1: number, attempts: number, outcome: RequestRow['outcome'], clientError: string | null = null): RequestRow {
  return {
    kind: 'request', format: 'sglang', request_id: id, attempts, migrations: Math.max(0, attempts - 1), admitted: true, admission_reason: null,
    prompt_tokens: 8, completion_tokens: 20, cached_tokens: 0, finish_reason: outcome === 'finished' ? 'length' : null, outcome,
    duration_ms: t1 - t0, started_at: t0, ended_at: t1, stream: true, max_new_tokens: 100, error: null, trace_id: null,
    client_error: clientError, client_status: clientError ? 503 : null,
  };
}

const mark = (t: number, kind: FaultMark['kind'], url = W0, extra: Partial<FaultMark> = {}): FaultMark =>
  ({ t, kind, worker: url === W0 ? 'w0' : 'w1', url, source: kind === 'down' ? 'router' : 'dashboard', detail: kind === 'down' ? 'benched' : null, ...extra });

describe('an incident, as the engineer reads it', () => {
  it('gathers a kill: the attempts it broke, the requests that moved, those that failed and why, and the recovery', () => {
    const t = 1_000_000;
    const rows: TraceRow[] = [];
    // Ordinary traffic before: no incident.
    for (let i = 0; i < 20; i++) rows.push(attempt(`ok-${i}`, 0, W1, t - 5000 + i, t - 4000 + i, null), request(`ok-${i}`, t - 5000 + i, t - 4000 + i, 1, 'finished'));
    // The kill breaks 31 streams on w0: 29 continue on w1 and finish, 2 find no worker left.
    for (let i = 0; i < 31; i++) {
      const id = `hit-${i}`;
      rows.push(attempt(id, 0, W0, t - 2000, t + 10 + i, 'stream_broken'));
      if (i < 29) rows.push(attempt(id, 1, W1, t + 20 + i, t + 900, null), request(id, t - 2000, t + 900 + i, 2, 'finished'));
      else rows.push(request(id, t - 2000, t + 30 + i, 1, 'failed', 'migration_exhausted: no worker left that can continue this request exactly after: ERR_WORKER_CLOSED'));
    }
    // Meanwhile a request that found no worker at all.
    rows.push(request('none-0', t + 100, t + 101, 0, 'failed', 'no_worker: no healthy worker serves format sglang'));
    const marks = [mark(t, 'kill'), mark(t + 10, 'down', W0, { evidence: 'stream_broken: transport error ERR_WORKER_CLOSED after the response started', verdict: 'dead' }), mark(t + 30_000, 'restart')];
    const [inc, ...more] = deriveIncidents(rows, marks);
    expect(more).toEqual([]);
    expect(inc).toMatchObject({ worker: W0, workerId: 'w0', start: t, cause: 'kill (dashboard)', verdict: 'dead', recoveredAt: t + 30_000, broken: 31, migrated: 29, failed: 3, open: 0, severity: 'minor' });
    expect(inc!.evidence).toBe('stream_broken: transport error ERR_WORKER_CLOSED after the response started');
    expect(inc!.requestIds).toHaveLength(32);
    expect(inc!.failedBy).toEqual({ migration_exhausted: 2, no_worker: 1 });
    expect(incidentSummary(inc!)).toBe('31 broken · 29 migrated · 3 failed: 2 migration exhausted, 1 no worker left');
    // A fault flag opens its incident; the window shows every request it touched.
    expect(incidentOfMark([inc!], marks[1]!)).toBe(inc);
    const touched = new Set(inc!.requestIds);
    const w = fitWindow(rows.filter((r) => touched.has(r.request_id)).map((r) => ({ from: r.started_at, to: r.ended_at })))!;
    expect(w.from).toBeLessThan(t - 2000);
    expect(w.to).toBeGreaterThan(t + 900);
  });

  it("says one reason in the engineer's words, and severity grows with failed requests", () => {
    const t = 5_000;
    const rows: TraceRow[] = [];
    for (let i = 0; i < 12; i++) rows.push(attempt(`f-${i}`, 0, W0, t, t + 1 + i, 'connect'), request(`f-${i}`, t, t + 50, 1, 'failed', 'no_worker: no healthy worker serves format vllm'));
    const [inc] = deriveIncidents(rows, []);
    expect(incidentSummary(inc!)).toBe('12 broken · 0 migrated · 12 failed: no worker left');
    expect(inc!.severity).toBe('major');
    expect(inc!.cause).toBe('connect');
    // Without any failure attributed to a worker there is no incident, even with failed requests (the request's own fault).
    expect(deriveIncidents([attempt('bad', 0, W0, 0, 1, 'validation'), request('bad', 0, 1, 1, 'failed', 'validation: bad')], [])).toEqual([]);
  });

  it("a failed request's row, badge and card say what its client got", () => {
    const view = (summary: RequestRow | null): RequestView => ({ id: 'x', seq: 0, startedAt: 0, endedAt: 1, status: 'failed', admitted: true, admissionReason: null, stream: true, promptTokens: 8, maxNewTokens: 10, attempts: [], migrations: [], completionTokens: 0, error: null, summary, format: 'vllm', front: null, traceId: null });
    expect(clientFailure(view(request('x', 0, 1, 0, 'failed', 'no_worker: no healthy worker serves format vllm')))).toEqual({ type: 'no_worker', text: 'no_worker: no healthy worker serves format vllm', status: 503 });
    // A row of a router that predates client_error, with no attempt: still not `null`.
    expect(clientFailure(view(request('x', 0, 1, 0, 'failed')))?.type).toBe('no_worker');
    expect(clientFailure({ ...view(null), status: 'finished' })).toBeNull();
  });

  it('a focused incident filters the list to its requests; a down flag names the blame, then the verdict', () => {
    const view = (id: string): RequestView => ({ id, seq: 0, startedAt: 0, endedAt: 1, status: 'finished', admitted: true, admissionReason: null, stream: true, promptTokens: 8, maxNewTokens: 10, attempts: [], migrations: [], completionTokens: 0, error: null, summary: null, format: null, front: null, traceId: null });
    const all = ['a', 'b', 'c'];
    const incident = { id: 'x', label: 'w0', summary: '', ids: new Set(['a', 'c']), from: 0, to: 10 };
    expect(visibleIds(all, view, { ...NO_FILTERS, incident })).toEqual(['c', 'a']);
    expect(visibleIds(all, view, NO_FILTERS)).toEqual(['c', 'b', 'a']);
    expect(faultLabel(mark(1, 'down'))).toBe('w0 benched');
    expect(faultLabel(mark(1, 'down', W0, { verdict: 'dead' }))).toBe('w0 benched → dead');
    expect(faultLabel(mark(1, 'remove', W1, { source: 'router', detail: 'OOMKilled (exit code 137)' }))).toBe('remove w1: OOMKilled (exit code 137)');
  });

  it('warns of a format or model no healthy worker serves', () => {
    const w = (id: string, health: string, format: string, model: string) => ({ id, health, format, model_path: model, draining: false });
    expect(uncovered([w('w0', 'healthy', 'sglang', 'm'), w('w1', 'dead', 'vllm', 'm')])).toEqual([{ what: 'format vllm', workers: 'w1 dead' }]);
    expect(uncovered([w('w0', 'benched', 'sglang', 'a'), w('w1', 'healthy', 'sglang', 'b')])).toEqual([{ what: 'model a', workers: 'w0 benched' }]);
    expect(uncovered([w('w0', 'healthy', 'sglang', 'a')])).toEqual([]);
  });
});

// Random histories: requests on two workers, some attempts failing in ways that blame the worker
// (or not), request rows with outcomes, fault marks.
const KINDS: (ErrorKind | null)[] = [null, null, null, 'stream_broken', 'connect', 'stalled', 'first_token_timeout', 'validation', 'drain', 'http_5xx'];
const history = fc.record({
  reqs: fc.array(fc.record({
    t: fc.integer({ min: 0, max: 120_000 }),
    worker: fc.constantFrom(W0, W1),
    kind: fc.constantFrom(...KINDS),
    next: fc.boolean(),
    outcome: fc.constantFrom<RequestRow['outcome']>('finished', 'failed', 'cancelled'),
    finished: fc.boolean(),
  }), { maxLength: 60 }),
  marks: fc.array(fc.record({ t: fc.integer({ min: 0, max: 120_000 }), kind: fc.constantFrom<FaultMark['kind']>('kill', 'down', 'restart', 'hang', 'clear', 'drain'), worker: fc.constantFrom(W0, W1) }), { maxLength: 6 }),
  noWorker: fc.array(fc.integer({ min: 0, max: 120_000 }), { maxLength: 5 }),
});

interface History {
  reqs: { t: number; worker: string; kind: ErrorKind | null; next: boolean; outcome: RequestRow['outcome']; finished: boolean }[];
  marks: { t: number; kind: FaultMark['kind']; worker: string }[];
  noWorker: number[];
}

function materialize(h: History): { rows: TraceRow[]; marks: FaultMark[] } {
  const rows: TraceRow[] = [];
  h.reqs.forEach((r, i) => {
    const id = `r${i}`;
    rows.push(attempt(id, 0, r.worker, r.t - 100, r.t, r.kind));
    const other = r.worker === W0 ? W1 : W0;
    if (r.kind !== null && r.next) rows.push(attempt(id, 1, other, r.t + 1, r.t + 50, null));
    if (r.finished) rows.push(request(id, r.t - 100, r.t + 60, r.kind !== null && r.next ? 2 : 1, r.kind === null ? 'finished' : r.outcome, r.outcome === 'failed' ? 'migration_exhausted: x' : null));
  });
  h.noWorker.forEach((t, i) => rows.push(request(`n${i}`, t, t + 1, 0, 'failed', 'no_worker: no healthy worker serves format sglang')));
  return { rows, marks: h.marks.map((m) => mark(m.t, m.kind, m.worker)) };
}

const ATTRIBUTED = new Set<ErrorKind>(['connect', 'http_5xx', 'stream_broken', 'stalled', 'engine_abort', 'drain']);
const comparable = (list: Incident[]) => list.map((i) => ({ ...i, requestIds: [...i.requestIds].sort(), marks: i.marks.map((m) => `${m.t}:${m.kind}:${m.url}`).sort() }));

function shuffle<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('an incident\'s id', () => {
  it('stays the same as rows arrive: keyed by the fault mark that opened it, not by its start', () => {
    const t = 2_000_000;
    const kill = mark(t, 'kill');
    const broken = [attempt('a', 0, W0, t - 900, t + 5, 'stream_broken'), attempt('b', 0, W0, t - 800, t + 9, 'stream_broken')];
    const before = deriveIncidents(broken, [kill]);
    expect(before.map((i) => i.id)).toEqual([`${W0}@${t}`]);
    // An attempt that broke just before the kill was recorded, whose row arrives after the mark:
    // the incident starts earlier, and keeps its id (a focused chip stays found).
    const late = attempt('c', 0, W0, t - 700, t - 3, 'stream_broken');
    const after = deriveIncidents([...broken, late], [kill]);
    expect(after).toHaveLength(1);
    expect(after[0]!.start).toBe(t - 3);
    expect(after[0]!.id).toBe(before[0]!.id);
  });

  it('an incident the rows opened keeps its id when the health check\'s verdict comes seconds later', () => {
    const t = 3_000_000;
    const broken = [attempt('a', 0, W0, t - 900, t, 'stream_broken'), attempt('b', 0, W0, t - 800, t + 40, 'stream_broken')];
    const first = deriveIncidents(broken, []);
    const confirmed = deriveIncidents(broken, [mark(t + 5000, 'down', W0, { verdict: 'dead' })]);
    expect(confirmed.map((i) => i.id)).toEqual(first.map((i) => i.id));
    expect(first[0]!.id).toBe(`${W0}@${t}`);
  });

  it('a focus follows its incident when the id moves (the kill mark read after the rows it explains)', () => {
    const t = 4_000_000;
    const broken = [attempt('a', 0, W0, t - 900, t + 30, 'stream_broken'), attempt('b', 0, W1, t - 800, t + 40, 'stream_broken')];
    const clicked = deriveIncidents(broken, []).find((i) => i.worker === W0)!;
    const focus = { id: clicked.id, ids: new Set(clicked.requestIds) };
    const now = deriveIncidents(broken, [mark(t, 'kill')]);
    const followed = followFocus(now, focus);
    expect(followed?.id).toBe(`${W0}@${t}`);
    expect(followed?.id).not.toBe(focus.id);
    expect(followFocus(now, { id: `${W0}@1`, ids: new Set(['other']) })).toBeNull();
  });
});

describe('a P/D cluster: a failed prefill leg is its prefill server\'s', () => {
  const P0 = 'http://127.0.0.1:9100';
  const P1 = 'http://127.0.0.1:9101';
  const D0 = 'http://127.0.0.1:9200';
  const pd = (row: AttemptRow, prefill: string, failedLeg: 'prefill' | 'decode' | null): AttemptRow =>
    ({ ...row, prefill_worker: prefill, decode_worker: row.worker, bootstrap_room: '42', failed_leg: failedLeg });

  it('counts the broken and migrated attempts on the killed prefill server, not the decode worker, from the first broken attempt', () => {
    const t = 2_000_000;
    const rows: TraceRow[] = [];
    // Two attempts whose prefill leg was on P0 when it was killed: prefill_failed, moved to P1 and finished on the same decode worker.
    for (let i = 0; i < 2; i++) {
      const id = `pd-${i}`;
      rows.push(pd({ ...attempt(id, 0, D0, t - 500, t + i, 'prefill_failed', 0), error_evidence: 'prefill leg: ECONNRESET' }, P0, 'prefill'));
      rows.push(pd(attempt(id, 1, D0, t + 10 + i, t + 800, null), P1, null));
      rows.push(request(id, t - 500, t + 800, 2, 'finished'));
    }
    // Ordinary P/D traffic on the decode worker.
    rows.push(pd(attempt('ok', 0, D0, t - 900, t - 100, null), P1, null), request('ok', t - 900, t - 100, 1, 'finished'));
    // The health check benches P0 five seconds later.
    const down: FaultMark = { t: t + 5000, kind: 'down', worker: 'p0', url: P0, source: 'router', detail: 'benched' };
    const incidents = deriveIncidents(rows, [down]);
    expect(incidents).toHaveLength(1);
    const [inc] = incidents;
    expect(inc).toMatchObject({ worker: P0, start: t, cause: 'prefill_failed', broken: 2, migrated: 2, failed: 0 });
    expect(inc!.requestIds).toEqual(['pd-0', 'pd-1']);
    expect(incidentSummary(inc!)).toBe('2 broken · 2 migrated · 0 failed');
    expect(incidents.some((i) => i.worker === D0)).toBe(false);
    // "Since the last fault" dates from the first broken attempt, not the health check.
    expect(lastFaultStart([down], incidents)).toBe(t);
  });

  it('blames the decode worker for a failed decode leg, and the worker itself for an aggregated attempt', () => {
    expect(blamedWorker(pd(attempt('a', 0, D0, 0, 1, 'stream_broken'), P0, 'decode'))).toBe(D0);
    expect(blamedWorker(pd(attempt('a', 0, D0, 0, 1, 'prefill_failed'), P0, 'prefill'))).toBe(P0);
    expect(blamedWorker(attempt('a', 0, W0, 0, 1, 'stream_broken'))).toBe(W0);
  });
});

describe('incident laws', () => {
  it('every failure attributed to a worker is in exactly one incident of that worker; its incidents are apart by more than the quiet time', () => {
    fc.assert(fc.property(history, (h) => {
      const { rows, marks } = materialize(h);
      const incidents = deriveIncidents(rows, marks, { quietMs: 10_000 });
      for (const worker of [W0, W1]) {
        const attributed = rows.filter((r): r is AttemptRow => r.kind === 'attempt' && r.worker === worker && r.error_kind !== null && ATTRIBUTED.has(r.error_kind));
        const mine = incidents.filter((i) => i.worker === worker);
        expect(mine.reduce((n, i) => n + i.broken, 0)).toBe(attributed.length);
        for (const a of attributed) {
          const holding = mine.filter((i) => i.requestIds.includes(a.request_id) && i.start <= a.ended_at && a.ended_at <= i.end);
          expect(holding.length).toBe(1);
        }
        for (let k = 1; k < mine.length; k++) expect(mine[k]!.start).toBeGreaterThan(mine[k - 1]!.start);
      }
      for (const i of incidents) {
        expect(new Set(i.requestIds).size).toBe(i.requestIds.length);
        expect(i.migrated + i.failed + i.open).toBeLessThanOrEqual(i.requestIds.length);
        expect(Object.values(i.failedBy).reduce((a, b) => a + b, 0)).toBe(i.failed);
        expect(i.end).toBeGreaterThanOrEqual(i.start);
        expect(i.severity).toBe(i.failed === 0 ? 'contained' : i.failed < 10 ? 'minor' : 'major');
      }
      // A request that found no worker is counted in at most one incident.
      for (const id of rows.filter((r) => r.kind === 'request' && r.attempts === 0).map((r) => r.request_id)) {
        expect(incidents.filter((i) => i.requestIds.includes(id)).length).toBeLessThanOrEqual(1);
      }
    }), { numRuns: 200 });
  });

  it('the order of rows and marks does not matter', () => {
    fc.assert(fc.property(history, fc.integer({ min: 1, max: 1e9 }), (h, seed) => {
      const { rows, marks } = materialize(h);
      expect(comparable(deriveIncidents(shuffle(rows, seed), shuffle(marks, seed + 1)))).toEqual(comparable(deriveIncidents(rows, marks)));
    }), { numRuns: 200 });
  });

  it('ordinary traffic (finished requests, no failure) changes no incident', () => {
    fc.assert(fc.property(history, fc.array(fc.integer({ min: 0, max: 120_000 }), { maxLength: 30 }), (h, extra) => {
      const { rows, marks } = materialize(h);
      const more = extra.flatMap((t, i) => [attempt(`plain-${i}`, 0, i % 2 ? W0 : W1, t - 10, t, null), request(`plain-${i}`, t - 10, t, 1, 'finished')]);
      expect(comparable(deriveIncidents([...rows, ...more], marks))).toEqual(comparable(deriveIncidents(rows, marks)));
    }), { numRuns: 150 });
  });
});
