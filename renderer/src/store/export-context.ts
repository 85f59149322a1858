// What a self-contained export carries besides its rows (host/contract.ts, TraceFileContext):
// the page's workers with their ids and colours, the fault markers, and when the oldest request
// still running began. Pure over the store's state.
import type { ContextWorker, FaultMark, TraceFileContext } from '../../../host/contract.ts';
import type { DashState } from './store.ts';

export function exportContext(state: Pick<DashState, 'model' | 'faults'>, now = Date.now()): TraceFileContext {
  const { workers, book } = state.model;
  const list: ContextWorker[] = [...workers.seen.values()].map((w) => ({
    id: w.id, url: w.url, format: w.format, model_path: w.model_path, color: workers.colorOf(w.id),
    ...(w.discovery ? { discovery: w.discovery } : {}),
  }));
  let inflightFrom: number | null = null;
  for (const id of book.runningIds()) {
    const r = book.get(id);
    if (r && (inflightFrom === null || r.startedAt < inflightFrom)) inflightFrom = r.startedAt;
  }
  const faults: FaultMark[] = state.faults.map((m) => ({ ...m }));
  return { kind: 'baton_context', version: 1, exported_at: now, workers: list, faults, inflight_from: inflightFrom };
}
