// The incident list above the Requests waterfall: one chip per incident (newest first), coloured
// by severity (failed requests), with its worker, start and counts. Clicking one (or a fault flag
// on the time axis) focuses the list on it: only the requests it touched, on a time axis fitted to
// them, and the count in words ("31 broken · 29 migrated · 2 failed: no worker left"). Derived
// from the trace rows and fault marks this page holds, at most once a second while live.
import { useEffect, useMemo } from 'react';
import type { FaultMark } from '../../../host/contract.ts';
import { deriveIncidents, fitWindow, followFocus, incidentOfMark, incidentSummary, type Incident } from '../store/incidents.ts';
import type { IncidentFocus } from '../store/filters.ts';
import type { DashState } from '../store/store.ts';
import { useDash, useSecond, useStoreApi } from './context.ts';
import { fmtClock, fmtMs } from './format.ts';
import { hoverCard } from './HoverCard.tsx';
import { processEnd } from './WorkerCard.tsx';

/** The incidents in this page's rows and marks; recomputed once a second at most (live), or when a file loads. */
export function useIncidents(): Incident[] {
  const store = useStoreApi();
  const faults = useDash((s) => s.faults);
  const mode = useDash((s) => s.mode);
  const second = useSecond();
  const version = useDash((s) => s.version);
  // Live, the rows change with every batch: once a second is enough for a list of incidents.
  const key = mode === 'file' ? version : second;
  return useMemo(() => deriveIncidents(store.getState().model.traces.all(), faults), [store, faults, key]);
}

/** Focus the Requests list on an incident: its requests, and a window that shows them all. */
export function focusIncident(state: DashState, i: Incident): void {
  const { book, traces } = state.model;
  const ids = new Set(i.requestIds);
  const spans: { from: number; to: number }[] = [{ from: i.start, to: i.end }];
  for (const id of ids) {
    const r = book.get(id);
    if (r) {
      spans.push({ from: r.startedAt, to: r.endedAt ?? state.now });
      continue;
    }
    for (const row of traces.ofRequest(id)) spans.push({ from: row.started_at, to: row.ended_at });
  }
  const w = fitWindow(spans)!;
  const focus: IncidentFocus = { id: i.id, label: incidentLabel(i), summary: incidentSummary(i), ids, from: w.from, to: w.to };
  state.setFilters({ incident: focus, migrated: false, failed: false, notAdmitted: false, worker: null, search: '', sinceFault: false });
  state.setView('live');
}

/** Focus the incident a fault flag belongs to; false when none holds it (a routine mark). */
export function focusMarks(state: DashState, incidents: readonly Incident[], marks: readonly FaultMark[]): boolean {
  for (const m of marks) {
    const i = incidentOfMark(incidents, m);
    if (i) {
      focusIncident(state, i);
      return true;
    }
  }
  return false;
}

function incidentLabel(i: Incident): string {
  return `${i.workerId ?? i.worker} · ${i.cause} · ${fmtClock(i.start).slice(0, 8)}`;
}

function card(i: Incident, sim: DashState['sim']) {
  // A router lost behind the hub: the incident is on the router, and the hub (not a router) read it.
  const onRouter = i.marks.some((m) => m.kind === 'router_lost');
  const lines: [string, string][] = [
    [onRouter ? 'router' : 'worker', `${i.workerId ?? ''} ${i.worker}`.trim()],
    ['began', `${fmtClock(i.start)} · ${i.start}`],
    ['lasted', fmtMs(i.end - i.start)],
    ['cause', i.cause],
  ];
  if (i.evidence) lines.push([onRouter ? 'hub saw' : 'router read', i.evidence]);
  if (i.verdict) lines.push(['health check', i.verdict]);
  // A simulated worker still down: how its process ended (the signal of a kill, dashboard or
  // outside, or an exit code), as the cluster saw it.
  const proc = i.recoveredAt === null ? sim?.find((s) => s.url === i.worker && !s.alive && s.exit) : undefined;
  if (proc) lines.push(['process', processEnd(proc.exit)]);
  lines.push(['recovered', i.recoveredAt === null ? 'not seen' : fmtClock(i.recoveredAt)]);
  lines.push(['requests', incidentSummary(i)]);
  return { title: `incident on ${onRouter ? 'router ' : ''}${i.workerId ?? i.worker}`, lines };
}

/**
 * Where to break a worker, said where a user looks for it (the Requests view, before any
 * incident): the sim's Kill, Hang and Reset buttons sit on the worker cards in Workers. Only
 * live with a simulated cluster (a real worker has no such buttons); null otherwise.
 */
export function killHint(mode: DashState['mode'], sim: DashState['sim']): string | null {
  if (mode !== 'live' || !sim || sim.length === 0) return null;
  return 'To break a worker and watch its requests migrate: Kill, Hang or Reset on its card in Workers (key 2).';
}

export function IncidentStrip({ incidents }: { incidents: readonly Incident[] }) {
  const store = useStoreApi();
  const focus = useDash((s) => s.filters.incident ?? null);
  const hint = killHint(useDash((s) => s.mode), useDash((s) => s.sim));
  const current = focus ? followFocus(incidents, focus) : null;
  // The focused incident's id moved: the focus follows it, so its chip stays the active one.
  useEffect(() => {
    if (focus && current && current.id !== focus.id) store.getState().setFilters({ incident: { ...focus, id: current.id } });
  }, [focus, current, store]);
  if (incidents.length === 0 && !focus) {
    if (!hint) return null;
    return (
      <div className="incidents" data-testid="incident-list" aria-label="Incidents">
        <span className="incidents-title">No incidents</span>
        <span style={{ color: 'var(--muted)' }} data-testid="kill-hint">{hint}</span>
        <button className="link" onClick={() => store.getState().setView('workers')} data-testid="kill-hint-workers">Open Workers</button>
      </div>
    );
  }
  const newest = [...incidents].reverse();
  return (
    <div className="incidents" data-testid="incident-list" aria-label="Incidents">
      <span className="incidents-title">Incidents ({incidents.length})</span>
      {focus ? (
        <span className="incident-focus" data-testid="incident-focus" data-incident={focus.id}>
          <strong>{focus.label}</strong>
          {/* The incident keeps growing while live: its counts now, not when it was clicked. */}
          <span data-testid="incident-summary">{current ? incidentSummary(current) : focus.summary}</span>
          <button onClick={() => store.getState().setFilters({ incident: null })} data-testid="incident-clear" title="Back to every request">× all requests</button>
        </span>
      ) : null}
      <span className="incident-chips">
        {newest.map((i) => (
          <button
            key={i.id}
            className={`incident-chip ${i.severity}${focus?.id === i.id ? ' active' : ''}`}
            data-testid="incident"
            data-incident={i.id}
            data-severity={i.severity}
            data-failed={i.failed}
            onClick={() => focusIncident(store.getState(), i)}
            {...hoverCard(() => card(i, store.getState().sim))}
          >
            <span className="sev" aria-label={i.severity} />
            {i.workerId ?? i.worker} · {fmtClock(i.start).slice(0, 8)} · {i.broken} broken{i.failed > 0 ? ` · ${i.failed} failed` : ''}
          </button>
        ))}
      </span>
    </div>
  );
}
