// The campaign's judgement: pure functions from what the client saw, the fault-free reference
// and the router's trace rows to a list of violations. Nothing here touches a socket, so each
// rule can be tested on hand-made data. Both wire formats are judged by the same rules; where
// a rule reads the wire (the answer's fields, the refusal's wording) it reads the request's format.

import type { AttemptRow, RequestRow, TraceRow } from '../router/trace/row.ts';
import { isVllmAnswer, type Answer, type ClientResult, type VllmAnswer } from './client.ts';
import { isVllmReference, referenceIds, type AnyReference, type Reference, type VllmReference } from './reference.ts';
import { vocabRefusal, type ClientKind, type GroupInfo, type RequestSpec, type UsageMode, type WireFormat } from './traffic.ts';
import { spansProblem, spansStart } from './vllm-client.ts';

/** Error kinds after which migration.md says an admitted request migrates. */
const MIGRATABLE = new Set(['connect', 'http_5xx', 'stream_broken', 'stalled', 'first_token_timeout', 'engine_abort', 'protocol', 'weights_changed']);
/** An attempt that ended so that its request moves on: a migratable failure, or a drain's move off a going worker. */
function movedOn(a: AttemptRow): boolean {
  return (a.outcome === 'failed' && MIGRATABLE.has(a.error_kind ?? '')) || (a.outcome === 'drained' && a.error_kind === 'drain');
}

/** Error kinds that are the request's own fault: passed to the client, never migrated, never blamed. */
export const CLIENT_FAULT = new Set(['validation', 'http_4xx']);

/** The weights a worker serves, as the campaign set them up. */
export type Weights = 'default' | 'other';

/** What the campaign keeps of one request once the client is done with it. */
export interface RequestRecord {
  /** The wire format the request was sent in (and the only one its workers may speak). */
  format: WireFormat;
  /** The logical id the router uses (shared by the members of a shared-header group). */
  id: string;
  /** Unique per request of the campaign. */
  key: string;
  index: number;
  kind: RequestSpec['kind'];
  group: GroupInfo | null;
  /** The client sent input ids beyond the vocabulary: it must get SGLang's refusal. */
  bad: boolean;
  promptLength: number;
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
  /** The error came in band (an SSE error frame), not as an HTTP status. */
  errorInBand: boolean;
  /**
   * The weights whose reference the client's tokens agree with: an answer equal to it, or the
   * tokens received before another end a prefix of it (both when the two agree, e.g. no tokens).
   */
  weights: Weights[];
  mode: ClientResult['mode'];
  /**
   * vLLM answers: where the finishing choice's weight_versions start (0: every token named;
   * null: none named). vLLM names weight versions only on a choice's last chunk, so the tokens of
   * an attempt that failed after producing some are never named (docs/vllm.md, known gaps).
   */
  spansStart?: number | null;
  /** Client-side violations: framing, mismatches, dropped connections. */
  violations: string[];
  /** Which of the campaign's special clients sent it (absent: ordinary traffic). */
  client?: ClientKind;
  /** unknown_key: the key sent. */
  unknownKey?: string;
  /** stream_interval: the value sent. */
  streamInterval?: number;
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

/**
 * The first field in which a vLLM answer differs from vLLM's uninterrupted answer, or null:
 * token ids, finish_reason, logprobs.content entries (exactly when asked), usage counts (when the
 * client asked for usage; a unary answer always has it).
 */
export function compareVllmAnswer(a: VllmAnswer, ref: VllmReference, usage: UsageMode = 'final'): string | null {
  const firstDiff = (x: readonly unknown[], y: readonly unknown[]) => {
    for (let i = 0; i < Math.max(x.length, y.length); i++) if (!same(x[i], y[i])) return i;
    return -1;
  };
  const d = firstDiff(a.token_ids, ref.token_ids);
  if (d >= 0) return `token_ids differ at position ${d} (got ${a.token_ids.length} tokens, want ${ref.token_ids.length})`;
  if (a.finish_reason !== ref.finish_reason) return `finish_reason ${JSON.stringify(a.finish_reason)}, want ${JSON.stringify(ref.finish_reason)}`;
  if (ref.logprobs === null) {
    if (a.logprobs !== null) return 'logprobs present but none were asked for';
  } else {
    if (a.logprobs === null) return 'logprobs missing';
    const i = firstDiff(a.logprobs, ref.logprobs);
    if (i >= 0) return `logprobs differ at position ${i}`;
  }
  if (usage !== 'none') {
    const u = a.usage;
    if (u === null) return 'usage missing';
    for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens'] as const) if (u[k] !== ref.usage[k]) return `usage.${k} ${String(u[k])}, want ${ref.usage[k]}`;
  } else if (a.usage !== null) return 'usage present but the client did not ask for it';
  return null;
}

/** The answer against the reference, each of its own format. */
function compareAny(a: Answer | VllmAnswer, ref: AnyReference, s: RequestSpec): string | null {
  if (isVllmAnswer(a) !== isVllmReference(ref)) return `${isVllmAnswer(a) ? 'a vLLM' : 'an SGLang'} answer to a ${s.format} request`;
  if (isVllmAnswer(a)) return compareVllmAnswer(a, ref as VllmReference, s.stream ? (s.vllm?.usage ?? 'none') : 'final');
  return compareAnswer(a, ref as Reference);
}

const isPrefix = (got: readonly number[], of: readonly number[]) => got.length <= of.length && got.every((t, i) => t === of[i]);

/**
 * Reduce a client result to its record, with the checks that need only the client's view.
 * `other`: the reference of the other weights, when a worker of the campaign serves them (an
 * answer may be of either; the trace check says which it must be).
 */
export function judgeClient(r: ClientResult, ref: AnyReference, other?: AnyReference): RequestRecord {
  const s = r.spec;
  const v: string[] = r.problems.map((p) => `framing: ${p}`);
  let result: RequestRecord['result'];
  let exact = false;
  const weights: Weights[] = [];
  let spans: number | null | undefined;
  const a = r.answer;
  const finishType = a === null ? undefined : isVllmAnswer(a) ? a.finish_reason : (a.meta.finish_reason as { type?: unknown } | null | undefined)?.type;
  if (r.cancelled) result = 'cancelled';
  else if (a) {
    result = 'answer';
    const diff = compareAny(a, ref, s);
    if (diff === null) weights.push('default');
    if (other && compareAny(a, other, s) === null) weights.push('other');
    if (isVllmAnswer(a)) {
      const p = spansProblem(a.weight_versions, a.token_ids.length);
      if (p) v.push(`framing: ${p}`);
      spans = spansStart(a.weight_versions);
    }
    if (s.bad) v.push(`bad request: answered although ${s.format === 'vllm' ? 'token_ids' : 'input_ids'}[${s.bad.position}] = ${s.bad.token} is beyond the vocabulary`);
    else if (s.client === 'unknown_key') v.push(`unknown key: answered, although SGLang refuses sampling_params.${s.unknownKey} (SamplingParams has no such field: TypeError)`);
    else if (finishType === 'abort') {
      const msg = isVllmAnswer(a) ? 'finish_reason "abort"' : (a.meta.finish_reason as { message?: unknown }).message;
      const who = s.group?.kind === 'prefix_rids' ? ` while ${s.group.name}${'0'.repeat(s.group.canceller ?? 0)} of its prefix group was cancelled` : '';
      v.push(`aborted: the answer ended with an abort finish (${JSON.stringify(msg)})${who}, though nobody aborted it`);
    } else if (weights.length === 0) v.push(`not token-exact: ${diff}`);
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
  if (result !== 'answer') {
    if (isPrefix(got, referenceIds(ref))) weights.push('default');
    if (other && isPrefix(got, referenceIds(other))) weights.push('other');
    if (weights.length === 0) v.push(`the ${got.length} tokens received before the end are not a prefix of the reference`);
    if (s.bad && got.length > 0) v.push(`bad request: ${got.length} tokens received before the refusal`);
  }
  const rec: RequestRecord = {
    format: s.format,
    id: s.id,
    key: s.key,
    index: s.index,
    kind: s.kind,
    group: s.group ?? null,
    bad: s.bad !== undefined,
    promptLength: s.prompt.length,
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
    errorInBand: r.error?.inBand ?? false,
    weights,
    mode: r.mode,
    violations: v,
  };
  if (spans !== undefined) rec.spansStart = spans;
  if (s.client !== undefined) rec.client = s.client;
  if (s.unknownKey !== undefined) rec.unknownKey = s.unknownKey;
  if (s.streamInterval !== undefined) rec.streamInterval = s.streamInterval;
  return rec;
}

export interface TraceContext {
  migrationLimit: number;
  /** Streaming mode per worker URL (true: incremental). */
  incrementalByUrl: ReadonlyMap<string, boolean>;
  /** Every worker URL of the campaign (as the router knows them). */
  workerUrls: readonly string[];
  /** The weights each worker serves; absent: all alike. */
  weightsByUrl?: ReadonlyMap<string, Weights>;
  /** The worker behind the proxy that answers 429 to a share of continuations, if any. */
  refusingUrl?: string | null;
  /** Every worker behind such a proxy (one per format in a mixed campaign). */
  refusingUrls?: readonly string[];
  /** The wire format each worker speaks; absent: all SGLang. */
  formatByUrl?: ReadonlyMap<string, WireFormat>;
  /**
   * Whether the router had a recorded reason to keep `url` out of new attempts at time `t`: a
   * fault on it (with its after-effects), or a failed attempt on it shortly before (the bench).
   */
  workerOut(url: string, t: number): boolean;
}

/** Whether `url` is behind a proxy that refuses continuations with 429. */
function refuses(ctx: TraceContext, url: string): boolean {
  return (ctx.refusingUrl !== undefined && ctx.refusingUrl !== null && ctx.refusingUrl === url) || (ctx.refusingUrls?.includes(url) ?? false);
}

/** Failure kinds that bench a worker (router/core/failure.ts BLAMES_WORKER). */
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
  if (row.finish_reason === 'abort' && rec.result !== 'cancelled') v.push(`aborted: the request row says finish_reason abort, though nobody aborted it`);

  // A request goes only to workers of its format.
  const formatOf = (url: string): WireFormat => ctx.formatByUrl?.get(url) ?? 'sglang';
  const format = rec.format ?? 'sglang';
  for (const a of atts) if (formatOf(a.worker) !== format) v.push(`format: attempt ${a.attempt} of a ${format} request ran on ${a.worker}, a ${formatOf(a.worker)} worker`);

  // A refusal (the request's own fault) is passed through on the attempt that got it: never
  // migrated, so it can only be the last attempt.
  const refusals = atts.filter((a) => a.outcome === 'failed' && CLIENT_FAULT.has(a.error_kind ?? ''));
  if (refusals.some((a) => a !== atts[atts.length - 1])) v.push(`refusal: a ${refusals[0]!.error_kind} on attempt ${refusals[0]!.attempt} was migrated (${row.attempts} attempts)`);

  // Weights: the tokens of one answer come from one set of weights, that of the first attempt
  // that produced tokens; no later attempt runs on other weights (unless it failed saying so).
  const weightsOf = (url: string): Weights => ctx.weightsByUrl?.get(url) ?? 'default';
  const firstTokens = atts.find((a) => a.tokens > 0);
  const pinned = ctx.weightsByUrl && firstTokens ? weightsOf(firstTokens.worker) : null;
  if (pinned !== null) {
    for (const a of atts) {
      if (a.attempt <= firstTokens!.attempt || weightsOf(a.worker) === pinned || a.error_kind === 'weights_changed') continue;
      v.push(`weights: attempt ${a.attempt} ran on ${a.worker} (${weightsOf(a.worker)} weights) after attempt ${firstTokens!.attempt} produced tokens on ${pinned} weights`);
    }
    if ((rec.result === 'answer' ? rec.exact : true) && !rec.weights.includes(pinned)) {
      v.push(`weights: the client's tokens are not those of the ${pinned} weights its first tokens came from (they agree with: ${rec.weights.join(', ') || 'neither'})`);
    }
  }

  switch (rec.result) {
    case 'answer': {
      if (row.outcome !== 'finished') v.push(`the client got an answer but the request row says ${row.outcome}`);
      // vLLM names weight versions on a choice's last chunk only: an answer may leave unnamed the
      // tokens of attempts that failed after producing some (its spans then start where the last
      // attempt's tokens do), never the tokens of an uninterrupted run.
      if (rec.spansStart !== undefined && rec.spansStart !== 0) {
        const last = atts[atts.length - 1];
        // An attempt that produced tokens and did not finish (failed, or ran out of budget and was
        // finished by the router) never got to name its weights.
        const unnamed = atts.some((a) => a.tokens > 0 && a.outcome !== 'finished');
        if (!unnamed) v.push(`weight_versions: the answer names ${rec.spansStart === null ? 'no weight versions' : `weight versions from token ${rec.spansStart} on`}, though no failed attempt produced tokens`);
        else if (rec.spansStart !== null && last?.outcome === 'finished' && rec.spansStart !== last.replayed_tokens) v.push(`weight_versions: the answer's spans start at ${rec.spansStart}, not at 0 nor where the last attempt's tokens start (${last.replayed_tokens})`);
      }
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
      const msg = rec.errorMessage ?? '';
      const last = atts[atts.length - 1];
      const refused = last !== undefined && last.outcome === 'failed' && CLIENT_FAULT.has(last.error_kind ?? '');
      if (refused) {
        v.push(...judgeRefusal(rec, atts, last, ctx));
        break;
      }
      if (rec.bad && atts.length > 0 && !/no worker left|no healthy worker|migration exhausted/i.test(msg)) {
        v.push(`bad request: the client got "${msg.slice(0, 120)}" but no attempt was refused`);
      }
      if (rec.admitted) {
        const bad = atts.find((a) => !movedOn(a));
        if (bad) v.push(`an admitted request failed after an attempt that did not fail migratably (${bad.outcome}/${bad.error_kind})`);
        const exhausted = /migration exhausted/i.test(msg) && row.attempts === ctx.migrationLimit + 1;
        // "No worker left" is honest only if every worker this request did not try was out, for a
        // reason the trace or the fault log shows, when the router gave up, or could not continue
        // it exactly (other weights than its tokens came from).
        const tried = new Set(atts.map((a) => a.worker));
        const notOut = ctx.workerUrls.filter((u) => formatOf(u) === format && !tried.has(u) && !ctx.workerOut(u, row.ended_at) && !(pinned !== null && weightsOf(u) !== pinned));
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

/**
 * A request that ended with a refusal (validation or 4xx, on its last attempt). Honest only where
 * the campaign put one: a bad request (SGLang's vocabulary refusal: in band on a stream, a 400
 * otherwise), or a continuation the 429 proxy refused; every attempt before it failed migratably.
 */
export function judgeRefusal(rec: RequestRecord, atts: readonly AttemptRow[], last: AttemptRow, ctx: TraceContext): string[] {
  const v: string[] = [];
  const msg = rec.errorMessage ?? '';
  const before = atts.filter((a) => a !== last).find((a) => !movedOn(a));
  if (before) v.push(`refusal: attempt ${before.attempt} before the refused one did not fail migratably (${before.outcome}/${before.error_kind})`);
  if (rec.bad) {
    if (!vocabRefusal(rec.format).test(msg)) v.push(`bad request: the client got "${msg.slice(0, 120)}", not the worker's refusal`);
    if (rec.stream && !rec.errorInBand) v.push(`bad request: a stream got its refusal as HTTP ${rec.status}, not in band`);
    if (!rec.stream && rec.status !== 400) v.push(`bad request: a unary request got its refusal with status ${rec.status}, not 400`);
    return v;
  }
  if (last.error_kind === 'http_4xx' && last.attempt >= 1 && refuses(ctx, last.worker)) {
    if (!/429|Too Many Requests/.test(msg)) v.push(`continuation 4xx: the client got "${msg.slice(0, 120)}", not the 429`);
    // A stream that had started ends in band ([DONE] checked by the client); one that had not may
    // still get the status.
    if (!rec.errorInBand && rec.status !== 429) v.push(`continuation 4xx: the client got status ${rec.status}, neither the 429 nor an in-band error`);
    return v;
  }
  v.push(`refusal: ${last.error_kind} on attempt ${last.attempt} at ${last.worker}, where the campaign sent nothing to refuse: ${msg.slice(0, 160)}`);
  return v;
}

/**
 * The rows of the members of a shared-header group, which the router files under one logical id,
 * told apart by prompt length (the campaign gives each member its own): a request row by
 * prompt_tokens, an attempt row by prompt_tokens_sent − replayed_tokens.
 */
export function splitShared(rows: RowsOfRequest | undefined, promptLengths: readonly number[]): { byLength: Map<number, RowsOfRequest>; stray: number } {
  const byLength = new Map<number, RowsOfRequest>(promptLengths.map((n) => [n, { requests: [], attempts: [] }]));
  let stray = 0;
  for (const r of rows?.requests ?? []) {
    const g = byLength.get(r.prompt_tokens);
    if (g) g.requests.push(r);
    else stray++;
  }
  for (const a of rows?.attempts ?? []) {
    const g = byLength.get(a.prompt_tokens_sent - a.replayed_tokens);
    if (g) g.attempts.push(a);
    else stray++;
  }
  return { byLength, stray };
}

/** States of a worker, as the router reports them, that only blame puts it in (router/pool/worker.ts health()). */
export const OUT_BY_BLAME = new Set(['benched', 'circuit_open', 'dead']);

export interface ReportedWindow {
  url: string;
  start: number;
  end: number;
  /** What the router reported while the window lasted (health values, and circuit_open). */
  states: readonly string[];
}

/** A worker_state event of the router's event stream (GET /events), reduced to what the verdict reads. */
export interface WorkerStateEvent {
  t: number;
  url: string;
  health: string;
  circuit: string;
}

/** A benching: the moment the router put a worker out by blame while it was not out by blame. */
export interface Benching {
  url: string;
  t: number;
  /** benched, circuit_open or dead. */
  health: string;
}

/**
 * Benchings, from the router's worker_state events. The router emits one whenever it blames a
 * worker (worker-pool.ts blame: the bench, the breaker, `dead` after a refused connect) and when a
 * health check changes what it reports; it emits none when a bench or an open breaker runs out
 * (the state is read lazily). So each worker's end of blame is estimated: a bench lasts `benchMs`
 * from the last event that showed it, an open breaker `circuitOpenMs`, `dead` until an event says
 * otherwise, and an event saying `healthy` ends it at once (`unhealthy` says nothing about blame:
 * a bench may run under it). A benching is an event showing benched / circuit_open / dead after
 * that estimated end; a blame that extends an ongoing one is part of it.
 */
export function benchingsOf(events: readonly WorkerStateEvent[], benchMs: number, circuitOpenMs: number): Benching[] {
  const outUntil = new Map<string, number>();
  const out: Benching[] = [];
  // Within one ms a recovery goes first and a death last, whatever order the events came in: the
  // count must not depend on the order of events the clock cannot tell apart (the laws in
  // campaign-logic.test.ts). A blame after a death reads as "back from dead" below, which a blame
  // in the same ms as the death is not.
  for (const e of [...events].sort(sameMsOrder)) {
    const until = outUntil.get(e.url) ?? -Infinity;
    if (OUT_BY_BLAME.has(e.health)) {
      if (e.t > until) out.push({ url: e.url, t: e.t, health: e.health });
      const next = e.health === 'dead' ? Infinity : e.t + (e.health === 'circuit_open' ? Math.max(benchMs, circuitOpenMs) : benchMs);
      // Back from dead (a health check answered): what remains is at most a bench.
      outUntil.set(e.url, until === Infinity && e.health !== 'dead' ? next : Math.max(until, next));
    } else if (e.health === 'healthy') outUntil.delete(e.url); // a blame in the same ms after it is a new benching
  }
  return out;
}

/** Events by time; within one ms: a recovery, then blames, then a death. */
function sameMsOrder(a: WorkerStateEvent, b: WorkerStateEvent): number {
  return a.t - b.t || sameMsRank(a.health) - sameMsRank(b.health);
}

function sameMsRank(health: string): number {
  return health === 'healthy' ? 0 : health === 'dead' ? 2 : 1;
}

/** A fault the campaign injected on a worker: when it was applied and when it was cleared. */
export interface FaultSpan {
  url: string;
  start: number;
  end: number;
  kind?: string;
}

/**
 * Whether a fault on `url` explains something the router did there at `t`: from `leadMs` before the
 * fault was applied (the injector stamps its start just before the control call) to `afterMs`
 * after it was cleared (what it broke may surface a little later: see `faultAftermathMs`).
 */
export function explainedByFault(url: string, t: number, faults: readonly FaultSpan[], afterMs: number, leadMs = FAULT_LEAD_MS): boolean {
  return faults.some((f) => f.url === url && f.start - leadMs <= t && t <= f.end + afterMs);
}

export const FAULT_LEAD_MS = 100;

/**
 * How long after a fault is cleared a failure it caused can still surface: a stream left silent
 * by a hang until the clear is declared stalled at the next sweep (the inter-token deadline, plus
 * one sweep tick, a quarter of it); a worker restarted after a kill or a crash is taken back when
 * a health check answers (one interval plus its timeout), and a breaker's half-open trial can
 * fail until then; one more second for a loaded host's event loops.
 */
export function faultAftermathMs(c: { interTokenTimeoutMs: number; healthIntervalMs: number; healthTimeoutMs: number }): number {
  return Math.round(c.interTokenTimeoutMs * 1.25) + c.healthIntervalMs + c.healthTimeoutMs + 1000;
}

export interface ClientMistakeBench {
  worker: string;
  at: number;
  health: string;
  /**
   * Attempts that failed on that worker just before the benching (`<request id>#<attempt>
   * <error kind>`, with the special client that sent the request): the likely trigger.
   */
  suspects: string[];
}

/**
 * Workers benched by a client's mistake: every benching (`benchingsOf`) that no fault the campaign
 * injected on that worker explains (`explainedByFault`). Whatever else benched a healthy worker
 * was the traffic: a request the router took for the worker's failure. Each comes with the
 * attempts that failed on that worker in the 1.5 s before it.
 */
export function benchedByClientMistake(
  benchings: readonly Benching[],
  faults: readonly FaultSpan[],
  afterMs: number,
  attempts: Iterable<AttemptRow> = [],
  clientOf: (requestId: string) => ClientKind | undefined = () => undefined,
): ClientMistakeBench[] {
  const failed = [...attempts].filter((a) => a.outcome === 'failed');
  return benchings
    .filter((b) => !explainedByFault(b.url, b.t, faults, afterMs))
    .map((b) => ({
      worker: b.url,
      at: b.t,
      health: b.health,
      suspects: failed
        .filter((a) => a.worker === b.url && a.ended_at >= b.t - 1500 && a.ended_at <= b.t + 100)
        .map((a) => {
          const c = clientOf(a.request_id);
          return `${a.request_id}#${a.attempt} ${a.error_kind}${c ? ` (${c})` : ''}`;
        }),
    }));
}

/** Failure kinds that say the worker broke (the keep-alive race, a stall), as opposed to load or a refusal. */
const BREAKAGE = new Set([...BLAMING, 'protocol']);

/** Attempts of a request that broke on a worker without a fault there to explain it. */
export function unexplainedBreakage(rows: RowsOfRequest | undefined, faults: readonly FaultSpan[], afterMs: number): AttemptRow[] {
  return (rows?.attempts ?? []).filter((a) => a.outcome === 'failed' && BREAKAGE.has(a.error_kind ?? '') && !explainedByFault(a.worker, a.ended_at, faults, afterMs));
}

/**
 * A stream_interval or keep-alive request: nothing about it may fail. Each attempt that broke on a
 * worker with no fault there is a violation, and so is the request's failure unless a fault
 * explains one of its failed attempts (a fault may leave a request no worker, or exhaust it).
 */
export function judgePaced(rec: RequestRecord, rows: RowsOfRequest | undefined, faults: readonly FaultSpan[], afterMs: number): string[] {
  const label = rec.client === 'stream_interval' ? 'stream_interval' : 'keep-alive';
  const v = unexplainedBreakage(rows, faults, afterMs).map(
    (a) => `${label}: attempt ${a.attempt}${rec.streamInterval !== undefined ? ` (stream_interval ${rec.streamInterval})` : ''} failed on ${a.worker} with ${a.error_kind} and no fault there: ${(a.error ?? '').slice(0, 120)}`,
  );
  if (rec.result === 'error' || rec.result === 'broken') {
    const explained = (rows?.attempts ?? []).some((a) => a.outcome === 'failed' && explainedByFault(a.worker, a.ended_at, faults, afterMs));
    if (!explained) v.push(`${label}: the request failed with no fault to explain it: ${(rec.errorMessage ?? rec.result).slice(0, 160)}`);
  }
  return v;
}

const NO_WORKER = /no worker left|no healthy worker|at its limit of \d+ concurrent requests/i;

/**
 * An unknown sampling_params key: the client gets a clear error (a 4xx, or for a stream an
 * in-band error frame), never "no worker" nor a 503; the request is tried on at most two workers
 * (migration.md: a failure before the first token of a fresh attempt is the request's until the
 * worker shows otherwise: one more worker at most). A refusal at admission may leave no trace
 * row: then there is no attempt row either.
 */
/**
 * The router refused the request before any worker saw it (router/formats/sglang/request.ts: a
 * key SGLang's SamplingParams does not take): a 4xx, or for a stream SGLang's in-band error frame
 * after a 200. Such a refusal writes no trace row, as for any other body the router refuses.
 */
export function refusedAtAdmission(rec: Pick<RequestRecord, 'status' | 'errorInBand' | 'stream'>, attemptRows: number): boolean {
  if (attemptRows > 0) return false;
  return (rec.status >= 400 && rec.status < 500) || (rec.stream && rec.errorInBand === true && rec.status === 200);
}

export function judgeUnknownKey(rec: RequestRecord, rows: RowsOfRequest | undefined): string[] {
  const v: string[] = [];
  const msg = rec.errorMessage ?? '';
  if (rec.result === 'error') {
    if (rec.status === 503 || NO_WORKER.test(msg)) v.push(`unknown key: sampling_params.${rec.unknownKey} got "${msg.slice(0, 120)}" (status ${rec.status}), not a clear refusal`);
    else if (!rec.errorInBand && !(rec.status >= 400 && rec.status < 500)) v.push(`unknown key: sampling_params.${rec.unknownKey} got status ${rec.status}, neither a 4xx nor an in-band error`);
    else if (rec.errorInBand && !rec.stream) v.push(`unknown key: a unary request got an in-band error`);
  }
  const reqs = rows?.requests ?? [];
  const atts = rows?.attempts ?? [];
  if (reqs.length > 1) v.push(`trace: ${reqs.length} request rows (want at most one)`);
  if (reqs.length === 0 && !refusedAtAdmission(rec, atts.length)) v.push(`trace: no request row for a request the router did not refuse at admission (status ${rec.status}, ${atts.length} attempt rows)`);
  const tried = new Set(atts.map((a) => a.worker));
  if (tried.size > 2) v.push(`unknown key: sampling_params.${rec.unknownKey} was tried on ${tried.size} workers (at most 2)`);
  if (reqs[0] && rec.result === 'error' && reqs[0].outcome !== 'failed') v.push(`the client got an error but the request row says ${reqs[0].outcome}`);
  return v;
}

/**
 * A never-reading client: the router must let go of it (its request row ends) within `cutMs` of
 * its start (the first frame, then the client write timeout, and slack), and the request never
 * finishes (it cannot be written). Judged only when the client held on at least that long: one
 * that hung up first (the campaign's end) ends the request itself.
 */
export function judgeNeverReader(rec: RequestRecord, rows: RowsOfRequest | undefined, cutMs: number, writeTimeoutMs: number | null): string[] {
  const v: string[] = [];
  const reqs = rows?.requests ?? [];
  if (rec.result === 'error' || rec.result === 'broken') {
    // A fault that broke its attempts before the stream opened (the campaign's 429 proxy refusing
    // the continuation, no worker left) ends a never-reader as it ends any client: a clear error
    // after attempts, judged with the others' failures. Refused with no attempt at all (the
    // concurrency limit, clogged by never-readers), it is what this check is for.
    const faulted = rec.result === 'error' && rec.status >= 400 && (rows?.attempts ?? []).some((a) => a.outcome === 'failed');
    if (!faulted) {
      const msg = rec.errorMessage ?? '';
      v.push(`never-read: the stream did not open: status ${rec.status}${msg ? ` "${msg.slice(0, 120)}"` : ''}`);
    } else if (reqs.length !== 1) v.push(`trace: ${reqs.length} request rows (want exactly one)`);
    if (faulted) return v;
  }
  if (reqs.length !== 1) {
    v.push(`trace: ${reqs.length} request rows (want exactly one)`);
    return v;
  }
  const row = reqs[0]!;
  if (row.outcome === 'finished') v.push('never-read: the request row says finished, though its client read nothing');
  const held = rec.endedAt - rec.startedAt;
  const took = row.ended_at - row.started_at;
  if (held >= cutMs && took > cutMs) {
    v.push(`never-read: the router held a stream nobody read for ${(took / 1000).toFixed(1)} s (until its client hung up), beyond ${(cutMs / 1000).toFixed(1)} s${writeTimeoutMs === null ? ' (this router has no client write timeout)' : ` (client write timeout ${writeTimeoutMs} ms)`}`);
  }
  return v;
}

/**
 * Whether a member of a prefix-rid group ran on the worker of the cancelled member's last attempt
 * while that attempt was cancelled: the case where an abort by rid prefix would have hit it.
 */
export function sharedWorkerAtCancel(cancelled: RowsOfRequest | undefined, other: RowsOfRequest | undefined): boolean {
  const c = cancelled?.attempts.find((a) => a.outcome === 'cancelled');
  if (!c) return false;
  return (other?.attempts ?? []).some((a) => a.worker === c.worker && a.started_at <= c.ended_at && c.ended_at <= a.ended_at);
}
