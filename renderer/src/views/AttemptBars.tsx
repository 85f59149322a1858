// The waterfall of one request: time runs left to right; each attempt is a bar in its worker's
// colour; a failed attempt ends in a break mark; a triangle marks the hand-off where a
// continuation took over (hover: the token it resumed at). In the list all rows share one time
// window (so a kill lines up across rows); in the detail panel the request fills the width.
import { memo } from 'react';
import type { RequestView } from '../store/request-view.ts';
import type { WorkerTable } from '../store/workers.ts';
import { useStoreApi } from './context.ts';
import { fmtClock, fmtMs } from './format.ts';

function attemptTitle(r: RequestView, i: number, workers: WorkerTable): string {
  const a = r.attempts[i]!;
  const parts = [
    `attempt ${a.attempt} on ${workers.idOf(a.worker)} (${a.worker})`,
    `${fmtClock(a.startedAt)} → ${a.endedAt === null ? 'running' : fmtClock(a.endedAt)}`,
    `TTFT ${fmtMs(a.ttftMs)}`,
    `replayed ${a.replayed} tok, produced ${a.tokens} tok`,
  ];
  if (a.budgetBefore !== null) parts.push(`budget ${a.budgetBefore} → ${a.budgetAfter ?? '…'}`);
  if (a.outcome !== 'running') parts.push(a.error ? `${a.outcome}: ${a.errorKind ?? ''} ${a.error}` : a.outcome);
  return parts.join('\n');
}

interface Props {
  r: RequestView;
  now: number;
  big?: boolean;
  /** A shared time window [from, to] in epoch ms; by default the request's own life. */
  window?: { from: number; to: number };
}

export const AttemptBars = memo(function AttemptBars({ r, now, big = false, window }: Props) {
  const workers = useStoreApi().getState().model.workers;
  const start = window?.from ?? r.startedAt;
  const end = window?.to ?? Math.max(r.endedAt ?? now, ...r.attempts.map((a) => a.endedAt ?? now), start + 1);
  const span = Math.max(end - start, 1);
  const clip = (t: number) => Math.min(Math.max(t, start), end);
  const pos = (t: number) => `${(Math.min(Math.max(t - start, 0), span) / span) * 100}%`;
  return (
    <div className={big ? 'waterfall big' : 'waterfall'} data-testid="waterfall">
      {r.attempts.map((a, i) => {
        const aEnd = a.endedAt ?? now;
        const broken = a.outcome === 'failed';
        return (
          <div
            key={a.attempt}
            className={`attempt-bar${a.outcome === 'running' ? ' running' : ''}${broken ? ' broken' : ''}`}
            data-worker={a.worker}
            title={attemptTitle(r, i, workers)}
            style={{
              left: pos(a.startedAt),
              width: `${((clip(aEnd) - clip(a.startedAt)) / span) * 100}%`,
              background: workers.colorOf(a.worker),
            }}
          />
        );
      })}
      {r.attempts.slice(1).map((a) => (
        <div
          key={`h${a.attempt}`}
          className="handoff"
          style={{ left: pos(a.startedAt) }}
          title={`migrated to ${workers.idOf(a.worker)} at token ${a.replayed}`}
        />
      ))}
    </div>
  );
});
