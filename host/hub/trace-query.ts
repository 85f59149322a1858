// The hub's GET /traces query. The hub names each request `<router>/<id>` (hub.ts: r0/…, r1/…) so
// that equal ids of two routers never meet, but a client knows its requests by the ids it sent:
// `request` and `request_prefix` match those (the id past the router's label), and still the hub's
// own names, which the dashboard's search and its exports use; `router` keeps one router's rows.
// A hub name counts for `request_prefix` only past a whole label (`r0/…`): a client's prefix `r`
// must not match every row because every hub name starts with `r`.
import type { TraceFilter } from '../../router/api.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import { matches } from '../../router/trace/store.ts';
import { TraceQueryError, parseTraceQuery, type TraceExtras, type TraceFormat } from '../../router/http/traces-endpoint.ts';

const SEP = '/';

export interface HubTraceQuery {
  format: TraceFormat;
  /** Applied here (hubRowMatches): `request` and `request_prefix` as above, `router`. */
  filter: TraceFilter;
  requestPrefix: string | null;
  router: string | null;
  /** What streamTraces applies itself: `until`, `iso` (not `request_prefix`). */
  extras: TraceExtras;
}

/** A router's query (parseTraceQuery), plus `router`: one of `labels`, else a 400 naming them. */
export function parseHubTraceQuery(params: URLSearchParams, labels: readonly string[]): HubTraceQuery {
  const rest = new URLSearchParams(params);
  const routers = rest.getAll('router');
  if (routers.length > 1) throw new TraceQueryError("parameter 'router' given more than once");
  rest.delete('router');
  const router = routers[0] || null;
  if (router !== null && !labels.includes(router)) throw new TraceQueryError(`unknown router '${router}' (the hub's routers: ${labels.length ? labels.join(', ') : 'none yet'})`);
  const q = parseTraceQuery(rest);
  const { requestPrefix, ...extras } = q.extras;
  return { format: q.format, filter: q.filter, requestPrefix: requestPrefix ?? null, router, extras };
}

/** Whether a hub row is one the query asks for. */
export function hubRowMatches(row: TraceRow, q: Pick<HubTraceQuery, 'filter' | 'requestPrefix' | 'router'>): boolean {
  const cut = row.request_id.indexOf(SEP);
  const label = cut < 0 ? '' : row.request_id.slice(0, cut);
  const own = cut < 0 ? row.request_id : row.request_id.slice(cut + 1);
  if (q.router !== null && label !== q.router) return false;
  const { request, ...rest } = q.filter;
  if (request !== undefined && own !== request && row.request_id !== request) return false;
  const p = q.requestPrefix;
  if (p !== null && !own.startsWith(p) && !(p.startsWith(label + SEP) && row.request_id.startsWith(p))) return false;
  return matches(row, rest);
}
