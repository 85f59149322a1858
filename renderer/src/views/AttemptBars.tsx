// The waterfall of one request: time runs left to right; each attempt is a bar in its worker's
// colour; the stretch of an attempt after its last token (a stall, or a wait for the first one)
// is hatched; a failed attempt ends in a break mark; a triangle marks the hand-off where a
// continuation took over. Hover cards give the numbers, with absolute times. In the list all
// rows share one time window (so a kill lines up across rows); in the detail panel the request
// fills the width, with fault markers.
import { memo } from 'react';
import type { FaultMark } from '../../../host/contract.ts';
import { stalledFrom, type AttemptView, type RequestView } from '../store/request-view.ts';
import type { WorkerTable } from '../store/workers.ts';
import { faultLabel, markTone } from '../store/faults.ts';
import { clientFailure, clientGotHeadline, type ClientFailure } from '../store/failure-reason.ts';
import { useStoreApi } from './context.ts';
import { fmtClock, fmtIso, fmtMs } from './format.ts';
import { hoverCard, type CardContent } from './HoverCard.tsx';

/**
 * When a P/D attempt's prefill leg ended, as its row says (`prefill_ended_at`: answered or failed
 * on its own); null while the attempt runs, for a leg the attempt's end closed still waiting (it
 * ran the whole bar), and for rows written before the field.
 */
export function prefillLegEnd(a: AttemptView): number | null {
  const t = a.row?.prefill_ended_at;
  return typeof t === 'number' ? t : null;
}

export function attemptCard(a: AttemptView, workers: WorkerTable, now: number, client: ClientFailure | null = null, clientHeadline: string | null = null): CardContent {
  const stall = stalledFrom(a, now);
  const lines: [string, string][] = [
    ['worker', `${workers.label(a.worker)} · ${a.worker}`],
    ['started', `${fmtClock(a.startedAt)} · ${fmtIso(a.startedAt)} · ${a.startedAt}`],
    ['ended', a.endedAt === null ? 'running' : `${fmtClock(a.endedAt)} · ${fmtIso(a.endedAt)} · ${a.endedAt}`],
    ['duration', fmtMs((a.endedAt ?? now) - a.startedAt)],
    ['TTFT', fmtMs(a.ttftMs)],
    ['tokens', `replayed ${a.replayed}, produced ${a.tokens}`],
  ];
  if (a.budgetBefore !== null) lines.push(['budget', `${a.budgetBefore} → ${a.budgetAfter ?? '…'}`]);
  if (stall !== null) lines.push([a.tokens === 0 ? 'no token for' : 'no token since', `${fmtMs((a.endedAt ?? now) - stall)} (hatched)`]);
  lines.push(['outcome', a.outcome]);
  if (a.errorKind) lines.push(['error kind', a.errorKind]);
  if (a.row?.error_evidence) lines.push(['evidence', a.row.error_evidence]);
  if (a.rid) lines.push(['upstream rid', a.rid]);
  const pd = a.row?.prefill_worker ?? a.prefillWorker;
  if (pd) {
    // P/D (docs/pd.md): the bar is the decode leg; the strip along its foot, the prefill leg.
    lines.push(['prefill leg', `${workers.label(pd)} · ${pd}${a.row?.failed_leg === 'prefill' ? ' (failed)' : ''}`]);
    const legEnd = prefillLegEnd(a);
    if (legEnd !== null) lines.push(['prefill ended', `${fmtClock(legEnd)} · after ${fmtMs(legEnd - a.startedAt)}`]);
    else if (a.row?.prefill_worker) lines.push(['prefill ended', 'with the attempt (still waiting)']);
    lines.push(['decode leg', `${workers.label(a.worker)}${a.row?.failed_leg === 'decode' ? ' (failed)' : ''}`]);
    lines.push(['bootstrap room', a.row?.bootstrap_room ?? '—']);
  }
  if (client) lines.push(['client got', `${clientHeadline ?? client.status ?? ''} ${client.text}`.trim()]);
  return { title: `attempt ${a.attempt} on ${workers.label(a.worker)}`, lines, note: a.error };
}

function faultCard(m: FaultMark): CardContent {
  return {
    title: faultLabel(m),
    lines: [
      ['at', `${fmtClock(m.t)} · ${fmtIso(m.t)} · ${m.t}`],
      ['source', m.source === 'dashboard' ? 'an action through the dashboard' : 'the router reported it'],
      ...(m.url ? [['worker', m.url] as [string, string]] : []),
      ...(m.kind === 'down' ? [['router read', m.evidence ?? 'nothing yet (no failed attempt on it)'] as [string, string]] : []),
      ...(m.verdict ? [['health check', `${m.verdict} at ${fmtClock(m.verdictAt ?? m.t)}`] as [string, string]] : []),
      ...(m.recoveredAt ? [['healthy again', fmtClock(m.recoveredAt)] as [string, string]] : []),
      ...(m.pod ? [['pod', `${m.pod}${m.node ? ` on node ${m.node}` : ''}`] as [string, string]] : []),
      ...(m.kind !== 'down' && m.source === 'router' && m.detail ? [['why', m.detail] as [string, string]] : []),
    ],
  };
}

interface Props {
  r: RequestView;
  now: number;
  big?: boolean;
  /** A shared time window [from, to] in epoch ms; by default the request's own life. */
  window?: { from: number; to: number };
  /** Fault markers to draw across the bars (the detail panel's; the list draws its own overlay). */
  marks?: readonly FaultMark[];
}

/** The time span the detail waterfall covers for a request. */
export function requestSpan(r: RequestView, now: number): { from: number; to: number } {
  const from = r.startedAt;
  const to = Math.max(r.endedAt ?? now, ...r.attempts.map((a) => a.endedAt ?? now), from + 1);
  return { from, to };
}

export const AttemptBars = memo(function AttemptBars({ r, now, big = false, window, marks }: Props) {
  const workers = useStoreApi().getState().model.workers;
  const { from: start, to: end } = window ?? requestSpan(r, now);
  const span = Math.max(end - start, 1);
  const clip = (t: number) => Math.min(Math.max(t, start), end);
  const pct = (t: number) => (Math.min(Math.max(t - start, 0), span) / span) * 100;
  return (
    <div className={big ? 'waterfall big' : 'waterfall'} data-testid="waterfall">
      {r.attempts.length === 0 && r.status === 'failed' && (
        // No attempt, so no bar to hover: the reason the client got stands where the bars would.
        <span className="failure-reason" data-testid="failure-reason">{clientFailure(r)?.text}</span>
      )}
      {r.attempts.map((a) => {
        const aEnd = a.endedAt ?? now;
        // A P/D attempt whose prefill leg failed broke on its prefill server: the break mark goes
        // on the prefill strip, and the decode worker's bar is not drawn as failed.
        const prefillBroke = a.outcome === 'failed' && a.row?.failed_leg === 'prefill' && Boolean(a.row.prefill_worker);
        const broken = a.outcome === 'failed' && !prefillBroke;
        const width = clip(aEnd) - clip(a.startedAt);
        const stall = stalledFrom(a, now);
        const stallLeft = stall === null || width <= 0 ? null : ((clip(stall) - clip(a.startedAt)) / width) * 100;
        return (
          <div
            key={a.attempt}
            className={`attempt-bar${a.outcome === 'running' ? ' running' : ''}${broken ? ' broken' : ''}`}
            data-testid="attempt-bar"
            data-worker={a.worker}
            data-attempt={a.attempt}
            data-outcome={a.outcome}
            data-blamed={a.outcome === 'failed' ? (prefillBroke ? a.row!.prefill_worker! : a.worker) : undefined}
            data-tokens={a.tokens}
            data-stalled={stall === null ? undefined : stall}
            {...hoverCard(() => {
              const f = a.attempt === r.attempts.length - 1 ? clientFailure(r) : null;
              return attemptCard(a, workers, now, f, f ? clientGotHeadline(r, f) : null);
            })}
            style={{ left: `${pct(a.startedAt)}%`, width: `${(width / span) * 100}%`, background: workers.colorOf(a.worker) }}
          >
            {stallLeft !== null && stallLeft < 100 && <div className="stall" data-testid="stall" style={{ left: `${stallLeft}%` }} />}
            {/* A running attempt's prefill leg shows from its start (the attempt_started event names it). */}
            {(a.row?.prefill_worker ?? a.prefillWorker) && (() => {
              const legEnd = prefillLegEnd(a);
              const legWidth = legEnd === null || width <= 0 ? 100 : Math.max(0, Math.min(100, ((clip(legEnd) - clip(a.startedAt)) / width) * 100));
              return (
                <div
                  className={`pd-leg${a.row?.failed_leg === 'prefill' ? ' failed' : ''}${prefillBroke ? ' broken' : ''}`}
                  data-testid="prefill-leg"
                  data-worker={a.row?.prefill_worker ?? a.prefillWorker!}
                  data-failed-leg={a.row?.failed_leg ?? undefined}
                  data-ended={legEnd ?? undefined}
                  style={{ background: workers.colorOf(a.row?.prefill_worker ?? a.prefillWorker!), width: `${legWidth}%` }}
                />
              );
            })()}
          </div>
        );
      })}
      {r.attempts.slice(1).map((a) => (
        <div
          key={`h${a.attempt}`}
          className="handoff"
          style={{ left: `${pct(a.startedAt)}%` }}
          {...hoverCard(() => ({
            title: `hand-off to ${workers.label(a.worker)}`,
            lines: [['at token', String(a.replayed)], ['at', `${fmtClock(a.startedAt)} · ${fmtIso(a.startedAt)}`], ['attempt', String(a.attempt)]],
          }))}
        />
      ))}
      {marks?.map((m, i) => (
        <div key={`f${i}`} className={`fault-mark ${m.source} tone-${markTone(m.kind)}`} data-testid="fault-marker" data-kind={m.kind} style={{ left: `${pct(m.t)}%` }} {...hoverCard(() => faultCard(m))} />
      ))}
    </div>
  );
});

export { faultCard };
