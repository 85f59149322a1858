// The Requests list's filters, as one predicate so the list, the keyboard cursor and the tests
// agree on what is visible.
import { migrationCount, type RequestView } from './request-view.ts';

export interface RequestFilters {
  migrated: boolean;
  failed: boolean;
  /** Requests admission refused migration for (badged "not migratable: <reason>"). */
  notAdmitted: boolean;
  worker: string | null;
  /** A request id prefix (case-insensitive), as in Traces. */
  search: string;
  /** Only requests alive at or after the last fault marker. */
  sinceFault?: boolean;
  /** Only the requests an incident touched (renderer/src/store/incidents.ts), on a time axis fitted to them. */
  incident?: IncidentFocus | null;
  /** Behind the hub: only one router's requests, by its label (r0, r1, ...: the ids' `<label>/`). */
  router?: string | null;
}

/** An incident the list is focused on: its requests, and the window that shows them all. */
export interface IncidentFocus {
  id: string;
  label: string;
  summary: string;
  ids: ReadonlySet<string>;
  from: number;
  to: number;
}

export const NO_FILTERS: RequestFilters = { migrated: false, failed: false, notAdmitted: false, worker: null, search: '', sinceFault: false, incident: null, router: null };

/** Whether an id matches a search: a case-insensitive prefix, the same rule in every view. */
export function idMatches(id: string, search: string): boolean {
  const q = search.trim().toLowerCase();
  return q === '' || id.toLowerCase().startsWith(q);
}

/**
 * `labelled`: behind the hub, whose ids read `<label>/<id>`, where the list shows the client's id:
 * a search matches that id too, as the hub's /traces matches `request_prefix`.
 */
export function matches(r: RequestView, f: RequestFilters, lastFaultAt: number | null = null, labelled = false): boolean {
  if (f.migrated && migrationCount(r) === 0) return false;
  if (f.failed && r.status !== 'failed') return false;
  if (f.notAdmitted && r.admitted !== false) return false;
  if (f.incident && !f.incident.ids.has(r.id)) return false;
  if (f.router && !r.id.startsWith(`${f.router}/`)) return false;
  if (f.worker !== null && !r.attempts.some((a) => a.worker === f.worker)) return false;
  if (f.sinceFault && lastFaultAt !== null && r.endedAt !== null && r.endedAt < lastFaultAt) return false;
  if (!idMatches(r.id, f.search) && !(labelled && r.id.includes('/') && idMatches(r.id.slice(r.id.indexOf('/') + 1), f.search))) return false;
  return true;
}

/** Visible request ids, newest first. */
export function visibleIds(ids: readonly string[], get: (id: string) => RequestView | undefined, f: RequestFilters, lastFaultAt: number | null = null, labelled = false): string[] {
  const out: string[] = [];
  for (let i = ids.length - 1; i >= 0; i--) {
    const r = get(ids[i]!);
    if (r && matches(r, f, lastFaultAt, labelled)) out.push(r.id);
  }
  return out;
}
