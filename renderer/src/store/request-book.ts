// The requests reducer: events in, RequestViews out, in bounded memory. Each batch copies a
// request at most once (copy-on-write), so list rows memoised on the object re-render only
// when their request changed.
import type { BatonEvent } from '../../../router/events/types.ts';
import type { AttemptRow, RequestRow } from '../../../router/trace/row.ts';
import { isNotable, type AttemptView, type RequestView } from './request-view.ts';

export interface BookLimits {
  /** Finished requests kept for the list and the detail view (ordinary ones, with maxNotable set). */
  maxFinished: number;
  /**
   * Finished requests that migrated or failed, kept apart from (and beyond) the ordinary ones, so
   * that the requests an incident is about outlive the traffic after it. Unset: no separate quota.
   */
  maxNotable?: number;
  /** Hard cap, in flight included (a request whose end was never heard of must not stay for ever). */
  maxTotal: number;
}

export const DEFAULT_LIMITS: BookLimits = { maxFinished: 2000, maxNotable: 2000, maxTotal: 8000 };

/** What one event meant for the aggregates (charts, strip): token deltas, ends, migrations. */
export interface EventEffect {
  /** Tokens a worker produced; with `since`, spread evenly from then to the event's time. */
  tokens?: { worker: string; delta: number; since?: number };
  started?: boolean;
  /** When a request first seen through its summary row (a snapshot) actually started. */
  startedAt?: number;
  finished?: RequestRow;
  /** For a failed request: the error kind of its last attempt. */
  failureKind?: string;
  migrated?: boolean;
  ttftMs?: number;
  /** When that first token came, for TTFTs learnt late from an attempt row. */
  ttftAt?: number;
}

type Event<T extends BatonEvent['type']> = Extract<BatonEvent, { type: T }>;

export class RequestBook {
  readonly byId = new Map<string, RequestView>();
  private order: string[] = [];
  private seq = 0;
  private finishedCount = 0;
  private touched = new Set<string>();
  /** Finished requests this book let go (ordinary, and migrated or failed), for an honest count. */
  readonly dropped = { ordinary: 0, notable: 0 };
  /** Finished requests that migrated or failed (the maxNotable quota). */
  private readonly notableIds = new Set<string>();

  constructor(readonly limits: BookLimits = DEFAULT_LIMITS) {}

  get size(): number {
    return this.byId.size;
  }

  get running(): number {
    return this.byId.size - this.finishedCount;
  }

  /** Ids oldest first. */
  ids(): readonly string[] {
    return this.order;
  }

  get(id: string): RequestView | undefined {
    return this.byId.get(id);
  }

  /** Marks running requests whose end this page will never hear of (the connection was lost meanwhile). */
  markLost(ids: Iterable<string>): number {
    let n = 0;
    for (const id of ids) {
      const r = this.byId.get(id);
      if (!r || r.status !== 'running') continue;
      const next: RequestView = { ...r, status: 'lost', attempts: r.attempts.map((a) => (a.outcome === 'running' ? { ...a } : a)) };
      this.byId.set(id, next);
      this.finishedCount++;
      this.noteFinished(id);
      n++;
    }
    if (n > 0) this.evict();
    return n;
  }

  /**
   * Ends a request's running attempts at `t` as failed with `error`, without blaming their workers
   * (no error kind): they were cut by something else, such as their router dying.
   */
  endAttempts(id: string, t: number, error: string): void {
    const r = this.byId.get(id);
    if (!r || !r.attempts.some((a) => a.outcome === 'running')) return;
    const attempts = r.attempts.map((a) => (a.outcome === 'running' ? { ...a, outcome: 'failed' as const, endedAt: Math.max(t, a.startedAt), error } : a));
    this.byId.set(id, { ...r, attempts });
  }

  private noteFinished(id: string): void {
    const r = this.byId.get(id);
    if (r && r.status !== 'running' && isNotable(r)) this.notableIds.add(id);
  }

  /** Ids of requests still running. */
  runningIds(): string[] {
    const out: string[] = [];
    for (const r of this.byId.values()) if (r.status === 'running') out.push(r.id);
    return out;
  }

  /** Applies a batch; returns one effect per event, for the aggregates. */
  applyBatch(events: readonly BatonEvent[]): EventEffect[] {
    const effects = events.map((e) => this.apply(e));
    for (const id of this.touched) this.noteFinished(id);
    this.touched.clear();
    this.evict();
    return effects;
  }

  private apply(e: BatonEvent): EventEffect {
    switch (e.type) {
      case 'request_admitted': return this.admitted(e);
      case 'attempt_started': return this.attemptStarted(e);
      case 'first_token': return this.firstToken(e);
      case 'progress': return this.progress(e);
      case 'attempt_ended': return this.attemptEnded(e.row);
      case 'migrated': return this.migrated(e);
      case 'request_finished': return this.finished(e.row);
      default: return {};
    }
  }

  /** The request, copied once per batch so the caller may change it in place. */
  private edit(id: string, t: number): RequestView {
    const current = this.byId.get(id);
    if (current && this.touched.has(id)) return current;
    const next: RequestView = current
      ? { ...current, attempts: current.attempts.map((a) => ({ ...a })), migrations: [...current.migrations] }
      : {
          id, seq: this.seq++, startedAt: t, endedAt: null, status: 'running', admitted: null, admissionReason: null,
          stream: null, promptTokens: null, maxNewTokens: null, attempts: [], migrations: [], completionTokens: 0,
          error: null, summary: null, format: null, front: null, traceId: null,
        };
    if (!current) this.order.push(id);
    this.byId.set(id, next);
    this.touched.add(id);
    return next;
  }

  private attempt(r: RequestView, index: number, worker: string, t: number): AttemptView {
    let a = r.attempts.find((x) => x.attempt === index);
    if (!a) {
      a = {
        attempt: index, rid: '', worker, startedAt: t, endedAt: null, ttftMs: null, replayed: 0, tokens: 0,
        budgetBefore: null, budgetAfter: null, outcome: 'running', errorKind: null, error: null, finishReason: null, lastTokenAt: null, prefillWorker: null, row: null,
      };
      r.attempts.push(a);
      r.attempts.sort((x, y) => x.attempt - y.attempt);
    }
    return a;
  }

  private admitted(e: Event<'request_admitted'>): EventEffect {
    const isNew = !this.byId.has(e.request_id);
    const r = this.edit(e.request_id, e.t);
    r.startedAt = Math.min(r.startedAt, e.t);
    r.admitted = e.admitted;
    r.admissionReason = e.reason;
    r.stream = e.stream;
    r.promptTokens = e.prompt_tokens;
    r.maxNewTokens = e.max_new_tokens;
    r.traceId = (e as { trace_id?: string | null }).trace_id ?? r.traceId;
    // Format and front from the first event, so the badges show while it runs (older routers: from its rows).
    r.format = e.format ?? r.format;
    r.front = e.front ?? r.front;
    return { started: isNew };
  }

  private attemptStarted(e: Event<'attempt_started'>): EventEffect {
    const r = this.edit(e.request_id, e.t);
    const a = this.attempt(r, e.attempt, e.worker, e.t);
    a.rid = e.rid;
    a.worker = e.worker;
    a.startedAt = e.t;
    a.replayed = e.replayed_tokens;
    a.budgetBefore = e.budget_before;
    a.prefillWorker = e.prefill_worker ?? null;
    return {};
  }

  private firstToken(e: Event<'first_token'>): EventEffect {
    const r = this.byId.get(e.request_id);
    const existing = r?.attempts.find((a) => a.attempt === e.attempt);
    if (!r || !existing) return {};
    const a = this.edit(e.request_id, e.t).attempts.find((x) => x.attempt === e.attempt)!;
    const firstTime = a.ttftMs === null;
    a.ttftMs = e.ttft_ms;
    a.lastTokenAt = Math.max(a.lastTokenAt ?? 0, e.t);
    return firstTime && e.attempt === 0 ? { ttftMs: e.ttft_ms } : {};
  }

  private progress(e: Event<'progress'>): EventEffect {
    const known = this.byId.get(e.request_id)?.attempts.find((a) => a.attempt === e.attempt);
    if (!known) return {};
    const r = this.edit(e.request_id, e.t);
    const a = r.attempts.find((x) => x.attempt === e.attempt)!;
    // Events of one request arrive in order, but a replayed snapshot may repeat older progress.
    const delta = e.tokens - a.tokens;
    // Tokens since this page last saw the attempt grow (or since its start): a snapshot's
    // coalesced progress carries all of a running attempt's tokens at once, and charted in one
    // second they would spike every sparkline on page load.
    const since = a.lastTokenAt ?? a.startedAt;
    if (delta > 0) {
      a.tokens = e.tokens;
      a.lastTokenAt = Math.max(a.lastTokenAt ?? 0, e.t);
    }
    r.completionTokens = Math.max(r.completionTokens, e.completion_tokens);
    return delta > 0 ? { tokens: since < e.t ? { worker: a.worker, delta, since } : { worker: a.worker, delta } } : {};
  }

  private attemptEnded(row: AttemptRow): EventEffect {
    const r = this.edit(row.request_id, row.started_at);
    const a = this.attempt(r, row.attempt, row.worker, row.started_at);
    const delta = row.tokens - a.tokens;
    const lateTtft = row.attempt === 0 && a.ttftMs === null && row.ttft_ms !== null;
    // Rows from a snapshot carry a whole attempt's tokens at once: chart them over its life.
    const since = a.tokens === 0 ? row.started_at + (row.ttft_ms ?? 0) : undefined;
    Object.assign(a, {
      rid: row.rid, worker: row.worker, startedAt: row.started_at, endedAt: row.ended_at, ttftMs: row.ttft_ms,
      replayed: row.replayed_tokens, tokens: row.tokens, budgetBefore: row.budget_before, budgetAfter: row.budget_after,
      outcome: row.outcome, errorKind: row.error_kind, error: row.error, finishReason: row.finish_reason, row,
      prefillWorker: row.prefill_worker ?? a.prefillWorker,
    } satisfies Partial<AttemptView>);
    r.startedAt = Math.min(r.startedAt, row.started_at);
    r.completionTokens = Math.max(r.completionTokens, row.replayed_tokens + row.tokens);
    r.format = (row as { format?: string }).format ?? r.format;
    r.traceId = (row as { trace_id?: string | null }).trace_id ?? r.traceId;
    const effect: EventEffect = lateTtft ? { ttftMs: row.ttft_ms!, ttftAt: row.started_at + row.ttft_ms! } : {};
    if (delta > 0) effect.tokens = since !== undefined && since < row.ended_at ? { worker: row.worker, delta, since } : { worker: row.worker, delta };
    return effect;
  }

  private migrated(e: Event<'migrated'>): EventEffect {
    const r = this.edit(e.request_id, e.t);
    if (r.migrations.some((m) => m.attempt === e.attempt)) return {};
    r.migrations.push({ attempt: e.attempt, fromWorker: e.from_worker, toWorker: e.to_worker, atToken: e.at_token, errorKind: e.error_kind, t: e.t });
    return { migrated: true };
  }

  private finished(row: RequestRow): EventEffect {
    const unseen = !this.byId.has(row.request_id) || this.byId.get(row.request_id)!.admitted === null;
    const r = this.edit(row.request_id, row.started_at);
    const wasRunning = r.status === 'running' || r.status === 'lost';
    if (r.status === 'lost') this.finishedCount--;
    r.summary = row;
    r.status = row.outcome;
    r.startedAt = row.started_at;
    r.endedAt = row.ended_at;
    r.admitted = row.admitted;
    r.admissionReason = row.admission_reason;
    r.stream = row.stream;
    r.promptTokens = row.prompt_tokens;
    r.maxNewTokens = row.max_new_tokens;
    r.completionTokens = row.completion_tokens;
    r.error = row.error;
    r.format = (row as { format?: string }).format ?? r.format;
    r.traceId = (row as { trace_id?: string | null }).trace_id ?? r.traceId;
    if (!wasRunning) return {};
    this.finishedCount++;
    const effect: EventEffect = unseen ? { finished: row, started: true, startedAt: row.started_at } : { finished: row };
    if (row.outcome === 'failed') effect.failureKind = r.attempts[r.attempts.length - 1]?.errorKind ?? 'no_worker';
    return effect;
  }

  /**
   * Drops the oldest finished requests beyond the quotas (ordinary ones beyond maxFinished,
   * migrated or failed ones beyond maxNotable), then the oldest of all beyond maxTotal.
   */
  private evict(): void {
    const split = this.limits.maxNotable !== undefined;
    const overTotal = this.byId.size - this.limits.maxTotal;
    if (this.finishedCount <= this.limits.maxFinished && overTotal <= 0) return;
    const notable = split ? this.notableIds.size : 0;
    let dropOrdinary = Math.max(0, this.finishedCount - notable - this.limits.maxFinished);
    let dropNotable = split ? Math.max(0, notable - this.limits.maxNotable!) : 0;
    if (dropOrdinary <= 0 && dropNotable <= 0 && overTotal <= 0) return;
    const keep: string[] = [];
    for (const id of this.order) {
      const r = this.byId.get(id)!;
      const finished = r.status !== 'running';
      const isNotableOne = split && finished && this.notableIds.has(id);
      if (finished && !isNotableOne && dropOrdinary > 0) {
        dropOrdinary--;
        this.drop(id, false);
      } else if (isNotableOne && dropNotable > 0) {
        dropNotable--;
        this.drop(id, true);
      } else {
        keep.push(id);
      }
    }
    const dropAny = keep.length - this.limits.maxTotal;
    if (dropAny > 0) {
      for (const id of keep.slice(0, dropAny)) this.drop(id, this.notableIds.has(id));
      keep.splice(0, dropAny);
    }
    this.order = keep;
  }

  private drop(id: string, notable: boolean): void {
    const r = this.byId.get(id)!;
    if (r.status !== 'running') {
      this.finishedCount--;
      this.dropped[notable ? 'notable' : 'ordinary']++;
    }
    this.notableIds.delete(id);
    this.byId.delete(id);
  }
}
