// The requests reducer: events in, RequestViews out, in bounded memory. Each batch copies a
// request at most once (copy-on-write), so list rows memoised on the object re-render only
// when their request changed.
import type { BatonEvent } from '../../../router/events/types.ts';
import type { AttemptRow, RequestRow } from '../../../router/trace/row.ts';
import type { AttemptView, RequestView } from './request-view.ts';

export interface BookLimits {
  /** Finished requests kept for the list and the detail view. */
  maxFinished: number;
  /** Hard cap, in flight included (a request whose end was never heard of must not stay for ever). */
  maxTotal: number;
}

export const DEFAULT_LIMITS: BookLimits = { maxFinished: 2000, maxTotal: 6000 };

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

  constructor(private readonly limits: BookLimits = DEFAULT_LIMITS) {}

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

  /** Applies a batch; returns one effect per event, for the aggregates. */
  applyBatch(events: readonly BatonEvent[]): EventEffect[] {
    const effects = events.map((e) => this.apply(e));
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
          error: null, summary: null,
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
        budgetBefore: null, budgetAfter: null, outcome: 'running', errorKind: null, error: null, finishReason: null, row: null,
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
    return {};
  }

  private firstToken(e: Event<'first_token'>): EventEffect {
    const r = this.byId.get(e.request_id);
    const existing = r?.attempts.find((a) => a.attempt === e.attempt);
    if (!r || !existing) return {};
    const a = this.edit(e.request_id, e.t).attempts.find((x) => x.attempt === e.attempt)!;
    const firstTime = a.ttftMs === null;
    a.ttftMs = e.ttft_ms;
    return firstTime && e.attempt === 0 ? { ttftMs: e.ttft_ms } : {};
  }

  private progress(e: Event<'progress'>): EventEffect {
    const known = this.byId.get(e.request_id)?.attempts.find((a) => a.attempt === e.attempt);
    if (!known) return {};
    const r = this.edit(e.request_id, e.t);
    const a = r.attempts.find((x) => x.attempt === e.attempt)!;
    // Events of one request arrive in order, but a replayed snapshot may repeat older progress.
    const delta = e.tokens - a.tokens;
    if (delta > 0) a.tokens = e.tokens;
    r.completionTokens = Math.max(r.completionTokens, e.completion_tokens);
    return delta > 0 ? { tokens: { worker: a.worker, delta } } : {};
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
    } satisfies Partial<AttemptView>);
    r.startedAt = Math.min(r.startedAt, row.started_at);
    r.completionTokens = Math.max(r.completionTokens, row.replayed_tokens + row.tokens);
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
    const wasRunning = r.status === 'running';
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
    if (!wasRunning) return {};
    this.finishedCount++;
    const effect: EventEffect = unseen ? { finished: row, started: true, startedAt: row.started_at } : { finished: row };
    if (row.outcome === 'failed') effect.failureKind = r.attempts[r.attempts.length - 1]?.errorKind ?? 'no_worker';
    return effect;
  }

  /** Drops the oldest finished requests beyond maxFinished, then the oldest of all beyond maxTotal. */
  private evict(): void {
    const overFinished = this.finishedCount - this.limits.maxFinished;
    const overTotal = this.byId.size - this.limits.maxTotal;
    if (overFinished <= 0 && overTotal <= 0) return;
    let dropFinished = Math.max(0, overFinished);
    const keep: string[] = [];
    for (const id of this.order) {
      const r = this.byId.get(id)!;
      if (dropFinished > 0 && r.status !== 'running') {
        this.byId.delete(id);
        this.finishedCount--;
        dropFinished--;
      } else {
        keep.push(id);
      }
    }
    let dropAny = keep.length - this.limits.maxTotal;
    if (dropAny > 0) {
      for (const id of keep.slice(0, dropAny)) {
        if (this.byId.get(id)!.status !== 'running') this.finishedCount--;
        this.byId.delete(id);
      }
      keep.splice(0, dropAny);
      dropAny = 0;
    }
    this.order = keep;
  }
}
