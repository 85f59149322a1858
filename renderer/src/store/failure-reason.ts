// What a failed request's client was told, for the row, the detail panel and the hover card. Pure.
import type { RequestView } from './request-view.ts';

export interface ClientFailure {
  /** `no_worker`, `migration_exhausted`, ... (the router's error type), or the passed-through error kind. */
  type: string;
  /** The whole `<type>: <message>` as the request row says it. */
  text: string;
  status: number | null;
}

/**
 * The error a failed request's client got: the request row's `client_error`; for rows of routers
 * that predate it, the row's `error`, or, with no attempt at all, what such a router answered.
 * Null for a request that did not fail (or whose end this page has not seen).
 */
export function clientFailure(r: RequestView): ClientFailure | null {
  if (r.status !== 'failed') return null;
  const row = r.summary;
  const text = row?.client_error ?? null;
  if (text) {
    const colon = text.indexOf(': ');
    return { type: colon > 0 ? text.slice(0, colon) : text, text, status: row?.client_status ?? null };
  }
  if (row && row.attempts === 0) return { type: 'no_worker', text: 'no_worker: no healthy worker available (no attempt was made)', status: 503 };
  const error = row?.error ?? r.error;
  // No client_error (a router that predates it, or an end it did not word): the last attempt's
  // error kind is the reason, not a second "failed".
  const kind = r.attempts[r.attempts.length - 1]?.errorKind ?? null;
  return { type: kind ?? 'failed', text: error ?? (kind ? `${kind} (the router recorded no message)` : 'failed (the router recorded no reason)'), status: null };
}

/** The failed badge's words: `failed: no_worker`, or `failed` alone when no reason is known. */
export function failedBadgeText(f: ClientFailure): string {
  return f.type === 'failed' ? 'failed' : `failed: ${f.type}`;
}

/** Short words for a failure type, as an incident's count says them ("2 failed: no worker left"). */
export function failureWords(type: string): string {
  if (type === 'no_worker') return 'no worker left';
  if (type === 'migration_exhausted') return 'migration exhausted';
  if (type === 'not_migratable') return 'not migratable';
  return type.replace(/_/g, ' ');
}

interface CoverageWorker { id: string; health: string; format: string | null; model_path: string | null; draining: boolean }

/**
 * Formats and models that no healthy worker serves now, each with the workers that would
 * (`format vllm: w1 dead`): requests of them fail with `no_worker` until one is back. Only what
 * the router's workers name; a format no worker was ever probed for is not known here.
 */
export function uncovered(workers: readonly CoverageWorker[]): { what: string; workers: string }[] {
  const groups = new Map<string, CoverageWorker[]>();
  const add = (key: string, w: CoverageWorker) => groups.set(key, [...(groups.get(key) ?? []), w]);
  for (const w of workers) {
    if (w.format !== null) add(`format ${w.format}`, w);
    if (w.model_path !== null) add(`model ${w.model_path}`, w);
  }
  const out: { what: string; workers: string }[] = [];
  for (const [what, ws] of groups) {
    if (ws.some((w) => w.health === 'healthy' && !w.draining)) continue;
    out.push({ what, workers: ws.map((w) => `${w.id} ${w.health}`).join(', ') });
  }
  return out;
}

/**
 * How the failure reached the client, as its own logs show it. A stream that had started (the
 * client had tokens) was answered 200 and ended by the format's error frame, whose code is the
 * status; grepping the client's logs for that status finds nothing, so the words say both.
 * Before a stream starts, or for a unary request, the status is the HTTP status.
 */
export function clientGotHeadline(r: RequestView, f: ClientFailure): string | null {
  if (r.stream === true && r.completionTokens > 0) {
    const n = r.completionTokens;
    return `in-stream error after ${n} token${n === 1 ? '' : 's'} (HTTP 200; error frame${f.status !== null ? ` code ${f.status}` : ''})`;
  }
  return f.status !== null ? `HTTP ${f.status}` : null;
}

/**
 * The request row's `error`, when the detail panel does not already print it: it is the last
 * failed attempt's error (printed on that attempt's line) or the client's error text; only an
 * error said nowhere else gets a line of its own.
 */
export function requestErrorLine(r: RequestView, f: ClientFailure | null): string | null {
  const e = r.error;
  if (!e) return null;
  if (r.attempts.some((a) => a.error === e)) return null;
  if (f && f.text.includes(e)) return null;
  return e;
}
