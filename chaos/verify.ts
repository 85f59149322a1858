// The campaign's judgement: pure functions from what the client saw, the fault-free reference
// and the router's trace rows to a list of violations. Nothing here touches a socket, so each
// rule can be tested on hand-made data.

import type { AttemptRow, RequestRow, TraceRow } from '../router/trace/row.ts';
import type { Answer, ClientResult } from './client.ts';
import type { Reference } from './reference.ts';
import type { RequestSpec } from './traffic.ts';

/** Error kinds after which migration.md says an admitted request migrates. */
const MIGRATABLE = new Set(['connect', 'http_5xx', 'stream_broken', 'stalled', 'engine_abort', 'protocol']);

/** What the campaign keeps of one request once the client is done with it. */
export interface RequestRecord {
  id: string;
  index: number;
  kind: RequestSpec['kind'];
  admitted: boolean;
  reason: string | null;
  stream: boolean;
  startedAt: number;
  endedAt: number;
  status: number;
  result: 'answer' | 'error' | 'cancelled' | 'broken';
  /** Answer identical to the reference in every field compared. */
  exact: boolean;
  errorMessage: string | null;
  errorType: string | null;
  mode: ClientResult['mode'];
  /** Client-side violations: framing, mismatches, dropped connections. */
  violations: string[];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The first field in which the answer differs from the reference, or null. */
export function compareAnswer(a: Answer, ref: Reference): string | null {
  const firstDiff = (x: readonly unknown[], y: readonly unknown[]) => {
    for (let i = 0; i < Math.max(x.length, y.length); i++) if (!same(x[i], y[i])) return i;
    return -1;
  };
  const d = firstDiff(a.output_ids, ref.output_ids);
  if (d >= 0) return `output_ids differ at position ${d} (got ${a.output_ids.length} tokens, want ${ref.output_ids.length})`;
  const m = a.meta;
  if (!same(m.finish_reason, ref.finish_reason)) return `finish_reason ${JSON.stringify(m.finish_reason)}, want ${JSON.stringify(ref.finish_reason)}`;
  if (m.completion_tokens !== ref.completion_tokens) return `completion_tokens ${String(m.completion_tokens)}, want ${ref.completion_tokens}`;
  if (m.prompt_tokens !== ref.prompt_tokens) return `prompt_tokens ${String(m.prompt_tokens)}, want ${ref.prompt_tokens}`;
  for (const key of ['output_token_logprobs', 'output_top_logprobs'] as const) {
    const want = ref[key];
    const got = a[key] ?? m[key];
    if (want === undefined) {
      if (got !== undefined) return `${key} present but logprobs were not asked for`;
      continue;
    }
    if (!Array.isArray(got)) return `${key} missing`;
    const i = firstDiff(got, want);
    if (i >= 0) return `${key} differ at position ${i}`;
  }
  for (const key of ['input_token_logprobs', 'input_top_logprobs'] as const) {
    const want = ref[key];
    if (want !== undefined && !same(m[key], want)) return `${key} differ from the original prompt's`;
  }
  return null;
}

/** Reduce a client result to its record, with the checks that need only the client's view. */
export function judgeClient(r: ClientResult, ref: Reference): RequestRecord {
  const s = r.spec;
  const v: string[] = r.problems.map((p) => `framing: ${p}`);
  let result: RequestRecord['result'];
  let exact = false;
  if (r.cancelled) result = 'cancelled';
  else if (r.answer) {
    result = 'answer';
    const diff = compareAnswer(r.answer, ref);
    if (diff) v.push(`not token-exact: ${diff}`);
    else exact = true;
  } else if (r.error) {
    result = 'error';
    if (!r.error.message) v.push('an error without a message');
  } else {
    result = 'broken';
    v.push(`no clean end: ${r.transport ?? `status ${r.status} without an answer or an error`}`);
  }
  // Whatever ended the request, the tokens the client got are the start of the true answer:
  // none lost, none repeated, none invented.
  const got = r.partialIds;
  if (result !== 'answer' && got.some((t, i) => t !== ref.output_ids[i])) {
    v.push(`the ${got.length} tokens received before the end are not a prefix of the reference`);
  }
  return {
    id: s.id,
    index: s.index,
    kind: s.kind,
    admitted: s.admitted,
    reason: s.reason,
    stream: s.stream,
    startedAt: r.startedAt,
    endedAt: r.endedAt,
    status: r.status,
    result,
    exact,
    errorMessage: r.error?.message ?? null,
    errorType: r.error?.type ?? null,
    mode: r.mode,
    violations: v,
  };
}

export interface TraceContext {
  migrationLimit: number;
  /** Streaming mode per worker URL (true: incremental). */
  incrementalByUrl: ReadonlyMap<string, boolean>;
  /** Every worker URL of the campaign. */
  workerUrls: readonly string[];
  /**
   * Whether the router had a recorded reason to keep `url` out of new attempts at time `t`: a
   * fault on it (with its after-effects), or a failed attempt on it shortly before (the bench).
   */
  workerOut(url: string, t: number): boolean;
}

/** Failure kinds that bench a worker (router/migration/failure.ts BLAMES_WORKER). */
const BLAMING = new Set(['connect', 'http_5xx', 'stream_broken', 'stalled', 'engine_abort']);

type Window = { url: string; start: number; end: number };

/**
 * When each worker was out: each failed attempt in the trace that blames its worker benches it
 * for `benchMs` (longer if its breaker opens); each fault window (plus `graceMs` for health checks
 * to notice the return) takes it out; and so does each window in which the router itself reported
 * it not healthy (`reported`: health checks that timed out on a starved host leave no trace row).
 */
export function outages(attempts: Iterable<AttemptRow>, faults: readonly Window[], benchMs: number, graceMs: number, reported: readonly Window[] = []): (url: string, t: number) => boolean {
  const byUrl = new Map<string, [number, number][]>();
  const add = (url: string, from: number, to: number) => {
    let list = byUrl.get(url);
    if (!list) byUrl.set(url, (list = []));
    list.push([from, to]);
  };
  for (const a of attempts) if (a.outcome === 'failed' && BLAMING.has(a.error_kind ?? '')) add(a.worker, a.ended_at - 50, a.ended_at + benchMs + graceMs);
  for (const f of faults) add(f.url, f.start - 50, f.end + graceMs);
  for (const r of reported) add(r.url, r.start - 50, r.end + 50);
  return (url, t) => (byUrl.get(url) ?? []).some(([from, to]) => from <= t && t <= to);
}

export interface RowsOfRequest {
  requests: RequestRow[];
  attempts: AttemptRow[];
}

/** Index trace rows by logical request id. */
export function groupRows(rows: Iterable<TraceRow>): Map<string, RowsOfRequest> {
  const by = new Map<string, RowsOfRequest>();
  for (const row of rows) {
    let g = by.get(row.request_id);
    if (!g) by.set(row.request_id, (g = { requests: [], attempts: [] }));
    if (row.kind === 'request') g.requests.push(row);
    else g.attempts.push(row);
  }
  return by;
}

/** The checks that need the router's own record of the request. */
export function judgeTrace(rec: RequestRecord, rows: RowsOfRequest | undefined, ctx: TraceContext): string[] {
  const v: string[] = [];
  const reqs = rows?.requests ?? [];
  const atts = [...(rows?.attempts ?? [])].sort((a, b) => a.attempt - b.attempt);
  if (reqs.length !== 1) {
    v.push(`trace: ${reqs.length} request rows (want exactly one)`);
    if (reqs.length === 0) return v;
  }
  const row = reqs[0]!;
  if (atts.length !== row.attempts || atts.some((a, i) => a.attempt !== i)) {
    v.push(`trace: attempt rows [${atts.map((a) => a.attempt).join(',')}] for ${row.attempts} attempts (want each of 0..${row.attempts - 1} once)`);
  }
  if (new Set(atts.map((a) => a.rid)).size !== atts.length) v.push('trace: two attempts share a rid');
  if (row.admitted !== rec.admitted) v.push(`admission: router says admitted=${row.admitted}, the rules say ${rec.admitted}`);
  else if (!rec.admitted && row.admission_reason !== rec.reason) v.push(`admission: reason ${row.admission_reason}, want ${rec.reason}`);
  if (!rec.admitted && row.attempts > 1) v.push(`a non-migratable request was continued (${row.attempts} attempts)`);
  if (row.attempts > ctx.migrationLimit + 1) v.push(`${row.attempts} attempts exceed the limit ${ctx.migrationLimit} + 1`);

  switch (rec.result) {
    case 'answer': {
      if (row.outcome !== 'finished') v.push(`the client got an answer but the request row says ${row.outcome}`);
      const first = atts[0];
      const incremental = first ? ctx.incrementalByUrl.get(first.worker) : undefined;
      if (rec.stream && rec.mode !== 'unknown' && incremental !== undefined && (rec.mode === 'incremental') !== incremental) {
        v.push(`the client got ${rec.mode} chunks but attempt 0 ran on a ${incremental ? 'incremental' : 'cumulative'} worker`);
      }
      break;
    }
    case 'cancelled': {
      // A cancel that raced the last frame may be recorded as finished; anything else must say cancelled.
      if (row.outcome !== 'cancelled' && row.outcome !== 'finished') v.push(`cancelled by the client but the request row says ${row.outcome}`);
      if (row.outcome === 'cancelled') {
        const cancelledRows = atts.filter((a) => a.outcome === 'cancelled');
        if (cancelledRows.length > 1 || (cancelledRows.length === 1 && cancelledRows[0] !== atts[atts.length - 1])) {
          v.push('cancel: the cancelled attempt is not the last one');
        }
        // Nothing after the cancelled attempt, and nothing before it that had finished. (When the
        // router heard the hang-up is its own business: the cancel test measures that.)
        if (atts.slice(0, -1).some((a) => a.outcome !== 'failed')) v.push('cancel: an attempt before the last one did not fail');
      }
      break;
    }
    case 'error': {
      if (row.outcome !== 'failed') v.push(`the client got an error but the request row says ${row.outcome}`);
      if (rec.admitted) {
        const bad = atts.find((a) => a.outcome !== 'failed' || !MIGRATABLE.has(a.error_kind ?? ''));
        if (bad) v.push(`an admitted request failed after an attempt that did not fail migratably (${bad.outcome}/${bad.error_kind})`);
        const msg = rec.errorMessage ?? '';
        const exhausted = /migration exhausted/i.test(msg) && row.attempts === ctx.migrationLimit + 1;
        // "No worker left" is honest only if every worker this request did not try was out, for a
        // reason the trace or the fault log shows, when the router gave up.
        const tried = new Set(atts.map((a) => a.worker));
        const notOut = ctx.workerUrls.filter((u) => !tried.has(u) && !ctx.workerOut(u, row.ended_at));
        const noWorker = /no worker left|no healthy worker/i.test(msg) && notOut.length === 0;
        if (/no worker left|no healthy worker/i.test(msg) && notOut.length > 0) {
          v.push(`an admitted request failed for want of a worker while ${notOut.join(', ')} had no recorded reason to be out (${row.attempts} attempts): ${msg}`);
        } else if (!exhausted && !noWorker) {
          v.push(`an admitted request failed without exhausting migration (${row.attempts} attempts): ${msg}`);
        }
      }
      break;
    }
    case 'broken':
      break;
  }
  return v;
}
