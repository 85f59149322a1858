// What a self-contained export carries besides its rows (host/contract.ts, TraceFileContext):
// the page's workers with their ids and colours, the fault markers, and when the oldest request
// still running began. Pure over the store's state.
import type { BatonEvent } from '../../../router/events/types.ts';
import type { ContextWorker, ExportFilter, FaultMark, TraceFileContext } from '../../../host/contract.ts';
import type { DashState } from './store.ts';
import type { RequestBook } from './request-book.ts';
import { idMatches } from './filters.ts';
import { deriveIncidents } from './incidents.ts';

/**
 * The requests running now, as the events that would rebuild what the page knows of them: their
 * ended attempts are rows already (in the file), so only the running attempts are told.
 */
export function inflightEvents(book: RequestBook, filter: ExportFilter, now: number): BatonEvent[] {
  if (filter.outcome) return [];
  const events: BatonEvent[] = [];
  for (const id of book.runningIds()) {
    const r = book.get(id);
    if (!r || r.status !== 'running') continue;
    if (filter.request && id !== filter.request) continue;
    if (filter.requestPrefix && !idMatches(id, filter.requestPrefix)) continue;
    if (filter.worker && !r.attempts.some((a) => a.worker === filter.worker)) continue;
    events.push({
      type: 'request_admitted', t: r.startedAt, request_id: id, admitted: r.admitted ?? true, reason: r.admissionReason, stream: r.stream ?? true,
      prompt_tokens: r.promptTokens ?? 0, max_new_tokens: r.maxNewTokens, trace_id: r.traceId,
      ...(r.format === 'sglang' || r.format === 'vllm' || r.format === 'openai' ? { format: r.format } : {}), ...(r.front ? { front: r.front } : {}),
    });
    for (const a of r.attempts) {
      if (a.outcome !== 'running') continue;
      events.push({ type: 'attempt_started', t: a.startedAt, request_id: id, attempt: a.attempt, rid: a.rid, worker: a.worker, replayed_tokens: a.replayed, budget_before: a.budgetBefore, ...(a.prefillWorker ? { prefill_worker: a.prefillWorker } : {}) });
      if (a.ttftMs !== null) events.push({ type: 'first_token', t: a.startedAt + a.ttftMs, request_id: id, attempt: a.attempt, ttft_ms: a.ttftMs });
      if (a.tokens > 0) events.push({ type: 'progress', t: Math.min(now, a.lastTokenAt ?? now), request_id: id, attempt: a.attempt, tokens: a.tokens, completion_tokens: r.completionTokens });
    }
  }
  return events;
}

export function exportContext(state: Pick<DashState, 'model' | 'faults'>, now = Date.now(), filter: ExportFilter = {}): TraceFileContext {
  const { workers, book } = state.model;
  const list: ContextWorker[] = [...workers.seen.values()].map((w) => ({
    id: w.id, url: w.url, format: w.format, model_path: w.model_path, color: workers.colorOf(w.id),
    ...(w.discovery ? { discovery: w.discovery } : {}),
  }));
  const faults: FaultMark[] = state.faults.map((m) => ({ ...m }));
  const incidents = deriveIncidents(state.model.traces.all(), faults);
  return { kind: 'baton_context', version: 1, exported_at: now, workers: list, faults, inflight: inflightEvents(book, filter, now), incidents };
}
