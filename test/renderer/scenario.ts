// Synthetic event streams shaped like the router's, for renderer tests.
import type { BatonEvent } from '../../router/events/types.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';

export interface AttemptPlan {
  worker: string;
  tokens: number;
  fails?: boolean;
  /** P/D: the prefill server of the attempt's pair (`worker` is its decode worker). */
  prefill?: string;
  /** P/D: the leg a failing attempt's failure is attributed to (`prefill`: `prefill_failed`). */
  failedLeg?: 'prefill' | 'decode';
}

/**
 * The events of one request: admission, then per attempt start/first token/progress/end, a
 * migration between consecutive attempts, and the summary. `finish: false` leaves it running.
 */
export function requestEvents(id: string, t0: number, budget: number | null, attempts: AttemptPlan[], opts: { admitted?: boolean; reason?: string | null; finish?: boolean } = {}): BatonEvent[] {
  const events: BatonEvent[] = [];
  const admitted = opts.admitted ?? true;
  events.push({ type: 'request_admitted', t: t0, request_id: id, admitted, reason: opts.reason ?? null, stream: true, prompt_tokens: 8, max_new_tokens: budget, trace_id: null });
  let produced = 0;
  let t = t0;
  attempts.forEach((plan, k) => {
    const budgetBefore = budget === null ? null : budget - produced;
    events.push({ type: 'attempt_started', t, request_id: id, attempt: k, rid: `${id}-${k}`, worker: plan.worker, replayed_tokens: produced, budget_before: budgetBefore, ...(plan.prefill ? { prefill_worker: plan.prefill } : {}) });
    if (plan.tokens > 0) events.push({ type: 'first_token', t: t + 5, request_id: id, attempt: k, ttft_ms: 5 });
    for (let n = 1; n <= plan.tokens; n++) {
      events.push({ type: 'progress', t: t + 5 + n, request_id: id, attempt: k, tokens: n, completion_tokens: produced + n });
    }
    t += 10 + plan.tokens;
    const isLast = k === attempts.length - 1;
    if (!isLast || opts.finish !== false) {
      const row: AttemptRow = {
        kind: 'attempt', format: 'sglang', request_id: id, attempt: k, rid: `${id}-${k}`, worker: plan.worker, started_at: t - 10 - plan.tokens, ended_at: t,
        ttft_ms: plan.tokens > 0 ? 5 : null, prompt_tokens_sent: 8 + produced, replayed_tokens: produced, tokens: plan.tokens,
        budget_before: budgetBefore, budget_after: budgetBefore === null ? null : budgetBefore - plan.tokens, cached_tokens: 0, placement_prefix: null, placement_reason: null,
        outcome: plan.fails ? 'failed' : 'finished', error_kind: plan.fails ? 'stream_broken' : null, error_evidence: null, trace_id: null,
        error: plan.fails ? 'socket closed mid-body' : null, finish_reason: plan.fails ? null : 'length',
        ...(plan.prefill ? { prefill_worker: plan.prefill, decode_worker: plan.worker, bootstrap_room: String(1000 + k), ...(plan.fails && plan.failedLeg ? { failed_leg: plan.failedLeg } : {}) } : {}),
      };
      if (plan.fails && plan.failedLeg === 'prefill') row.error_kind = 'prefill_failed';
      events.push({ type: 'attempt_ended', t, row });
    }
    produced += plan.tokens;
    const next = attempts[k + 1];
    if (plan.fails && next) {
      events.push({ type: 'migrated', t, request_id: id, from_worker: plan.worker, to_worker: next.worker, at_token: produced, attempt: k + 1, error_kind: plan.failedLeg === 'prefill' ? 'prefill_failed' : 'stream_broken' });
    }
  });
  if (opts.finish !== false) {
    const last = attempts[attempts.length - 1];
    const row: RequestRow = {
      kind: 'request', format: 'sglang', request_id: id, attempts: attempts.length, migrations: attempts.length - 1, admitted, admission_reason: opts.reason ?? null,
      prompt_tokens: 8, completion_tokens: produced, cached_tokens: 0, finish_reason: last?.fails ? null : 'length',
      outcome: last?.fails ? 'failed' : 'finished', duration_ms: t - t0, started_at: t0, ended_at: t, stream: true,
      max_new_tokens: budget, error: last?.fails ? 'stream_broken: socket closed mid-body' : null, trace_id: null,
      client_error: last?.fails ? 'not_migratable: worker failed and the request is not migratable: socket closed mid-body' : null, client_status: last?.fails ? 502 : null,
    };
    events.push({ type: 'request_finished', t, row });
  }
  return events;
}
