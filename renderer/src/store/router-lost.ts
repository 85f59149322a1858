// Requests whose router died with them in flight (behind a dashboard hub, host/hub/). The hub lists
// them in `owner_lost`; their router will never write their end, and their clients' streams were
// cut with it. The page ends them itself: a request row of outcome `failed` and client error
// `router_lost` (so the list, FAILED and the incidents count them like any failure), and a fault
// mark of kind `router_lost` on the router (the flag on the axis, and an incident of its own). Pure.
import type { FaultMark, HubState, RouterLinkStatus } from '../../../host/contract.ts';
import type { RequestRow } from '../../../router/trace/row.ts';
import type { RequestView } from './request-view.ts';

/** The client error type of a request its router died with. */
export const ROUTER_LOST = 'router_lost';

/** The hub's label of a request's router (`r1` of `r1/abc`), or null for an id without one. */
export function routerLabel(id: string): string | null {
  const cut = id.indexOf('/');
  return cut > 0 ? id.slice(0, cut) : null;
}

/**
 * When the router went: the last time the hub heard from it, when that is known and not before the
 * request started (a router followed again at a new life has a later one); else `now`.
 */
export function lostAt(router: RouterLinkStatus | undefined, r: RequestView, now: number): number {
  const seen = router?.last_seen ?? null;
  if (seen === null || seen > now) return now;
  let floor = r.startedAt;
  for (const a of r.attempts) floor = Math.max(floor, a.startedAt, a.lastTokenAt ?? 0);
  return Math.max(seen, floor);
}

export function routerName(router: RouterLinkStatus | undefined, label: string): string {
  return router ? `${label} (${router.url.replace(/^https?:\/\//, '')})` : label;
}

/** The request row the router would have written had it lived: failed, `router_lost`, ended at `t`. */
export function routerLostRow(r: RequestView, t: number, name: string): RequestRow {
  const text = `router ${name} died with this request in flight; its client's connection went with it`;
  return {
    kind: 'request', format: r.format === 'vllm' || r.format === 'openai' ? r.format : 'sglang', request_id: r.id, attempts: r.attempts.length,
    migrations: r.migrations.length, admitted: r.admitted ?? false, admission_reason: r.admissionReason, prompt_tokens: r.promptTokens ?? 0,
    completion_tokens: r.completionTokens, cached_tokens: null, finish_reason: null, outcome: 'failed', duration_ms: Math.max(0, t - r.startedAt),
    started_at: r.startedAt, ended_at: t, stream: r.stream ?? true, max_new_tokens: r.maxNewTokens, error: `router lost: ${text}`,
    client_error: `${ROUTER_LOST}: ${text}`, client_status: null, trace_id: r.traceId,
  };
}

/** The flag of a router's loss: on the router (its label and URL), with how many requests it cut. */
export function routerLostMark(label: string, router: RouterLinkStatus | undefined, t: number, cut: number): FaultMark {
  return { t, kind: 'router_lost', worker: label, url: router?.url ?? null, source: 'router', detail: `${cut} request${cut === 1 ? '' : 's'} cut` };
}

/** The running requests of this book the hub says were lost with their router, grouped by router label. */
export function lostByRouter(hub: HubState, get: (id: string) => RequestView | undefined): Map<string, RequestView[]> {
  const out = new Map<string, RequestView[]>();
  for (const id of hub.owner_lost) {
    const r = get(id);
    // `lost`: the page itself lost the feed while it ran; the hub knows better.
    if (!r || (r.status !== 'running' && r.status !== 'lost')) continue;
    const label = routerLabel(id) ?? '?';
    out.set(label, [...(out.get(label) ?? []), r]);
  }
  return out;
}
