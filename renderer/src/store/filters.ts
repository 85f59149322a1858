// The Requests list's filters, as one predicate so the list, the keyboard cursor and the tests
// agree on what is visible.
import { migrationCount, type RequestView } from './request-view.ts';

export interface RequestFilters {
  migrated: boolean;
  failed: boolean;
  notAdmitted: boolean;
  worker: string | null;
  search: string;
}

export const NO_FILTERS: RequestFilters = { migrated: false, failed: false, notAdmitted: false, worker: null, search: '' };

export function matches(r: RequestView, f: RequestFilters): boolean {
  if (f.migrated && migrationCount(r) === 0) return false;
  if (f.failed && r.status !== 'failed') return false;
  if (f.notAdmitted && r.admitted !== false) return false;
  if (f.worker !== null && !r.attempts.some((a) => a.worker === f.worker)) return false;
  const q = f.search.trim().toLowerCase();
  if (q !== '' && !r.id.toLowerCase().includes(q)) return false;
  return true;
}

/** Visible request ids, newest first. */
export function visibleIds(ids: readonly string[], get: (id: string) => RequestView | undefined, f: RequestFilters): string[] {
  const out: string[] = [];
  for (let i = ids.length - 1; i >= 0; i--) {
    const r = get(ids[i]!);
    if (r && matches(r, f)) out.push(r.id);
  }
  return out;
}
