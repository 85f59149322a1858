// A request's detail rebuilt from its trace rows alone, once it has left the page's live list:
// the same reducer as live updates, fed with the events those rows stand for.
import type { TraceRow } from '../../../router/trace/row.ts';
import { RequestBook } from './request-book.ts';
import type { RequestView } from './request-view.ts';
import { snapshotEvents } from './snapshot-events.ts';

export function rebuildRequest(id: string, rows: readonly TraceRow[]): RequestView | null {
  const mine = rows.filter((r) => r.request_id === id);
  if (mine.length === 0) return null;
  // Attempts in order, the request row last: the order the router wrote them in.
  mine.sort((a, b) => (a.kind === b.kind ? (a.kind === 'attempt' && b.kind === 'attempt' ? a.attempt - b.attempt : 0) : a.kind === 'attempt' ? -1 : 1));
  const book = new RequestBook({ maxFinished: 1, maxTotal: 1 });
  book.applyBatch(snapshotEvents({ routerUrl: '', t: 0, workers: [], rows: mine, inflight: [], sim: null, traffic: null }));
  return book.get(id) ?? null;
}
