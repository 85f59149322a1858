// Filters of the Requests list: migrated, failed, not admitted, a worker, and an id search.
import { useDash, useStoreApi } from './context.ts';

export function RequestFilterBar({ shown, total }: { shown: number; total: number }) {
  const store = useStoreApi();
  const filters = useDash((s) => s.filters);
  useDash((s) => s.version);
  const workers = store.getState().model.workers.list();
  const set = store.getState().setFilters;
  return (
    <div className="toolbar" role="toolbar" aria-label="Request filters">
      <input
        id="request-search"
        data-testid="search"
        type="search"
        placeholder="Search request id  ( / )"
        value={filters.search}
        onChange={(e) => set({ search: e.target.value })}
        onKeyDown={(e) => { if (e.key === 'Escape') (e.target as HTMLInputElement).blur(); }}
        style={{ width: 220 }}
      />
      <label>
        <input type="checkbox" data-testid="filter-migrated" checked={filters.migrated} onChange={(e) => set({ migrated: e.target.checked })} />
        migrated
      </label>
      <label>
        <input type="checkbox" data-testid="filter-failed" checked={filters.failed} onChange={(e) => set({ failed: e.target.checked })} />
        failed
      </label>
      <label>
        <input type="checkbox" data-testid="filter-not-admitted" checked={filters.notAdmitted} onChange={(e) => set({ notAdmitted: e.target.checked })} />
        not admitted
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
      <span className="count" data-testid="request-count">{shown} of {total} requests</span>
    </div>
  );
}
