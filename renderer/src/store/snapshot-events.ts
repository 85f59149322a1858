// A host snapshot as a list of events, so catching up goes through the same reducer as live
// updates: finished rows become the events that carried them, and migrations between recorded
// attempts are re-derived from the attempt rows.
import type { BatonEvent } from '../../../router/events/types.ts';
import type { AttemptRow } from '../../../router/trace/row.ts';
import type { Snapshot } from '../../../host/contract.ts';

export function snapshotEvents(snapshot: Snapshot): BatonEvent[] {
  const events: BatonEvent[] = snapshot.workers.map((worker) => ({ type: 'worker_state', t: snapshot.t, worker }));
  const lastAttempt = new Map<string, AttemptRow>();
  for (const row of snapshot.rows) {
    if (row.kind === 'attempt') {
      const previous = lastAttempt.get(row.request_id);
      if (previous && row.attempt === previous.attempt + 1) {
        events.push({
          type: 'migrated', t: row.started_at, request_id: row.request_id, from_worker: previous.worker, to_worker: row.worker,
          at_token: row.replayed_tokens, attempt: row.attempt, error_kind: previous.error_kind ?? 'stream_broken',
        });
      }
      lastAttempt.set(row.request_id, row);
      events.push({ type: 'attempt_ended', t: row.ended_at, row });
    } else {
      events.push({ type: 'request_finished', t: row.ended_at, row });
    }
  }
  events.push(...snapshot.inflight);
  return events;
}

