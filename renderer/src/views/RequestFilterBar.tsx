// Filters of the Requests list: migrated, failed, not migratable, a worker, a router (behind the hub), since the last fault,
// and an id prefix search (the same rule as in Traces).
import { useDash, useStoreApi } from './context.ts';
import { lastFault, faultLabel } from '../store/faults.ts';
import { lastFaultStart } from '../store/incidents.ts';
import { useIncidents } from './IncidentsView.tsx';
import { fmtClock } from './format.ts';

export function RequestFilterBar({ shown, held }: { shown: number; held: number }) {
  const store = useStoreApi();
  const filters = useDash((s) => s.filters);
  const faults = useDash((s) => s.faults);
  const hub = useDash((s) => s.hub);
  useDash((s) => s.version);
  const workers = store.getState().model.workers.list();
  const set = store.getState().setFilters;
  const fault = lastFault(faults);
  // The fault began at its incident's first broken attempt, which may come before any mark.
  const faultAt = lastFaultStart(faults, useIncidents());
  return (
    <div className="toolbar" role="toolbar" aria-label="Request filters">
      <input
        id="request-search"
        data-testid="search"
        type="search"
        placeholder="Request id prefix  ( / )"
        value={filters.search}
        onChange={(e) => set({ search: e.target.value })}
        onKeyDown={(e) => { if (e.key === 'Escape') (e.target as HTMLInputElement).blur(); }}
        style={{ width: 200 }}
      />
      <label>
        <input type="checkbox" data-testid="filter-migrated" checked={filters.migrated} onChange={(e) => set({ migrated: e.target.checked })} />
        migrated
      </label>
      <label>
        <input type="checkbox" data-testid="filter-failed" checked={filters.failed} onChange={(e) => set({ failed: e.target.checked })} />
        failed
      </label>
      <label title="Requests admission refused migration for (stateful sampling, batches, ...)">
        <input type="checkbox" data-testid="filter-not-admitted" checked={filters.notAdmitted} onChange={(e) => set({ notAdmitted: e.target.checked })} />
        not migratable
      </label>
      <label title={faultAt !== null ? `Requests still running at or after ${fault ? faultLabel(fault) : 'the last fault'} (${fmtClock(faultAt)})` : 'No fault yet'}>
        <input type="checkbox" data-testid="filter-since-fault" disabled={faultAt === null} checked={Boolean(filters.sinceFault) && faultAt !== null} onChange={(e) => set({ sinceFault: e.target.checked })} />
        since last fault{faultAt !== null ? ` (${fault ? `${faultLabel(fault)}, ` : ''}${fmtClock(faultAt).slice(0, 8)})` : ''}
      </label>
      <label>
        worker
        <select data-testid="filter-worker" value={filters.worker ?? ''} onChange={(e) => set({ worker: e.target.value || null })}>
          <option value="">any</option>
          {workers.map((w) => (
            <option key={w.id} value={w.url}>{w.id} · {w.url}</option>
          ))}
        </select>
      </label>
      {hub && (
        <label title="The router that owns the request (the hub's label; the id column shows the client's id)">
          router
          <select data-testid="filter-router" value={filters.router ?? ''} onChange={(e) => set({ router: e.target.value || null })}>
            <option value="">any</option>
            {hub.routers.map((r) => (
              <option key={r.label} value={r.label}>{r.label} · {r.url.replace(/^https?:\/\//, '')}{r.state === 'lost' ? ' (lost)' : ''}</option>
            ))}
          </select>
        </label>
      )}
      <span className="count" data-testid="request-count" title="Requests this page holds: those in flight, the last finished ones, and longer the ones that migrated or failed">
        {shown.toLocaleString()} of {held.toLocaleString()} held
      </span>
    </div>
  );
}
