// The campaign's own logic, without a server: replayable schedules and traffic, and the verdict
// rules, each shown to catch the fault it exists for (a checker that cannot fail proves nothing).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { planFaults } from '../../chaos/schedule.ts';
import {
  planKeepAliveBurst,
  planNeverReader,
  planRequest,
  planUnit,
  planVllmRequest,
  UNKNOWN_SAMPLING_KEYS,
  unitFormat,
  VLLM_VOCAB_REFUSAL,
  VOCAB_REFUSAL,
  type RequestSpec,
  type TrafficOptions,
} from '../../chaos/traffic.ts';
import { referenceAnswer, vllmReferenceAnswer } from '../../chaos/reference.ts';
import { holdUnread, readJsonBody as readVllmJson, type ClientResult, type VllmAnswer } from '../../chaos/client.ts';
import { StreamAssembler } from '../../chaos/sglang-client.ts';
import { sseMessages, workerStates } from '../../chaos/worker-events.ts';
import { engineId, spansProblem, spansStart, VllmStreamAssembler } from '../../chaos/vllm-client.ts';
import { VLLM } from '../../router/formats/vllm/index.ts';
import { vllmReference } from '../../sim/vllm/reference.ts';
import {
  benchedByClientMistake,
  benchingsOf,
  compareAnswer,
  compareVllmAnswer,
  explainedByFault,
  faultAftermathMs,
  judgeClient,
  judgeNeverReader,
  judgePaced,
  judgeTrace,
  judgeUnknownKey,
  outages,
  sharedWorkerAtCancel,
  splitShared,
  unexplainedBreakage,
  type Benching,
  type FaultSpan,
  type RequestRecord,
  type TraceContext,
  type WorkerStateEvent,
} from '../../chaos/verify.ts';
import { refusesContinuation } from '../../chaos/proxy.ts';
import { campaignRouterConfig, judgeMemory, neverReaderCutMs, OTHER_WEIGHT_VERSION, ROUTER_HAS_CLIENT_WRITE_TIMEOUT } from '../../chaos/campaign.ts';
import { DEFAULT_MODEL_PATH, runModel, weightsSalt } from '../../sim/model.ts';
import { parseUpstreamRid, upstreamRid } from '../../router/migration/rid.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';

const TRAFFIC = { seed: 1, nonMigratableShare: 0.15, maxNewTokens: 64, cancelShare: 0.03 };

describe('replayable campaigns', () => {
  it('the same seed gives the same fault schedule; another seed another one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 5 }), (seed, workers) => {
        const o = { seed, durationMs: 120_000, workers, faultRate: 0.3, interTokenTimeoutMs: 1000 };
        const a = planFaults(o);
        expect(planFaults(o)).toEqual(a);
        expect(planFaults({ ...o, seed: seed + 1 })).not.toEqual(a);
      }),
      { numRuns: 50 },
    );
  });

  it('a schedule keeps a worker free, stays inside the campaign, and respects the stall timeout', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 2, max: 5 }), fc.double({ min: 0.05, max: 2, noNaN: true }), (seed, workers, faultRate) => {
        const o = { seed, durationMs: 60_000, workers, faultRate, interTokenTimeoutMs: 1000 };
        const plan = planFaults(o);
        for (const f of plan) {
          expect(f.at).toBeGreaterThan(0);
          expect(f.at).toBeLessThan(o.durationMs - 3000);
          expect(f.worker).toBeLessThan(workers);
          if (f.kind === 'hang') expect(f.holdMs).toBeGreaterThan(o.interTokenTimeoutMs);
          if (f.kind === 'slow') expect(f.intervalMs!).toBeLessThan(o.interTokenTimeoutMs);
          // At the start of each fault, fewer than `workers` workers are busy with one.
          const busy = plan.filter((g) => g !== f && g.at <= f.at && g.at + g.holdMs + 3000 > f.at);
          expect(new Set([...busy.map((g) => g.worker), f.worker]).size).toBeLessThan(workers);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('request i is the same for the same seed, whatever else was planned', () => {
    const a = [5, 17, 300].map((i) => planRequest(TRAFFIC, i));
    const b = [300, 17, 5].map((i) => planRequest(TRAFFIC, i)).reverse();
    expect(b).toEqual(a);
    expect(planRequest({ ...TRAFFIC, seed: 2 }, 5)).not.toEqual(a[0]);
  });

  it('the traffic mixes what must be covered, and refuses what the rules refuse', () => {
    const specs = Array.from({ length: 2000 }, (_, i) => planRequest(TRAFFIC, i));
    const share = (p: (s: (typeof specs)[number]) => boolean) => specs.filter(p).length / specs.length;
    expect(share((s) => s.stream)).toBeGreaterThan(0.4);
    expect(share((s) => !s.stream)).toBeGreaterThan(0.3);
    expect(share((s) => s.returnLogprob)).toBeGreaterThan(0.2);
    expect(share((s) => s.topLogprobsNum > 0)).toBeGreaterThan(0.1);
    expect(share((s) => s.logprobStartLen >= 0)).toBeGreaterThan(0.05);
    expect(share((s) => s.cancelAfterChunks !== undefined)).toBeGreaterThan(0.005);
    for (const kind of ['sampling_seed', 'frequency_penalty', 'presence_penalty', 'unresolved_budget']) expect(share((s) => s.kind === kind)).toBeGreaterThan(0.005);
    expect(share((s) => s.kind === 'bad_request')).toBeGreaterThan(0.005);
    for (const s of specs) {
      expect(s.admitted).toBe(s.kind === 'greedy' || s.kind === 'bad_request');
      const sp = s.body.sampling_params as Record<string, unknown>;
      expect('max_new_tokens' in sp).toBe(s.kind !== 'unresolved_budget');
    }
  });

  it('the reference is the model run, with the logprob fields SGLang would send', () => {
    const s = specsWith((x) => x.returnLogprob && x.topLogprobsNum > 0 && x.decode.max_new_tokens > 3);
    const ref = referenceAnswer(s);
    const run = runModel(s.prompt, s.decode);
    expect(ref.output_ids).toEqual(run.output_ids);
    expect(ref.completion_tokens).toBe(run.output_ids.length);
    expect(ref.output_token_logprobs!.map((t) => t[0])).toEqual(run.output_logprobs);
    expect(ref.output_top_logprobs![0]!.length).toBe(s.topLogprobsNum);
    // SGLang's default logprob_start_len (−1) asks for no prompt logprobs; an explicit start gets
    // them from that position on, the first one null.
    expect(ref.input_token_logprobs).toEqual(s.logprobStartLen < 0 ? [] : expect.anything());
    const w = specsWith((x) => x.returnLogprob && x.logprobStartLen >= 0);
    const windowed = referenceAnswer(w);
    expect(windowed.input_token_logprobs).toHaveLength(w.prompt.length - w.logprobStartLen);
    expect(windowed.input_token_logprobs![0]![0]).toBeNull();
  });
});

function specsWith(p: (s: ReturnType<typeof planRequest>) => boolean) {
  for (let i = 0; ; i++) {
    const s = planRequest(TRAFFIC, i);
    if (p(s)) return s;
  }
}

describe('the answer check', () => {
  const s = specsWith((x) => x.returnLogprob && x.topLogprobsNum > 0 && x.decode.max_new_tokens > 5 && x.kind === 'greedy');
  const ref = referenceAnswer(s);
  const good = () => ({
    output_ids: [...ref.output_ids],
    meta: { finish_reason: ref.finish_reason, completion_tokens: ref.completion_tokens, prompt_tokens: ref.prompt_tokens, input_token_logprobs: ref.input_token_logprobs, input_top_logprobs: ref.input_top_logprobs } as Record<string, unknown>,
    output_token_logprobs: [...ref.output_token_logprobs!] as unknown[],
    output_top_logprobs: [...ref.output_top_logprobs!] as unknown[],
  });

  it('passes the exact answer and names the first difference of any other', () => {
    expect(compareAnswer(good(), ref)).toBeNull();
    const lost = good();
    lost.output_ids.splice(2, 1);
    expect(compareAnswer(lost, ref)).toMatch(/output_ids differ at position 2/);
    const repeated = good();
    repeated.output_ids.splice(3, 0, repeated.output_ids[2]!);
    expect(compareAnswer(repeated, ref)).toMatch(/output_ids differ at position 3/);
    const lp = good();
    lp.output_token_logprobs[1] = [-0.5, ref.output_ids[1], null];
    expect(compareAnswer(lp, ref)).toMatch(/output_token_logprobs differ at position 1/);
    const top = good();
    top.output_top_logprobs.pop();
    expect(compareAnswer(top, ref)).toMatch(/output_top_logprobs/);
    const length = good();
    length.meta.finish_reason = { type: 'length', length: 3 };
    expect(compareAnswer(length, ref)).toMatch(/finish_reason/);
    const count = good();
    count.meta.completion_tokens = 1;
    expect(compareAnswer(count, ref)).toMatch(/completion_tokens/);
    const prompt = good();
    prompt.meta.prompt_tokens = 99;
    expect(compareAnswer(prompt, ref)).toMatch(/prompt_tokens/);
    const window = good();
    window.meta.input_token_logprobs = [[null, 1, null], [-1, 2, null]];
    expect(compareAnswer(window, ref)).toMatch(/input_token_logprobs/);
  });

  it('catches a stream that breaks its mode, repeats a chunk, or leaks a continuation prompt window', () => {
    const problems: string[] = [];
    const inputs = { input_token_logprobs: JSON.stringify([[null, 5, null]]) };
    const chunk = (ids: number[], c: number, extra: Record<string, unknown> = {}) => ({ output_ids: ids, meta_info: { id: 'r', completion_tokens: c, finish_reason: null, ...extra } });
    const cum = new StreamAssembler('r', inputs, problems);
    cum.absorb(chunk([1], 1));
    cum.absorb(chunk([1, 2], 2));
    expect(cum.mode).toBe('cumulative');
    cum.absorb(chunk([1, 3, 4], 3)); // rewrote a token already sent
    expect(problems).toHaveLength(1);
    const inc = new StreamAssembler('r', inputs, problems);
    inc.absorb(chunk([1], 1));
    inc.absorb(chunk([2], 2));
    expect(inc.mode).toBe('incremental');
    inc.absorb(chunk([2], 2)); // the same delta twice
    expect(problems).toHaveLength(2);
    inc.absorb(chunk([3], 4, { id: 'r~m1' }));
    expect(problems).toHaveLength(3);
    inc.absorb(chunk([4], 5, { input_token_logprobs: [[null, 5, null], [-0.1, 1, null]] }));
    expect(problems).toHaveLength(4);
  });
});

describe('the trace check', () => {
  const ctx: TraceContext = { migrationLimit: 3, workerUrls: ['w0', 'w1', 'w2'], incrementalByUrl: new Map([['w0', false], ['w1', true]]), workerOut: () => false };
  const rec = (over: Partial<RequestRecord> = {}): RequestRecord => ({
    format: 'sglang', id: 'r', key: 'r', index: 0, kind: 'greedy', group: null, bad: false, promptLength: 3, admitted: true, reason: null, stream: true, startedAt: 1000, endedAt: 2000, status: 200,
    result: 'answer', exact: true, errorMessage: null, errorType: null, errorInBand: false, weights: ['default'], mode: 'cumulative', violations: [], ...over,
  });
  const att = (attempt: number, over: Partial<AttemptRow> = {}): AttemptRow => ({
    kind: 'attempt', format: 'sglang', request_id: 'r', attempt, rid: attempt ? `r~m${attempt}` : 'r', worker: 'w0', started_at: 1000 + attempt, ended_at: 1500, ttft_ms: 1,
    prompt_tokens_sent: 3, replayed_tokens: 0, tokens: 1, budget_before: 4, budget_after: 3, cached_tokens: 0, outcome: 'finished', error_kind: null, error: null, error_evidence: null, finish_reason: 'length', trace_id: null, ...over,
  });
  const req = (attempts: number, over: Partial<RequestRow> = {}): RequestRow => ({
    kind: 'request', format: 'sglang', request_id: 'r', attempts, migrations: attempts - 1, admitted: true, admission_reason: null, prompt_tokens: 3, completion_tokens: 4,
    cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: 1000, ended_at: 2000, stream: true, max_new_tokens: 4, error: null, trace_id: null, ...over,
  });
  const failed = (i: number, kind: AttemptRow['error_kind'] = 'stream_broken') => att(i, { outcome: 'failed', error_kind: kind, worker: `w${i}` });

  it('passes a clean migrated request', () => {
    expect(judgeTrace(rec(), { requests: [req(2)], attempts: [failed(0), att(1, { worker: 'w0' })] }, ctx)).toEqual([]);
  });

  it('catches rows missing, doubled or unnumbered', () => {
    expect(judgeTrace(rec(), { requests: [], attempts: [att(0)] }, ctx)).toEqual([expect.stringMatching(/0 request rows/)]);
    expect(judgeTrace(rec(), { requests: [req(1), req(1)], attempts: [att(0)] }, ctx)[0]).toMatch(/2 request rows/);
    expect(judgeTrace(rec(), { requests: [req(2)], attempts: [att(0)] }, ctx)[0]).toMatch(/attempt rows \[0\] for 2 attempts/);
    expect(judgeTrace(rec(), { requests: [req(2)], attempts: [att(0), att(0)] }, ctx)[0]).toMatch(/attempt rows \[0,0\]/);
  });

  it('catches wrong admission, a continued non-migratable request, and too many attempts', () => {
    expect(judgeTrace(rec({ admitted: false, reason: 'sampling_seed' }), { requests: [req(1)], attempts: [att(0)] }, ctx)[0]).toMatch(/admission/);
    const refused = req(2, { admitted: false, admission_reason: 'sampling_seed' });
    expect(judgeTrace(rec({ admitted: false, reason: 'sampling_seed' }), { requests: [refused], attempts: [failed(0), att(1)] }, ctx)).toEqual([expect.stringMatching(/non-migratable request was continued/)]);
    const five = [failed(0), failed(1), failed(2), failed(3), att(4)];
    expect(judgeTrace(rec(), { requests: [req(5)], attempts: five }, ctx)).toEqual([expect.stringMatching(/exceed the limit/)]);
  });

  it('accepts an admitted failure only when migration was really exhausted', () => {
    const err = (m: string) => rec({ result: 'error', errorMessage: m, exact: false });
    const fail = (n: number) => req(n, { outcome: 'failed' });
    const four = [failed(0), failed(1), failed(2), failed(3)];
    expect(judgeTrace(err('migration exhausted after 4 attempts (limit 3): x'), { requests: [fail(4)], attempts: four }, ctx)).toEqual([]);
    expect(judgeTrace(err('no worker left to continue on after: x'), { requests: [fail(3)], attempts: four.slice(0, 3) }, ctx)).toEqual([]);
    // One failure, the other workers had no reason to be out: the router gave up too early.
    expect(judgeTrace(err('no worker left to continue on after: x'), { requests: [fail(1)], attempts: [failed(0)] }, ctx)[0]).toMatch(/w1, w2 had no recorded reason/);
    expect(judgeTrace(err('no healthy worker available'), { requests: [fail(0)], attempts: [] }, { ...ctx, workerOut: (u) => u !== 'w2' })[0]).toMatch(/w2 had no recorded reason/);
    expect(judgeTrace(err('no worker left to continue on after: x'), { requests: [fail(1)], attempts: [failed(0)] }, { ...ctx, workerOut: () => true })).toEqual([]);
    expect(judgeTrace(err('migration exhausted after 2 attempts'), { requests: [fail(2)], attempts: [failed(0), failed(1)] }, ctx)[0]).toMatch(/without exhausting/);
    // A failure that does not migrate ended an admitted request: a 4xx from the worker, where the
    // campaign put none, must not happen; nor an attempt that ended otherwise before the last.
    expect(judgeTrace(err('no worker left'), { requests: [fail(3)], attempts: [failed(0), failed(1), failed(2, 'http_4xx')] }, ctx)[0]).toMatch(/sent nothing to refuse/);
    expect(judgeTrace(err('no worker left'), { requests: [fail(3)], attempts: [failed(0), failed(1, 'worker_abort'), failed(2)] }, { ...ctx, workerOut: () => true })[0]).toMatch(/did not fail migratably/);
  });

  it('checks cancels: the cancelled attempt is the last, and nothing ran on after it', () => {
    const c = rec({ result: 'cancelled', endedAt: 1000 });
    const cancelled = (i: number, over: Partial<AttemptRow> = {}) => att(i, { outcome: 'cancelled', error_kind: 'client_cancel', ...over });
    expect(judgeTrace(c, { requests: [req(1, { outcome: 'cancelled' })], attempts: [cancelled(0)] }, ctx)).toEqual([]);
    expect(judgeTrace(c, { requests: [req(1, { outcome: 'failed' })], attempts: [failed(0)] }, ctx)[0]).toMatch(/cancelled by the client/);
    expect(judgeTrace(c, { requests: [req(2, { outcome: 'cancelled' })], attempts: [cancelled(0), att(1, { started_at: 1500, outcome: 'failed' })] }, ctx).join()).toMatch(/not the last/);
    expect(judgeTrace(c, { requests: [req(2, { outcome: 'cancelled' })], attempts: [att(0), cancelled(1)] }, ctx).join()).toMatch(/before the last one did not fail/);
  });

  it('checks that the client got the streaming mode of attempt 0', () => {
    expect(judgeTrace(rec({ mode: 'cumulative' }), { requests: [req(1)], attempts: [att(0, { worker: 'w1' })] }, ctx)[0]).toMatch(/incremental worker/);
  });
});

describe('when a worker was out', () => {
  it('a blaming failure benches it for a while, a fault window takes it out, anything else does not', () => {
    const a = (worker: string, ended: number, kind: AttemptRow['error_kind'], outcome: AttemptRow['outcome'] = 'failed') => ({ kind: 'attempt', request_id: 'x', attempt: 0, rid: 'x', worker, started_at: ended - 10, ended_at: ended, ttft_ms: null, prompt_tokens_sent: 1, replayed_tokens: 0, tokens: 0, budget_before: 1, budget_after: 1, cached_tokens: null, outcome, error_kind: kind, error: null, finish_reason: null }) as AttemptRow;
    const out = outages([a('w0', 1000, 'stalled'), a('w1', 1000, 'http_4xx'), a('w1', 1000, 'client_cancel', 'cancelled')], [{ url: 'w2', start: 5000, end: 6000 }], 2000, 500);
    expect(out('w0', 2500)).toBe(true);
    expect(out('w0', 4000)).toBe(false);
    expect(out('w1', 1500)).toBe(false);
    expect(out('w2', 6400)).toBe(true);
    expect(out('w2', 4000)).toBe(false);
    const reported = outages([], [], 2000, 500, [{ url: 'w1', start: 3000, end: 3200 }]);
    expect(reported('w1', 3100)).toBe(true);
    expect(reported('w1', 3400)).toBe(false);
  });
});

describe('the memory check', () => {
  const samples = (f: (t: number) => number) => Array.from({ length: 50 }, (_, i) => ({ t: i * 1000, heapUsed: f(i), rss: 100e6 }));
  it('sees a flat heap as flat and a leak as growth', () => {
    expect(judgeMemory(samples(() => 20e6), 0, 49_000)!.heapRatio).toBe(1);
    expect(judgeMemory(samples((i) => 20e6 + i * 1e6), 0, 49_000)!.heapRatio).toBeGreaterThan(1.5);
    expect(judgeMemory([], 0, 1000)).toBeNull();
  });
});

describe('the new traffic kinds', () => {
  const units = Array.from({ length: 3000 }, (_, i) => planUnit(TRAFFIC, i));

  it('units are replayable and mostly single requests, with groups of both kinds', () => {
    expect(planUnit(TRAFFIC, 42)).toEqual(planUnit(TRAFFIC, 42));
    const singles = units.filter((u) => u.length === 1 && !u[0]!.group);
    expect(singles.length / units.length).toBeGreaterThan(0.9);
    // A single unit is request i as planRequest makes it: old seeds replay the same requests.
    const i = units.findIndex((u) => u.length === 1);
    expect(units[i]![0]).toEqual(planRequest(TRAFFIC, i));
    expect(units.some((u) => u[0]!.group?.kind === 'shared_header')).toBe(true);
    expect(units.some((u) => u[0]!.group?.kind === 'prefix_rids')).toBe(true);
    const keys = units.flat().map((s) => s.key);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('a bad request holds exactly one id beyond the vocabulary, is admitted, and never cancels', () => {
    const bad = units.flat().filter((s) => s.kind === 'bad_request');
    expect(bad.length).toBeGreaterThan(10);
    for (const s of bad) {
      const ids = s.body.input_ids as number[];
      expect(ids.filter((t) => t >= 32000)).toEqual([s.bad!.token]);
      expect(ids[s.bad!.position]).toBe(s.bad!.token);
      expect(s.admitted).toBe(true);
      expect(s.cancelAfterChunks).toBeUndefined();
    }
  });

  it('a shared-header group: one header value as the id, no body rid, prompt lengths that tell the members apart', () => {
    const groups = units.filter((u) => u[0]!.group?.kind === 'shared_header');
    for (const g of groups) {
      expect(g.length).toBeGreaterThanOrEqual(2);
      const name = g[0]!.group!.name;
      const header = Object.keys(g[0]!.headers!)[0]!;
      expect(['x-trace-id', 'x-correlation-id']).toContain(header);
      for (const s of g) {
        expect(s.id).toBe(name);
        expect(s.headers).toEqual({ [header]: name });
        expect(s.body.rid).toBeUndefined();
        expect(s.admitted).toBe(true);
      }
      expect(new Set(g.map((s) => s.prompt.length)).size).toBe(g.length);
    }
  });

  it('a prefix-rid group: job-1, job-10, ... streaming together, exactly one of them cancelled, all long', () => {
    const groups = units.filter((u) => u[0]!.group?.kind === 'prefix_rids');
    for (const g of groups) {
      const rids = g.map((s) => s.body.rid as string);
      for (const r of rids.slice(1)) expect(r.startsWith(rids[0]!)).toBe(true);
      expect(rids[0]).toMatch(/-job-1$/);
      expect(g.filter((s) => s.cancelAfterChunks !== undefined)).toHaveLength(1);
      expect(g[g[0]!.group!.canceller!]!.cancelAfterChunks).toBeDefined();
      for (const s of g) {
        expect(s.stream).toBe(true);
        expect(s.id).toBe(s.body.rid);
        expect(s.decode.ignore_eos).toBe(true);
        expect(s.decode.max_new_tokens).toBeGreaterThanOrEqual(48);
      }
    }
    // Most often the shortest rid, the one whose abort by prefix would reach the others, is cancelled.
    expect(groups.filter((g) => g[0]!.group!.canceller === 0).length).toBeGreaterThan(groups.length / 2);
  });

  it('the 429 proxy refuses continuations only, a seeded share of them, the same way every time', () => {
    expect(refusesContinuation(7, 1, 'job', 0)).toBe(false);
    const n = 4000;
    let refused = 0;
    for (let i = 0; i < n; i++) if (refusesContinuation(7, 0.3, `chaos-7-${i}`, 1 + (i % 3))) refused++;
    expect(refused / n).toBeGreaterThan(0.25);
    expect(refused / n).toBeLessThan(0.35);
    expect(refusesContinuation(7, 0.3, 'chaos-7-1', 1)).toBe(refusesContinuation(7, 0.3, 'chaos-7-1', 1));
    // It reads the attempt from the router's upstream rid, whatever the client's id holds.
    expect(parseUpstreamRid(upstreamRid('a~b c', 2))).toEqual({ id: 'a~b c', attempt: 2 });
  });

  it('the other weights give another reference', () => {
    const s = specsWith((x) => x.kind === 'greedy' && x.decode.max_new_tokens > 8);
    const other = referenceAnswer(s, weightsSalt(DEFAULT_MODEL_PATH, OTHER_WEIGHT_VERSION));
    expect(other.output_ids).not.toEqual(referenceAnswer(s).output_ids);
  });
});

describe('the verdict on the new kinds', () => {
  const ctx: TraceContext = {
    migrationLimit: 3,
    workerUrls: ['w0', 'w1', 'w2', 'wx'],
    incrementalByUrl: new Map([['w0', false], ['w1', false], ['w2', true], ['wx', false]]),
    weightsByUrl: new Map([['w0', 'default'], ['w1', 'default'], ['w2', 'default'], ['wx', 'other']]),
    refusingUrl: 'w1',
    workerOut: () => false,
  };
  const rec = (over: Partial<RequestRecord> = {}): RequestRecord => ({
    format: 'sglang', id: 'r', key: 'r', index: 0, kind: 'greedy', group: null, bad: false, promptLength: 3, admitted: true, reason: null, stream: true, startedAt: 1000, endedAt: 2000, status: 200,
    result: 'answer', exact: true, errorMessage: null, errorType: null, errorInBand: false, weights: ['default'], mode: 'cumulative', violations: [], ...over,
  });
  const att = (attempt: number, over: Partial<AttemptRow> = {}): AttemptRow => ({
    kind: 'attempt', format: 'sglang', request_id: 'r', attempt, rid: `r~m${attempt}~000000000000000${attempt}`, worker: 'w0', started_at: 1000 + attempt, ended_at: 1500, ttft_ms: 1,
    prompt_tokens_sent: 3, replayed_tokens: 0, tokens: 1, budget_before: 4, budget_after: 3, cached_tokens: 0, outcome: 'finished', error_kind: null, error: null, error_evidence: null, finish_reason: 'length', trace_id: null, ...over,
  });
  const req = (attempts: number, over: Partial<RequestRow> = {}): RequestRow => ({
    kind: 'request', format: 'sglang', request_id: 'r', attempts, migrations: attempts - 1, admitted: true, admission_reason: null, prompt_tokens: 3, completion_tokens: 4,
    cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: 1000, ended_at: 2000, stream: true, max_new_tokens: 4, error: null, trace_id: null, ...over,
  });
  const broke = (i: number, worker: string, tokens = 1) => att(i, { outcome: 'failed', error_kind: 'stream_broken', worker, tokens, finish_reason: null });
  const failedReq = (n: number) => req(n, { outcome: 'failed', finish_reason: null });

  describe('bad requests', () => {
    const vocab = 'The input_ids [5, 32007] contains values greater than the vocab size (32000).';
    const bad = (over: Partial<RequestRecord> = {}) => rec({ kind: 'bad_request', bad: true, result: 'error', exact: false, errorMessage: vocab, errorInBand: true, weights: ['default', 'other'], ...over });
    const refused = (i: number, kind: AttemptRow['error_kind'] = 'validation', worker = 'w0') => att(i, { outcome: 'failed', error_kind: kind, worker, tokens: 0, finish_reason: null });

    it('accept SGLang\'s refusal on one attempt: in band on a stream, a 400 on a unary request', () => {
      expect(VOCAB_REFUSAL.test(vocab)).toBe(true);
      expect(judgeTrace(bad(), { requests: [failedReq(1)], attempts: [refused(0)] }, ctx)).toEqual([]);
      expect(judgeTrace(bad({ stream: false, errorInBand: false, status: 400 }), { requests: [failedReq(1)], attempts: [refused(0, 'http_4xx')] }, ctx)).toEqual([]);
      // A fault before the refusal (the first worker was dead) is no reason to complain.
      expect(judgeTrace(bad(), { requests: [failedReq(2)], attempts: [att(0, { outcome: 'failed', error_kind: 'connect', tokens: 0 }), refused(1, 'validation', 'w2')] }, ctx)).toEqual([]);
    });

    it('catch a refusal that was migrated, came in the wrong shape, or said something else', () => {
      expect(judgeTrace(bad(), { requests: [failedReq(2)], attempts: [refused(0), refused(1, 'validation', 'w2')] }, ctx).join()).toMatch(/refusal: a validation on attempt 0 was migrated/);
      expect(judgeTrace(bad({ errorInBand: false, status: 400 }), { requests: [failedReq(1)], attempts: [refused(0)] }, ctx).join()).toMatch(/not in band/);
      expect(judgeTrace(bad({ stream: false, status: 502 }), { requests: [failedReq(1)], attempts: [refused(0, 'http_4xx')] }, ctx).join()).toMatch(/not 400/);
      expect(judgeTrace(bad({ errorMessage: 'internal error' }), { requests: [failedReq(1)], attempts: [refused(0)] }, ctx).join()).toMatch(/not the worker's refusal/);
      // The router took the refusal for a worker failure and moved on until it gave up.
      const moved = [att(0, { outcome: 'failed', error_kind: 'engine_abort', tokens: 0 }), att(1, { outcome: 'failed', error_kind: 'engine_abort', tokens: 0, worker: 'w2' })];
      expect(judgeTrace(bad({ errorMessage: 'no worker left that can continue this request exactly after: x' }), { requests: [failedReq(2)], attempts: moved }, ctx).join()).toMatch(/had no recorded reason/);
    });

    it('catch a bad request that got an answer or tokens (client side)', () => {
      const spec = { ...specsWith((x) => x.kind === 'bad_request' && x.decode.max_new_tokens > 2) };
      const ref = referenceAnswer(spec);
      const result = (over: Partial<ClientResult>): ClientResult => ({ spec, startedAt: 0, endedAt: 1, status: 200, answer: null, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'unknown', ...over });
      const answered = judgeClient(result({ answer: { output_ids: ref.output_ids, meta: { finish_reason: ref.finish_reason, completion_tokens: ref.completion_tokens, prompt_tokens: ref.prompt_tokens } } }), ref);
      expect(answered.violations.join()).toMatch(/bad request: answered/);
      const refusedRec = judgeClient(result({ error: { message: vocab, type: 'invalid_request_error', inBand: true } }), ref);
      expect(refusedRec.violations).toEqual([]);
      expect(refusedRec).toMatchObject({ bad: true, result: 'error', errorInBand: true });
      expect(judgeClient(result({ error: { message: vocab, type: null, inBand: true }, partialIds: ref.output_ids.slice(0, 2) }), ref).violations.join()).toMatch(/tokens received before the refusal/);
    });

    it('catch a refusal where the campaign sent nothing to refuse', () => {
      const good = rec({ result: 'error', exact: false, errorMessage: 'worker answered 400: {"error":{"message":"bad"}}', stream: false, status: 400 });
      expect(judgeTrace(good, { requests: [failedReq(1)], attempts: [refused(0, 'http_4xx')] }, ctx).join()).toMatch(/refusal: http_4xx on attempt 0 at w0, where the campaign sent nothing to refuse/);
      const notAdmitted = rec({ admitted: false, reason: 'sampling_seed', kind: 'sampling_seed', result: 'error', exact: false, errorMessage: 'bad', errorInBand: true });
      expect(judgeTrace(notAdmitted, { requests: [failedReq(1)].map((r) => ({ ...r, admitted: false, admission_reason: 'sampling_seed' })), attempts: [refused(0)] }, ctx).join()).toMatch(/sent nothing to refuse/);
    });
  });

  describe('a 4xx on a continuation', () => {
    const tooMany = 'worker answered 429: {"error":{"message":"Too Many Requests: the gateway refused continuation attempt 1 (r~m1~x)","code":429}}';
    const e = (over: Partial<RequestRecord> = {}) => rec({ result: 'error', exact: false, errorMessage: tooMany, errorInBand: true, ...over });
    const r429 = (i: number, worker = 'w1') => att(i, { outcome: 'failed', error_kind: 'http_4xx', worker, tokens: 0, replayed_tokens: 1, finish_reason: null });

    it('is accepted as the request\'s error: a clean in-band end, or the 429 itself before the stream started', () => {
      expect(judgeTrace(e(), { requests: [failedReq(2)], attempts: [broke(0, 'w0'), r429(1)] }, ctx)).toEqual([]);
      expect(judgeTrace(e({ stream: false, errorInBand: false, status: 429 }), { requests: [failedReq(2)], attempts: [broke(0, 'w0', 0), r429(1)] }, ctx)).toEqual([]);
    });

    it('is a violation on attempt 0, on another worker, after an attempt that did not fail, or with another status', () => {
      expect(judgeTrace(e(), { requests: [failedReq(1)], attempts: [r429(0)] }, ctx).join()).toMatch(/sent nothing to refuse/);
      expect(judgeTrace(e(), { requests: [failedReq(2)], attempts: [broke(0, 'w0'), r429(1, 'w2')] }, ctx).join()).toMatch(/sent nothing to refuse/);
      expect(judgeTrace(e(), { requests: [failedReq(2)], attempts: [att(0, { outcome: 'failed', error_kind: 'client_cancel' }), r429(1)] }, ctx).join()).toMatch(/did not fail migratably/);
      expect(judgeTrace(e({ errorInBand: false, status: 503 }), { requests: [failedReq(2)], attempts: [broke(0, 'w0'), r429(1)] }, ctx).join()).toMatch(/neither the 429 nor an in-band error/);
      expect(judgeTrace(e({ errorMessage: 'migration exhausted' }), { requests: [failedReq(2)], attempts: [broke(0, 'w0'), r429(1)] }, ctx).join()).toMatch(/not the 429/);
    });
  });

  describe('weights', () => {
    it('pass a request whose tokens all came from one set of weights', () => {
      expect(judgeTrace(rec(), { requests: [req(2)], attempts: [broke(0, 'w0'), att(1, { worker: 'w2' })] }, ctx)).toEqual([]);
      expect(judgeTrace(rec({ weights: ['other'] }), { requests: [req(1)], attempts: [att(0, { worker: 'wx' })] }, ctx)).toEqual([]);
      // A failure before any token binds nothing: the continuation may go anywhere.
      expect(judgeTrace(rec({ weights: ['other'] }), { requests: [req(2)], attempts: [broke(0, 'w0', 0), att(1, { worker: 'wx' })] }, ctx)).toEqual([]);
    });

    it('catch a continuation on other weights, and an answer of other weights than its first tokens', () => {
      expect(judgeTrace(rec(), { requests: [req(2)], attempts: [broke(0, 'w0'), att(1, { worker: 'wx' })] }, ctx).join()).toMatch(/weights: attempt 1 ran on wx \(other weights\) after attempt 0 produced tokens on default weights/);
      expect(judgeTrace(rec({ weights: ['default'] }), { requests: [req(1)], attempts: [att(0, { worker: 'wx' })] }, ctx).join()).toMatch(/not those of the other weights/);
      // A continuation that found other weights and said so is no mix.
      const said = att(1, { worker: 'wx', outcome: 'failed', error_kind: 'weights_changed', tokens: 0 });
      expect(judgeTrace(rec(), { requests: [req(3)], attempts: [broke(0, 'w0'), said, att(2, { worker: 'w2' })] }, ctx)).toEqual([]);
    });

    it('accept "no worker left" when the only untried workers serve other weights', () => {
      const err = rec({ result: 'error', exact: false, errorMessage: 'no worker left that can continue this request exactly after: x (wx serves weight_version chaos-other-weights, not default)', errorInBand: true });
      const three = [broke(0, 'w0'), broke(1, 'w1'), broke(2, 'w2')];
      expect(judgeTrace(err, { requests: [failedReq(3)], attempts: three }, ctx)).toEqual([]);
      // Tokens from the other weights' worker: none of the default ones could continue them.
      expect(judgeTrace({ ...err, weights: ['other'] }, { requests: [failedReq(1)], attempts: [broke(0, 'wx')] }, ctx)).toEqual([]);
      // Tokens from default weights: the other default workers had no reason to be out.
      expect(judgeTrace(err, { requests: [failedReq(1)], attempts: [broke(0, 'w0')] }, ctx).join()).toMatch(/while w1, w2 had no recorded reason/);
    });

    it('the client side knows which weights an answer or a prefix agrees with', () => {
      const spec = specsWith((x) => x.kind === 'greedy' && x.decode.max_new_tokens > 8 && !x.returnLogprob);
      const ref = referenceAnswer(spec);
      const other = referenceAnswer(spec, weightsSalt(DEFAULT_MODEL_PATH, OTHER_WEIGHT_VERSION));
      const result = (over: Partial<ClientResult>): ClientResult => ({ spec, startedAt: 0, endedAt: 1, status: 200, answer: null, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'unknown', ...over });
      const answer = (r: typeof ref) => ({ output_ids: r.output_ids, meta: { finish_reason: r.finish_reason, completion_tokens: r.completion_tokens, prompt_tokens: r.prompt_tokens } });
      expect(judgeClient(result({ answer: answer(other) }), ref, other)).toMatchObject({ exact: true, weights: ['other'], violations: [] });
      expect(judgeClient(result({ answer: answer(ref) }), ref, other)).toMatchObject({ exact: true, weights: ['default'] });
      expect(judgeClient(result({ answer: answer(other) }), ref).violations.join()).toMatch(/not token-exact/);
      const mixed = [...ref.output_ids.slice(0, 3), ...other.output_ids.slice(3)];
      expect(judgeClient(result({ error: { message: 'x', type: null, inBand: true }, partialIds: mixed }), ref, other).violations.join()).toMatch(/not a prefix/);
      expect(judgeClient(result({ cancelled: true, partialIds: other.output_ids.slice(0, 4) }), ref, other).weights).toEqual(['other']);
    });

    it('a stream may carry the prompt lists of either weights, but the same ones throughout', () => {
      const problems: string[] = [];
      const a = JSON.stringify([[null, 5, null]]);
      const b = JSON.stringify([[null, 5, null], [-1, 6, null]]);
      const chunk = (ids: number[], c: number, lists: unknown) => ({ output_ids: ids, meta_info: { id: 'r', completion_tokens: c, finish_reason: null, input_token_logprobs: lists } });
      const asm = new StreamAssembler('r', { input_token_logprobs: [a, b] }, problems);
      asm.absorb(chunk([1], 1, JSON.parse(b)));
      asm.absorb(chunk([1, 2], 2, JSON.parse(b)));
      expect(problems).toEqual([]);
      asm.absorb(chunk([1, 2, 3], 3, JSON.parse(a)));
      expect(problems).toHaveLength(1);
    });
  });

  describe('prefix-rid cancels', () => {
    it('an answer cut by an abort that nobody asked for is named as such', () => {
      const spec = specsWith((x) => x.kind === 'greedy' && x.decode.max_new_tokens > 8);
      const ref = referenceAnswer(spec);
      const s = { ...spec, group: { kind: 'prefix_rids' as const, name: 'chaos-1-9-job-1', size: 2, member: 1, canceller: 0 } };
      const r: ClientResult = {
        spec: s, startedAt: 0, endedAt: 1, status: 200, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'cumulative',
        answer: { output_ids: ref.output_ids.slice(0, 3), meta: { finish_reason: { type: 'abort', message: 'Aborted', status_code: null }, completion_tokens: 3, prompt_tokens: ref.prompt_tokens } },
      };
      expect(judgeClient(r, ref).violations).toEqual([expect.stringMatching(/^aborted: .* while chaos-1-9-job-1 of its prefix group was cancelled/)]);
      expect(judgeTrace(rec({ exact: false }), { requests: [req(1, { finish_reason: 'abort' })], attempts: [att(0, { finish_reason: 'abort' })] }, ctx).join()).toMatch(/aborted: the request row says finish_reason abort/);
    });

    it('tells when a member ran on the cancelled member\'s worker at the cancel', () => {
      const cancelled = { requests: [], attempts: [att(0, { worker: 'w2', outcome: 'cancelled', error_kind: 'client_cancel', started_at: 1000, ended_at: 1200 })] };
      expect(sharedWorkerAtCancel(cancelled, { requests: [], attempts: [att(0, { worker: 'w2', started_at: 1000, ended_at: 2000 })] })).toBe(true);
      expect(sharedWorkerAtCancel(cancelled, { requests: [], attempts: [att(0, { worker: 'w0', started_at: 1000, ended_at: 2000 })] })).toBe(false);
      expect(sharedWorkerAtCancel(cancelled, { requests: [], attempts: [att(0, { worker: 'w2', started_at: 1300, ended_at: 2000 })] })).toBe(false);
    });
  });

  describe('shared header ids', () => {
    it('rows filed under one logical id are told apart by prompt length', () => {
      const rows = {
        requests: [req(1, { prompt_tokens: 5 }), req(2, { prompt_tokens: 9 }), req(1, { prompt_tokens: 11 })],
        attempts: [att(0, { prompt_tokens_sent: 5 }), att(0, { prompt_tokens_sent: 9, outcome: 'failed', error_kind: 'stalled' }), att(1, { prompt_tokens_sent: 12, replayed_tokens: 3 }), att(0, { prompt_tokens_sent: 11 })],
      };
      const { byLength, stray } = splitShared(rows, [5, 9]);
      expect(stray).toBe(2);
      expect(byLength.get(5)!.requests).toHaveLength(1);
      expect(byLength.get(9)!.attempts.map((a) => a.attempt)).toEqual([0, 1]);
      // Each member is then judged on its own rows.
      expect(judgeTrace(rec({ promptLength: 9 }), byLength.get(9), ctx)).toEqual([]);
      expect(judgeTrace(rec({ promptLength: 9 }), splitShared({ requests: [rows.requests[1]!], attempts: [] }, [9]).byLength.get(9), ctx).join()).toMatch(/attempt rows \[\] for 2 attempts/);
    });
  });
});

// --- vLLM and mixed campaigns -----------------------------------------------------------------

const VTRAFFIC: TrafficOptions = { ...TRAFFIC, format: 'vllm' };
const vllmUnits = Array.from({ length: 3000 }, (_, i) => planUnit(VTRAFFIC, i));
const vllmSpecs = vllmUnits.flat();

function vllmSpecWith(p: (s: RequestSpec) => boolean): RequestSpec {
  for (let i = 0; ; i++) {
    const s = planVllmRequest(VTRAFFIC, i);
    if (p(s)) return s;
  }
}

const sp = (s: RequestSpec) => s.body.sampling_params as Record<string, unknown>;

describe('vLLM and mixed traffic', () => {
  it('is replayable, and leaves SGLang traffic as it was: an SGLang campaign, and the SGLang units of a mixed one', () => {
    expect(planUnit(VTRAFFIC, 42)).toEqual(planUnit(VTRAFFIC, 42));
    expect(planVllmRequest({ ...VTRAFFIC, seed: 2 }, 5)).not.toEqual(planVllmRequest(VTRAFFIC, 5));
    const mixed = { ...TRAFFIC, format: 'mixed' as const };
    let vllm = 0;
    for (let i = 0; i < 2000; i++) {
      expect(planUnit({ ...TRAFFIC, format: 'sglang' }, i)).toEqual(planUnit(TRAFFIC, i));
      const f = unitFormat(mixed, i);
      const unit = planUnit(mixed, i);
      for (const s of unit) expect(s.format).toBe(f);
      if (f === 'sglang') expect(unit).toEqual(planUnit(TRAFFIC, i));
      else vllm++;
    }
    // Half the units each.
    expect(vllm / 2000).toBeGreaterThan(0.45);
    expect(vllm / 2000).toBeLessThan(0.55);
    const keys = [...vllmSpecs.map((s) => s.key), ...Array.from({ length: 3000 }, (_, i) => planUnit(TRAFFIC, i)).flat().map((s) => s.key)];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('mirrors the SGLang mix: streams and unary, logprobs k, usage modes, min/stop/EOS, budgets >= 1, cancels', () => {
    const singles = vllmSpecs.filter((s) => !s.group);
    const share = (p: (s: RequestSpec) => boolean) => singles.filter(p).length / singles.length;
    for (const s of vllmSpecs) {
      expect(s.format).toBe('vllm');
      expect(s.body.token_ids).toBeDefined();
      expect(s.body.input_ids).toBeUndefined();
      if ('max_tokens' in sp(s)) expect(sp(s).max_tokens).toBeGreaterThanOrEqual(1);
      // stream_options only on streams (a unary answer always carries usage).
      if (!s.stream) expect(s.body.stream_options).toBeUndefined();
      if (!s.stream) expect(s.vllm!.usage).toBe('final');
      expect('logprobs' in sp(s)).toBe(s.vllm!.logprobs !== null);
    }
    expect(share((s) => s.stream)).toBeGreaterThan(0.5);
    expect(share((s) => !s.stream)).toBeGreaterThan(0.3);
    expect(share((s) => !s.stream && s.body.stream === undefined)).toBeGreaterThan(0.1);
    expect(share((s) => s.vllm!.logprobs === 0)).toBeGreaterThan(0.03);
    expect(share((s) => (s.vllm!.logprobs ?? 0) > 1)).toBeGreaterThan(0.1);
    for (const usage of ['none', 'final', 'continuous'] as const) expect(share((s) => s.stream && s.vllm!.usage === usage)).toBeGreaterThan(0.1);
    // continuous_usage_stats without include_usage asks for nothing.
    expect(singles.some((s) => s.stream && s.vllm!.usage === 'none' && (s.body.stream_options as Record<string, unknown> | undefined)?.continuous_usage_stats === true)).toBe(true);
    expect(share((s) => sp(s).temperature === 0)).toBeGreaterThan(0.1);
    expect(share((s) => typeof sp(s).min_tokens === 'number')).toBeGreaterThan(0.05);
    expect(share((s) => sp(s).ignore_eos === true)).toBeGreaterThan(0.05);
    expect(share((s) => Array.isArray(sp(s).stop_token_ids))).toBeGreaterThan(0.05);
    expect(share((s) => s.cancelAfterChunks !== undefined)).toBeGreaterThan(0.005);
    for (const kind of ['sampling_seed', 'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'unresolved_budget', 'bad_request']) expect(share((s) => s.kind === kind)).toBeGreaterThan(0.005);
  });

  it('plans admission as the router\'s vLLM rules decide it (sampling_seed, penalties, unresolved_budget)', () => {
    const ctx = { migrationLimit: 3, migrationMaxSeqLen: null, workerDefaults: {}, disputedDefaults: new Set<string>(), maxReqLen: 32767 };
    for (const s of vllmSpecs) {
      const req = VLLM.parse(s.body, { lossyNumbers: false, headers: s.headers ?? {} });
      const a = VLLM.admit(req, ctx);
      expect({ key: s.key, admitted: a.admitted, reason: a.reason }).toEqual({ key: s.key, admitted: s.admitted, reason: s.reason });
      if (s.kind === 'sampling_seed') expect(sp(s).temperature).toBeGreaterThan(0);
    }
  });

  it('the reference is vLLM\'s uninterrupted answer, and the decode params reproduce its tokens', () => {
    for (const s of vllmSpecs.slice(0, 300)) {
      const ref = vllmReferenceAnswer(s);
      expect(ref).toEqual(vllmReference(s.prompt, sp(s)));
      expect(runModel(s.prompt, s.decode).output_ids).toEqual(ref.token_ids);
      expect(ref.usage.prompt_tokens).toBe(s.prompt.length);
      expect(ref.logprobs === null).toBe(s.vllm!.logprobs === null);
    }
    // A stop token the uninterrupted run meets (past min_tokens, when no EOS came first).
    const stopped = vllmSpecs.filter((s) => Array.isArray(sp(s).stop_token_ids) && !s.bad).map((s) => vllmReferenceAnswer(s));
    expect(stopped.filter((r) => r.finish_reason === 'stop').length).toBeGreaterThan(stopped.length / 2);
  });

  it('a bad request holds one id beyond the vocabulary; a shared-id group shares X-Request-Id over its own body ids; a prefix group cancels one', () => {
    const bad = vllmSpecs.filter((s) => s.kind === 'bad_request');
    expect(bad.length).toBeGreaterThan(10);
    for (const s of bad) {
      expect((s.body.token_ids as number[]).filter((t) => t >= 32000)).toEqual([s.bad!.token]);
      expect(s.cancelAfterChunks).toBeUndefined();
    }
    expect(VLLM_VOCAB_REFUSAL.test('Token id 32007 is out of vocabulary')).toBe(true);
    expect(VLLM_VOCAB_REFUSAL.test('The input_ids [5, 32007] contains values greater than the vocab size (32000).')).toBe(false);
    const shared = vllmUnits.filter((u) => u[0]!.group?.kind === 'shared_header');
    expect(shared.length).toBeGreaterThan(10);
    let withBodyId = 0;
    for (const g of shared) {
      const name = g[0]!.group!.name;
      for (const s of g) {
        expect(s.headers).toEqual({ 'x-request-id': name });
        expect(s.id).toBe(name);
        if (s.body.request_id !== undefined) {
          withBodyId++;
          // The body id differs from the header: the router must take the header.
          expect(s.body.request_id).not.toBe(name);
        }
        expect(s.cancelAfterChunks).toBeUndefined();
      }
      expect(new Set(g.map((s) => s.prompt.length)).size).toBe(g.length);
    }
    expect(withBodyId).toBeGreaterThan(0);
    const prefix = vllmUnits.filter((u) => u[0]!.group?.kind === 'prefix_rids');
    expect(prefix.length).toBeGreaterThan(10);
    for (const g of prefix) {
      const ids = g.map((s) => s.body.request_id as string);
      for (const r of ids.slice(1)) expect(r.startsWith(ids[0]!)).toBe(true);
      expect(g.filter((s) => s.cancelAfterChunks !== undefined)).toHaveLength(1);
      for (const s of g) {
        expect(s.stream).toBe(true);
        expect(sp(s).ignore_eos).toBe(true);
        expect(sp(s).max_tokens).toBeGreaterThanOrEqual(48);
        expect(s.decode.max_new_tokens).toBe(sp(s).max_tokens);
      }
    }
  });
});

describe('the vLLM answer check', () => {
  const s = vllmSpecWith((x) => x.kind === 'greedy' && x.stream && x.vllm!.usage === 'continuous' && (x.vllm!.logprobs ?? 0) > 0 && (sp(x).max_tokens as number) > 6);
  const ref = vllmReferenceAnswer(s);
  const good = (): VllmAnswer => ({ format: 'vllm', token_ids: [...ref.token_ids], finish_reason: ref.finish_reason, logprobs: [...ref.logprobs!], usage: { ...ref.usage }, weight_versions: [{ version: 'default', start: 0, end: ref.token_ids.length }] });

  it('passes the exact answer and names the first difference of any other', () => {
    expect(compareVllmAnswer(good(), ref, 'continuous')).toBeNull();
    const lost = good();
    lost.token_ids.splice(2, 1);
    expect(compareVllmAnswer(lost, ref)).toMatch(/token_ids differ at position 2/);
    const finish = good();
    finish.finish_reason = 'abort';
    expect(compareVllmAnswer(finish, ref)).toMatch(/finish_reason "abort"/);
    const lp = good();
    lp.logprobs![3] = { ...(lp.logprobs![3] as object), logprob: -9 };
    expect(compareVllmAnswer(lp, ref)).toMatch(/logprobs differ at position 3/);
    const noLp = good();
    noLp.logprobs = null;
    expect(compareVllmAnswer(noLp, ref)).toMatch(/logprobs missing/);
    // The usage of a continuation (its prompt covers the replayed tokens) must not reach the client.
    const rebased = good();
    rebased.usage = { prompt_tokens: ref.usage.prompt_tokens + 3, completion_tokens: ref.usage.completion_tokens - 3, total_tokens: ref.usage.total_tokens };
    expect(compareVllmAnswer(rebased, ref)).toMatch(/usage.prompt_tokens/);
    const noUsage = good();
    noUsage.usage = null;
    expect(compareVllmAnswer(noUsage, ref, 'final')).toMatch(/usage missing/);
    expect(compareVllmAnswer(good(), ref, 'none')).toMatch(/usage present/);
    const unasked = vllmSpecWith((x) => x.kind === 'greedy' && x.vllm!.logprobs === null);
    expect(compareVllmAnswer({ ...good(), ...{ token_ids: vllmReferenceAnswer(unasked).token_ids, finish_reason: vllmReferenceAnswer(unasked).finish_reason, usage: vllmReferenceAnswer(unasked).usage } }, vllmReferenceAnswer(unasked))).toMatch(/logprobs present/);
  });

  // The chunks of an uninterrupted stream of `s`, as vLLM sends them (one token per chunk).
  const chunks = (over: (c: Record<string, unknown>, i: number) => void = () => undefined) => {
    const n = ref.token_ids.length;
    const out: Record<string, unknown>[] = ref.token_ids.map((t, i) => {
      const last = i === n - 1;
      const c = {
        request_id: engineId(s.id),
        usage: { prompt_tokens: s.prompt.length, total_tokens: s.prompt.length + i + 1, completion_tokens: i + 1 },
        choices: [{ index: 0, finish_reason: last ? ref.finish_reason : null, token_ids: [t], weight_versions: last ? [{ version: 'default', start: 0, end: n }] : null, logprobs: { content: [ref.logprobs![i]] } }],
      };
      over(c, i);
      return c;
    });
    out.push({ request_id: engineId(s.id), usage: { ...ref.usage }, choices: [] });
    return out;
  };
  const assemble = (cs: Record<string, unknown>[], shape = { logprobs: s.vllm!.logprobs, usage: s.vllm!.usage, promptLength: s.prompt.length }) => {
    const problems: string[] = [];
    const asm = new VllmStreamAssembler(s.id, shape, problems);
    for (const c of cs) asm.absorb(c);
    return { answer: asm.answer(), problems };
  };
  const choice = (c: Record<string, unknown>) => (c.choices as Record<string, unknown>[])[0]!;

  it('folds a clean stream into the reference', () => {
    const { answer, problems } = assemble(chunks());
    expect(problems).toEqual([]);
    expect(compareVllmAnswer(answer, ref, 'continuous')).toBeNull();
    expect(spansStart(answer.weight_versions)).toBe(0);
  });

  it('catches another request\'s id, continuous usage not rebased, unasked usage, a missing usage chunk, and chunks out of place', () => {
    expect(assemble(chunks((c, i) => i === 2 && (c.request_id = 'generate-tokens-body-id'))).problems.join()).toMatch(/chunk 3 \(the first of the stream to\) has request_id "generate-tokens-body-id"/);
    // A continuation's own counts (its prompt holds the replayed tokens) passed through.
    expect(assemble(chunks((c, i) => i >= 3 && (c.usage = { prompt_tokens: s.prompt.length + 3, total_tokens: s.prompt.length + i + 1, completion_tokens: i - 2 }))).problems.join()).toMatch(/continuous usage/);
    expect(assemble(chunks(), { logprobs: s.vllm!.logprobs, usage: 'final', promptLength: s.prompt.length }).problems.join()).toMatch(/did not ask for it on every chunk/);
    const noUsage = chunks((c) => (c.usage = null));
    expect(assemble(noUsage, { logprobs: s.vllm!.logprobs, usage: 'none', promptLength: s.prompt.length }).problems.join()).toMatch(/a usage chunk the client did not ask for/);
    expect(assemble(chunks().slice(0, -1)).problems.join()).toMatch(/no final usage chunk/);
    const wrongFinal = chunks();
    (wrongFinal.at(-1)!.usage as Record<string, number>).completion_tokens = 1;
    expect(assemble(wrongFinal).problems.join()).toMatch(/final usage/);
    const twice = chunks();
    twice.splice(twice.length - 1, 0, { ...twice[1]! });
    expect(assemble(twice).problems.join()).toMatch(/a choice after the finishing chunk/);
    expect(assemble(chunks((c, i) => i === 1 && (choice(c).weight_versions = [{ version: 'default', start: 0, end: 2 }]))).problems.join()).toMatch(/weight_versions before the finishing chunk/);
    expect(assemble(chunks((c, i) => i === 1 && (choice(c).logprobs = null))).problems.join()).toMatch(/logprobs.content/);
    expect(assemble(chunks((c, i) => i === 1 && (choice(c).token_ids = []))).problems.join()).toMatch(/no new tokens and no finish/);
  });

  it('catches cumulative ids where vLLM sends deltas (the tokens come out repeated)', () => {
    const { answer } = assemble(chunks((c, i) => (choice(c).token_ids = ref.token_ids.slice(0, i + 1))), { logprobs: null, usage: 'none', promptLength: s.prompt.length });
    expect(compareVllmAnswer(answer, ref)).toMatch(/token_ids differ at position 1/);
  });

  it('checks a unary answer\'s request_id and keeps its usage and spans', () => {
    const u = vllmSpecWith((x) => x.kind === 'greedy' && !x.stream);
    const uref = vllmReferenceAnswer(u);
    const body = (id: string) => JSON.stringify({ request_id: id, usage: uref.usage, choices: [{ index: 0, finish_reason: uref.finish_reason, token_ids: uref.token_ids, weight_versions: [{ version: 'default', start: 0, end: uref.token_ids.length }], logprobs: uref.logprobs === null ? null : { content: uref.logprobs } }] });
    const r = (): ClientResult => ({ spec: u, startedAt: 0, endedAt: 1, status: 200, answer: null, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'unknown' });
    const ok = r();
    readVllmJson(body(engineId(u.id)), 200, u, ok);
    expect(ok.problems).toEqual([]);
    expect(judgeClient(ok, uref)).toMatchObject({ format: 'vllm', result: 'answer', exact: true, spansStart: 0, violations: [] });
    const wrong = r();
    readVllmJson(body('generate-tokens-other'), 200, u, wrong);
    expect(judgeClient(wrong, uref).violations.join()).toMatch(/framing: the answer has request_id/);
    const refused = r();
    readVllmJson(JSON.stringify({ error: { message: 'Token id 32001 is out of vocabulary', type: 'BadRequestError', param: null, code: 400 } }), 400, u, refused);
    expect(refused.error).toEqual({ message: 'Token id 32001 is out of vocabulary', type: 'BadRequestError', inBand: false });
  });

  it('weight_versions: well-formed spans, contiguous, of the default weights, ending at the answer\'s length', () => {
    expect(spansProblem([{ version: 'default', start: 0, end: 5 }], 5)).toBeNull();
    expect(spansProblem([{ version: 'default', start: 3, end: 5 }], 5)).toBeNull();
    expect(spansProblem(null, 5)).toBeNull();
    expect(spansProblem([{ version: 'default', start: 0, end: 2 }, { version: 'default', start: 3, end: 5 }], 5)).toMatch(/not contiguous/);
    expect(spansProblem([{ version: 'default', start: 0, end: 4 }], 5)).toMatch(/end at 4/);
    expect(spansProblem([{ version: 'v2', start: 0, end: 5 }], 5)).toMatch(/other than default/);
    expect(spansStart([{ version: 'default', start: 3, end: 5 }])).toBe(3);
    expect(spansStart(null)).toBeNull();
  });

  it('the client side names an abort finish and an answered bad request', () => {
    const result = (spec: RequestSpec, over: Partial<ClientResult>): ClientResult => ({ spec, startedAt: 0, endedAt: 1, status: 200, answer: null, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'unknown', ...over });
    const aborted = { ...good(), token_ids: ref.token_ids.slice(0, 3), finish_reason: 'abort', weight_versions: [{ version: 'default', start: 0, end: 3 }] };
    expect(judgeClient(result(s, { answer: aborted }), ref).violations.join()).toMatch(/^aborted: the answer ended with an abort finish/);
    const b = vllmSpecWith((x) => x.kind === 'bad_request');
    const bref = vllmReferenceAnswer(b);
    const answered: VllmAnswer = { format: 'vllm', token_ids: bref.token_ids, finish_reason: bref.finish_reason, logprobs: bref.logprobs, usage: bref.usage, weight_versions: null };
    expect(judgeClient(result(b, { answer: answered }), bref).violations.join()).toMatch(/bad request: answered although token_ids\[/);
    // An SGLang answer to a vLLM request is no answer to it.
    expect(judgeClient(result(s, { answer: { output_ids: ref.token_ids, meta: {} } }), ref).violations.join()).toMatch(/an SGLang answer to a vllm request/);
    // Whatever ended it, what the client got is a prefix of the reference.
    expect(judgeClient(result(s, { error: { message: 'x', type: null, inBand: true }, partialIds: ref.token_ids.slice(0, 2) }), ref).violations).toEqual([]);
    expect(judgeClient(result(s, { error: { message: 'x', type: null, inBand: true }, partialIds: [ref.token_ids[1]!] }), ref).violations.join()).toMatch(/not a prefix/);
  });
});

describe('the trace check of a mixed campaign', () => {
  const ctx: TraceContext = {
    migrationLimit: 3,
    workerUrls: ['s0', 's1', 'v0', 'v1', 'v2'],
    incrementalByUrl: new Map([['s0', false], ['s1', true], ['v0', true], ['v1', true], ['v2', true]]),
    formatByUrl: new Map([['s0', 'sglang'], ['s1', 'sglang'], ['v0', 'vllm'], ['v1', 'vllm'], ['v2', 'vllm']]),
    refusingUrl: 's1',
    refusingUrls: ['s1', 'v1'],
    workerOut: () => false,
  };
  const rec = (over: Partial<RequestRecord> = {}): RequestRecord => ({
    format: 'vllm', id: 'r', key: 'r', index: 0, kind: 'greedy', group: null, bad: false, promptLength: 3, admitted: true, reason: null, stream: true, startedAt: 1000, endedAt: 2000, status: 200,
    result: 'answer', exact: true, errorMessage: null, errorType: null, errorInBand: false, weights: ['default'], mode: 'unknown', spansStart: 0, violations: [], ...over,
  });
  const att = (attempt: number, over: Partial<AttemptRow> = {}): AttemptRow => ({
    kind: 'attempt', format: 'sglang', request_id: 'r', attempt, rid: `r~m${attempt}~000000000000000${attempt}`, worker: 'v0', started_at: 1000 + attempt, ended_at: 1500, ttft_ms: 1,
    prompt_tokens_sent: 3, replayed_tokens: 0, tokens: 1, budget_before: 4, budget_after: 3, cached_tokens: 0, outcome: 'finished', error_kind: null, error: null, error_evidence: null, finish_reason: 'length', trace_id: null, ...over,
  });
  const req = (attempts: number, over: Partial<RequestRow> = {}): RequestRow => ({
    kind: 'request', format: 'sglang', request_id: 'r', attempts, migrations: attempts - 1, admitted: true, admission_reason: null, prompt_tokens: 3, completion_tokens: 4,
    cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: 1000, ended_at: 2000, stream: true, max_new_tokens: 4, error: null, trace_id: null, ...over,
  });
  const broke = (i: number, worker: string, tokens = 1) => att(i, { outcome: 'failed', error_kind: 'stream_broken', worker, tokens, finish_reason: null });
  const failedReq = (n: number) => req(n, { outcome: 'failed', finish_reason: null });

  it('a request goes only to workers of its format', () => {
    expect(judgeTrace(rec(), { requests: [req(2)], attempts: [broke(0, 'v0'), att(1, { worker: 'v2', replayed_tokens: 1 })] }, ctx)).toEqual([]);
    expect(judgeTrace(rec({ spansStart: 1 }), { requests: [req(2)], attempts: [broke(0, 'v0'), att(1, { worker: 's0', replayed_tokens: 1 })] }, ctx).join()).toMatch(/format: attempt 1 of a vllm request ran on s0, a sglang worker/);
    expect(judgeTrace(rec({ format: 'sglang', mode: 'cumulative', spansStart: undefined }), { requests: [req(1)], attempts: [att(0, { worker: 'v1' })] }, ctx).join()).toMatch(/format: attempt 0 of a sglang request ran on v1, a vllm worker/);
  });

  it('"no worker left" counts only the workers of the request\'s format', () => {
    const err = rec({ result: 'error', exact: false, errorMessage: 'no worker left to continue on after: x', spansStart: undefined });
    // Every vLLM worker tried: the SGLang workers, idle as they were, could not have taken it.
    expect(judgeTrace(err, { requests: [failedReq(3)], attempts: [broke(0, 'v0'), broke(1, 'v1'), broke(2, 'v2')] }, ctx)).toEqual([]);
    expect(judgeTrace(err, { requests: [failedReq(2)], attempts: [broke(0, 'v0'), broke(1, 'v1')] }, ctx).join()).toMatch(/while v2 had no recorded reason/);
  });

  it('a vLLM bad request gets vLLM\'s refusal, and a continuation on the vLLM proxy its 429', () => {
    const vocab = 'Token id 32001 is out of vocabulary';
    const bad = (over: Partial<RequestRecord> = {}) => rec({ kind: 'bad_request', bad: true, result: 'error', exact: false, errorMessage: vocab, errorInBand: true, spansStart: undefined, ...over });
    const refused = (i: number, kind: AttemptRow['error_kind'] = 'validation', worker = 'v0') => att(i, { outcome: 'failed', error_kind: kind, worker, tokens: 0, finish_reason: null });
    expect(judgeTrace(bad(), { requests: [failedReq(1)], attempts: [refused(0)] }, ctx)).toEqual([]);
    expect(judgeTrace(bad({ stream: false, errorInBand: false, status: 400 }), { requests: [failedReq(1)], attempts: [refused(0)] }, ctx)).toEqual([]);
    expect(judgeTrace(bad({ errorMessage: 'The input_ids [5, 32001] contains values greater than the vocab size (32000).' }), { requests: [failedReq(1)], attempts: [refused(0)] }, ctx).join()).toMatch(/not the worker's refusal/);
    const tooMany = rec({ result: 'error', exact: false, errorMessage: 'Too Many Requests: the gateway refused continuation attempt 1 (r~m1~x)', errorInBand: true, spansStart: undefined });
    const r429 = (worker: string) => att(1, { outcome: 'failed', error_kind: 'http_4xx', worker, tokens: 0, replayed_tokens: 1, finish_reason: null });
    expect(judgeTrace(tooMany, { requests: [failedReq(2)], attempts: [broke(0, 'v0'), r429('v1')] }, ctx)).toEqual([]);
    expect(judgeTrace(tooMany, { requests: [failedReq(2)], attempts: [broke(0, 'v0'), r429('v2')] }, ctx).join()).toMatch(/sent nothing to refuse/);
  });

  it('weight_versions may leave unnamed only the tokens of attempts that failed after producing some', () => {
    const two = { requests: [req(2)], attempts: [broke(0, 'v0', 3), att(1, { worker: 'v2', replayed_tokens: 3 })] };
    expect(judgeTrace(rec({ spansStart: 3 }), two, ctx)).toEqual([]);
    expect(judgeTrace(rec({ spansStart: 0 }), two, ctx)).toEqual([]);
    expect(judgeTrace(rec({ spansStart: 2 }), two, ctx).join()).toMatch(/spans start at 2, not at 0 nor where the last attempt's tokens start \(3\)/);
    // An uninterrupted answer names every token; so does one whose failed attempt had none.
    expect(judgeTrace(rec({ spansStart: 1 }), { requests: [req(1)], attempts: [att(0)] }, ctx).join()).toMatch(/weight_versions: the answer names weight versions from token 1 on, though no failed attempt/);
    expect(judgeTrace(rec({ spansStart: null }), { requests: [req(2)], attempts: [broke(0, 'v0', 0), att(1, { worker: 'v2' })] }, ctx).join()).toMatch(/names no weight versions/);
  });
});

describe('fault schedules with vLLM workers', () => {
  const base = { durationMs: 120_000, faultRate: 0.5, interTokenTimeoutMs: 1000 };

  it('an SGLang campaign\'s schedule is the one it always was', () => {
    for (let seed = 0; seed < 100; seed++) {
      const o = { ...base, seed, workers: 4 };
      const plan = planFaults(o);
      expect(planFaults({ ...o, formats: ['sglang', 'sglang', 'sglang', 'sglang'] })).toEqual(plan);
      expect(plan.some((f) => f.kind === 'error')).toBe(false);
    }
  });

  it('plans vLLM\'s engine error on vLLM workers only, and keeps a worker of each format free', () => {
    const formats = ['sglang', 'sglang', 'vllm', 'vllm', 'sglang'] as const;
    let errors = 0;
    for (let seed = 0; seed < 200; seed++) {
      const plan = planFaults({ ...base, seed, workers: formats.length, formats });
      for (const f of plan) {
        if (f.kind === 'error') {
          errors++;
          expect(formats[f.worker]).toBe('vllm');
        }
        // At the start of each fault, some worker of its format is not busy with one.
        const busy = plan.filter((g) => g !== f && g.at <= f.at && g.at + g.holdMs + 3000 > f.at).map((g) => g.worker);
        const same = formats.map((x, i) => (x === formats[f.worker] ? i : -1)).filter((i) => i >= 0);
        expect(same.every((i) => i === f.worker || busy.includes(i))).toBe(false);
      }
    }
    expect(errors).toBeGreaterThan(20);
    expect(planFaults({ ...base, seed: 3, workers: 3, formats: ['vllm', 'vllm', 'vllm'] }).some((f) => f.kind === 'error') || planFaults({ ...base, seed: 4, workers: 3, formats: ['vllm', 'vllm', 'vllm'] }).some((f) => f.kind === 'error')).toBe(true);
  });
});

// --- the special clients and workers benched by a client's mistake ------------------------------

describe('workers benched by a client\'s mistake', () => {
  const ev = (t: number, url: string, health: string, circuit = 'closed'): WorkerStateEvent => ({ t, url, health, circuit });
  const BENCH = 2000;
  const OPEN = 3000;
  const AFTER = 5000;

  describe('benchings, from the router\'s worker_state events', () => {
    it('a bench, a breaker opening and a refused connect each start one; a blame that extends one does not', () => {
      expect(benchingsOf([ev(1000, 'w0', 'benched'), ev(1500, 'w0', 'benched'), ev(3400, 'w0', 'benched')], BENCH, OPEN)).toEqual([{ url: 'w0', t: 1000, health: 'benched' }]);
      // The bench ran out (no event says so): the next one is a benching of its own.
      expect(benchingsOf([ev(1000, 'w0', 'benched'), ev(3100, 'w0', 'benched')], BENCH, OPEN).map((b) => b.t)).toEqual([1000, 3100]);
      // An open breaker lasts circuitOpenMs; dead lasts until an event says otherwise.
      expect(benchingsOf([ev(1000, 'w0', 'circuit_open', 'open'), ev(3500, 'w0', 'benched')], BENCH, OPEN)).toHaveLength(1);
      expect(benchingsOf([ev(1000, 'w0', 'dead'), ev(60_000, 'w0', 'benched')], BENCH, OPEN)).toHaveLength(1);
      // Back from dead, at most a bench remains.
      expect(benchingsOf([ev(1000, 'w0', 'dead'), ev(9000, 'w0', 'benched'), ev(11_500, 'w0', 'benched')], BENCH, OPEN).map((b) => b.t)).toEqual([1000, 11_500]);
      // healthy ends it at once; unhealthy says nothing about blame.
      expect(benchingsOf([ev(1000, 'w0', 'benched'), ev(1200, 'w0', 'healthy'), ev(1300, 'w0', 'benched')], BENCH, OPEN)).toHaveLength(2);
      expect(benchingsOf([ev(1000, 'w0', 'benched'), ev(1200, 'w0', 'unhealthy'), ev(1300, 'w0', 'benched')], BENCH, OPEN)).toHaveLength(1);
      // Workers apart, events out of order.
      expect(benchingsOf([ev(1100, 'w1', 'benched'), ev(1000, 'w0', 'benched'), ev(1200, 'w0', 'benched')], BENCH, OPEN)).toEqual([
        { url: 'w0', t: 1000, health: 'benched' },
        { url: 'w1', t: 1100, health: 'benched' },
      ]);
      expect(benchingsOf([ev(1000, 'w0', 'healthy'), ev(2000, 'w0', 'unhealthy'), ev(3000, 'w0', 'draining')], BENCH, OPEN)).toEqual([]);
    });

    const events = fc.array(
      fc.record({ t: fc.integer({ min: 0, max: 60_000 }), url: fc.constantFrom('w0', 'w1', 'w2'), health: fc.constantFrom('healthy', 'unhealthy', 'benched', 'circuit_open', 'dead'), circuit: fc.constant('closed') }),
      { maxLength: 40 },
    );

    it('a blame in the same ms as a recovery is a benching, whichever event came first', () => {
      const healthy = { t: 9, url: 'w0', health: 'healthy', circuit: 'closed' } as const;
      const benched = { t: 9, url: 'w0', health: 'benched', circuit: 'closed' } as const;
      expect(benchingsOf([healthy, benched], BENCH, OPEN)).toEqual([{ url: 'w0', t: 9, health: 'benched' }]);
      expect(benchingsOf([benched, healthy], BENCH, OPEN)).toEqual([{ url: 'w0', t: 9, health: 'benched' }]);
      // Two blames and a recovery in one ms, then a blame within the bench: one benching either way.
      const later = { t: 10, url: 'w0', health: 'benched', circuit: 'closed' } as const;
      expect(benchingsOf([benched, benched, healthy, later], BENCH, OPEN)).toHaveLength(1);
      expect(benchingsOf([healthy, benched, benched, later], BENCH, OPEN)).toHaveLength(1);
      // A blame in the same ms as a death is not "back from dead": a blame a bench later is not a new benching.
      const dead = { t: 9, url: 'w0', health: 'dead', circuit: 'closed' } as const;
      const afterBench = { t: 9 + BENCH + 1, url: 'w0', health: 'benched', circuit: 'closed' } as const;
      expect(benchingsOf([dead, benched, afterBench], BENCH, OPEN)).toHaveLength(1);
      expect(benchingsOf([benched, dead, afterBench], BENCH, OPEN)).toHaveLength(1);
    });

    it('laws: each benching is an event that shows blame; at most one per worker per bench; none without blame', () => {
      fc.assert(
        fc.property(events, (es) => {
          const bs = benchingsOf(es, BENCH, OPEN);
          for (const b of bs) expect(es.some((e) => e.url === b.url && e.t === b.t && e.health === b.health && ['benched', 'circuit_open', 'dead'].includes(e.health))).toBe(true);
          expect(bs.length).toBeLessThanOrEqual(es.filter((e) => ['benched', 'circuit_open', 'dead'].includes(e.health)).length);
          // Two benchings of one worker less than a bench apart have a `healthy` between them.
          for (const a of bs) for (const b of bs) {
            if (a === b || a.url !== b.url || b.t <= a.t || b.t - a.t > BENCH) continue;
            expect(es.some((e) => e.url === a.url && e.health === 'healthy' && e.t >= a.t && e.t <= b.t)).toBe(true);
          }
          // The order the events arrive in does not matter.
          expect(benchingsOf([...es].reverse(), BENCH, OPEN).length).toBe(bs.length);
        }),
        { numRuns: 1000 },
      );
    });
  });

  describe('explained by a fault on that worker, or counted', () => {
    const fault = (url: string, start: number, end: number): FaultSpan => ({ url, start, end });

    it('a fault explains a benching of its worker from just before it is applied to the aftermath after it is cleared', () => {
      const f = [fault('w0', 10_000, 12_000)];
      expect(explainedByFault('w0', 9_950, f, AFTER)).toBe(true);
      expect(explainedByFault('w0', 17_000, f, AFTER)).toBe(true);
      expect(explainedByFault('w0', 9_800, f, AFTER)).toBe(false);
      expect(explainedByFault('w0', 17_001, f, AFTER)).toBe(false);
      expect(explainedByFault('w1', 11_000, f, AFTER)).toBe(false);
      // The campaign's aftermath: the stall deadline and a sweep tick, a health check, a second.
      expect(faultAftermathMs({ interTokenTimeoutMs: 2000, healthIntervalMs: 500, healthTimeoutMs: 1000 })).toBe(5000);
    });

    it('counts a benching with no fault on its worker, names what failed there just before and which client sent it', () => {
      const stalled: AttemptRow = {
        kind: 'attempt', format: 'sglang', request_id: 'chaos-1-5-si', attempt: 0, rid: 'chaos-1-5-si~m0~0000000000000000', worker: 'w0', started_at: 100, ended_at: 20_990, ttft_ms: 1,
        prompt_tokens_sent: 3, replayed_tokens: 0, tokens: 161, budget_before: 481, budget_after: 320, cached_tokens: 0, outcome: 'failed', error_kind: 'stalled', error: 'no data from worker for 2010 ms', error_evidence: null, finish_reason: null, trace_id: null,
      };
      const elsewhere = { ...stalled, worker: 'w1', request_id: 'other' };
      const got = benchedByClientMistake([{ url: 'w0', t: 21_000, health: 'benched' }], [fault('w1', 20_000, 22_000)], AFTER, [stalled, elsewhere], (id) => (id === 'chaos-1-5-si' ? 'stream_interval' : undefined));
      expect(got).toEqual([{ worker: 'w0', at: 21_000, health: 'benched', suspects: ['chaos-1-5-si#0 stalled (stream_interval)'] }]);
      expect(benchedByClientMistake([{ url: 'w0', t: 21_000, health: 'benched' }], [fault('w0', 20_000, 22_000)], AFTER, [stalled])).toEqual([]);
    });

    const benching = fc.record({ url: fc.constantFrom('w0', 'w1', 'w2'), t: fc.integer({ min: 0, max: 100_000 }), health: fc.constantFrom('benched', 'circuit_open', 'dead') });
    const faultArb = fc.record({ url: fc.constantFrom('w0', 'w1', 'w2'), start: fc.integer({ min: 0, max: 100_000 }), len: fc.integer({ min: 0, max: 5000 }) }).map(({ url, start, len }) => fault(url, start, start + len));

    it('law: a benching inside a fault window of the same worker is never counted', () => {
      fc.assert(
        fc.property(faultArb, fc.double({ min: 0, max: 1, noNaN: true }), fc.array(faultArb, { maxLength: 5 }), (f, at, others) => {
          const t = Math.round(f.start - 100 + at * (f.end + AFTER - (f.start - 100)));
          const b: Benching = { url: f.url, t, health: 'benched' };
          expect(benchedByClientMistake([b], [...others, f], AFTER)).toEqual([]);
        }),
        { numRuns: 500 },
      );
    });

    it('laws: with no fault on its worker a benching is always counted; more faults never count more; faults elsewhere change nothing', () => {
      fc.assert(
        fc.property(fc.array(benching, { maxLength: 12 }), fc.array(faultArb, { maxLength: 8 }), fc.array(faultArb, { maxLength: 4 }), (bs, fs, more) => {
          const counted = benchedByClientMistake(bs, fs, AFTER);
          expect(benchedByClientMistake(bs, [], AFTER)).toHaveLength(bs.length);
          expect(benchedByClientMistake(bs, [...fs, ...more], AFTER).length).toBeLessThanOrEqual(counted.length);
          for (const b of counted) expect(fs.some((f) => f.url === b.worker && f.start - 100 <= b.at && b.at <= f.end + AFTER)).toBe(false);
          const onlyW0 = bs.filter((b) => b.url === 'w0');
          expect(benchedByClientMistake(onlyW0, fs, AFTER)).toEqual(benchedByClientMistake(onlyW0, fs.filter((f) => f.url === 'w0'), AFTER));
        }),
        { numRuns: 300 },
      );
    });
  });

  it('reads worker_state events out of the router\'s SSE batches', () => {
    const batch = JSON.stringify([
      { type: 'progress', t: 1, request_id: 'r', attempt: 0, tokens: 1, completion_tokens: 1 },
      { type: 'worker_state', t: 5, worker: { id: 'w0', url: 'http://127.0.0.1:1', health: 'benched', circuit: 'closed' } },
    ]);
    const got: WorkerStateEvent[] = [];
    const rest = sseMessages(`: baton events\n\ndata: ${batch}\n\ndata: [{"type":"worker_st`, (d) => got.push(...workerStates(d)));
    expect(got).toEqual([{ t: 5, url: 'http://127.0.0.1:1', health: 'benched', circuit: 'closed' }]);
    expect(rest).toBe('data: [{"type":"worker_st');
    expect(workerStates('not json')).toEqual([]);
  });
});

describe('the special clients', () => {
  const CLIENTS: TrafficOptions = { ...TRAFFIC, streamIntervalTokens: [160, 300] };
  const units = Array.from({ length: 3000 }, (_, i) => planUnit(CLIENTS, i));
  const specs = units.flat();
  // SamplingParams' fields (python/sglang/srt/sampling/sampling_params.py): every key a struct
  // accepts as a keyword, internal ones too.
  const SAMPLING_FIELDS = new Set(['max_new_tokens', 'stop', 'stop_token_ids', 'stop_regex', 'temperature', 'top_p', 'top_k', 'min_p', 'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'min_new_tokens', 'n', 'json_schema', 'regex', 'ebnf', 'structural_tag', 'ignore_eos', 'skip_special_tokens', 'spaces_between_special_tokens', 'no_stop_trim', 'custom_params', 'stream_interval', 'logit_bias', 'sampling_seed', 'stop_strs', 'stop_regex_strs', 'stop_str_max_len', 'stop_regex_max_len', 'is_normalized']);

  it('are a draw of their own: every other unit of a seed is what it was without them', () => {
    const none: TrafficOptions = { ...TRAFFIC, unknownKeyShare: 0, streamIntervalShare: 0 };
    let special = 0;
    for (let i = 0; i < 3000; i++) {
      if (units[i]!.some((s) => s.client)) special++;
      else expect(units[i]).toEqual(planUnit(none, i));
    }
    expect(special / 3000).toBeGreaterThan(0.025);
    expect(special / 3000).toBeLessThan(0.06);
    // No stream_interval requests without the range the campaign derives from its deadline.
    expect(Array.from({ length: 1000 }, (_, i) => planUnit(TRAFFIC, i)).flat().some((s) => s.client === 'stream_interval')).toBe(false);
    // vLLM units have none (the findings are SGLang's).
    expect(Array.from({ length: 500 }, (_, i) => planUnit({ ...CLIENTS, format: 'vllm' }, i)).flat().some((s) => s.client)).toBe(false);
    const keys = specs.map((s) => s.key);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('an unknown key is exactly one key SamplingParams does not have; some replace max_new_tokens as OpenAI clients do', () => {
    const uk = specs.filter((s) => s.client === 'unknown_key');
    expect(uk.length).toBeGreaterThan(30);
    for (const s of uk) {
      const sp = s.body.sampling_params as Record<string, unknown>;
      expect(Object.keys(sp).filter((k) => !SAMPLING_FIELDS.has(k))).toEqual([s.unknownKey]);
      expect(s.cancelAfterChunks).toBeUndefined();
      expect(s.body.rid).toBe(s.id);
    }
    for (const k of UNKNOWN_SAMPLING_KEYS) expect(SAMPLING_FIELDS.has(k)).toBe(false);
    expect(uk.some((s) => !('max_new_tokens' in (s.body.sampling_params as object)))).toBe(true);
    expect(uk.some((s) => s.stream) && uk.some((s) => !s.stream)).toBe(true);
  });

  it('a stream_interval stream spaces 1–3 frames by its interval, within the range, and runs to its budget', () => {
    const si = specs.filter((s) => s.client === 'stream_interval');
    expect(si.length).toBeGreaterThan(30);
    for (const s of si) {
      const sp = s.body.sampling_params as Record<string, unknown>;
      expect(s.stream).toBe(true);
      expect(sp.stream_interval).toBe(s.streamInterval);
      expect(s.streamInterval).toBeGreaterThanOrEqual(160);
      expect(s.streamInterval).toBeLessThanOrEqual(300);
      expect([1, 2, 3].map((k) => k * s.streamInterval! + 1)).toContain(sp.max_new_tokens);
      expect(sp.ignore_eos).toBe(true);
      expect(referenceAnswer(s).output_ids).toHaveLength(sp.max_new_tokens as number);
    }
  });

  it('a never-reading client\'s stream has big frames and a budget it cannot be written in; keep-alive bursts straddle 5 s', () => {
    const a = planNeverReader(TRAFFIC, 0);
    expect(planNeverReader(TRAFFIC, 0)).toEqual(a);
    expect(a.spec.client).toBe('never_read');
    expect(a.spec.body).toMatchObject({ stream: true, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 5 });
    expect(a.spec.prompt).toHaveLength(600);
    expect(a.gapMs).toBeGreaterThanOrEqual(3000);
    expect(a.gapMs).toBeLessThanOrEqual(5000);
    const gaps = Array.from({ length: 200 }, (_, k) => planKeepAliveBurst(TRAFFIC, k));
    for (const b of gaps) {
      expect(b.gapMs).toBeGreaterThanOrEqual(4800);
      expect(b.gapMs).toBeLessThanOrEqual(5200);
      expect(b.specs).toHaveLength(12);
      for (const s of b.specs) {
        expect(s.stream).toBe(false);
        expect(s.client).toBe('keep_alive');
        expect(s.decode.max_new_tokens).toBeLessThanOrEqual(4);
      }
    }
    expect(gaps.some((b) => b.gapMs < 5000) && gaps.some((b) => b.gapMs > 5000)).toBe(true);
    const mixed = planKeepAliveBurst({ ...TRAFFIC, format: 'mixed' }, 3).specs;
    expect(mixed.map((s) => s.format)).toContain('vllm');
    expect(mixed.map((s) => s.format)).toContain('sglang');
  });

  it('the router gets a concurrency limit, and a client write timeout only when it has the setting', () => {
    const cfg = campaignRouterConfig(['http://w'], '/t', 'x', { clientWriteTimeoutMs: 3000, maxConcurrentRequests: 99 });
    expect(cfg.maxConcurrentRequests).toBe(99);
    expect('clientWriteTimeoutMs' in cfg).toBe(ROUTER_HAS_CLIENT_WRITE_TIMEOUT);
    expect('clientWriteTimeoutMs' in campaignRouterConfig(['http://w'], '/t', 'x')).toBe(false);
    expect(neverReaderCutMs({ firstTokenTimeoutMs: 4000 }, 3000)).toBe(9000);
  });

  const rec = (over: Partial<RequestRecord> = {}): RequestRecord => ({
    format: 'sglang', id: 'u', key: 'u', index: 0, kind: 'greedy', group: null, bad: false, promptLength: 3, admitted: true, reason: null, stream: false, startedAt: 1000, endedAt: 1100, status: 400,
    result: 'error', exact: false, errorMessage: "SamplingParams.__init__() got an unexpected keyword argument 'max_tokens'", errorType: null, errorInBand: false, weights: ['default'], mode: 'unknown', violations: [],
    client: 'unknown_key', unknownKey: 'max_tokens', ...over,
  });
  const reqRow = (over: Partial<RequestRow> = {}): RequestRow => ({
    kind: 'request', format: 'sglang', request_id: 'u', attempts: 0, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 3, completion_tokens: 0,
    cached_tokens: null, finish_reason: null, outcome: 'failed', duration_ms: 1, started_at: 1000, ended_at: 1100, stream: false, max_new_tokens: 4, error: null, trace_id: null, ...over,
  });
  const attRow = (attempt: number, worker: string, over: Partial<AttemptRow> = {}): AttemptRow => ({
    kind: 'attempt', format: 'sglang', request_id: 'u', attempt, rid: `u~m${attempt}~000000000000000${attempt}`, worker, started_at: 1000, ended_at: 1050, ttft_ms: null,
    prompt_tokens_sent: 3, replayed_tokens: 0, tokens: 0, budget_before: 4, budget_after: 4, cached_tokens: null, outcome: 'failed', error_kind: 'stream_broken', error: 'x', error_evidence: null, finish_reason: null, trace_id: null, ...over,
  });

  it('an unknown key: a 4xx or an in-band error passes; "no worker", a 503, a 5xx or a third worker do not', () => {
    expect(judgeUnknownKey(rec(), { requests: [reqRow()], attempts: [] })).toEqual([]);
    // Refused at admission without a trace row: fine; a request the router served must have one.
    expect(judgeUnknownKey(rec(), undefined)).toEqual([]);
    expect(judgeUnknownKey(rec({ stream: true, status: 200, errorInBand: true }), { requests: [reqRow({ attempts: 2 })], attempts: [attRow(0, 'w0'), attRow(1, 'w1')] })).toEqual([]);
    // In band on a stream before any attempt is the router's refusal at admission too; with an
    // attempt row the router served it, so a request row must exist.
    expect(judgeUnknownKey(rec({ stream: true, status: 200, errorInBand: true }), undefined)).toEqual([]);
    expect(judgeUnknownKey(rec({ stream: true, status: 200, errorInBand: true }), { requests: [], attempts: [attRow(0, 'w0')] }).join()).toMatch(/no request row/);
    expect(judgeUnknownKey(rec({ stream: false, status: 200, errorInBand: true }), undefined).join()).toMatch(/no request row/);
    expect(judgeUnknownKey(rec({ status: 503, errorMessage: 'no worker left to continue this request' }), undefined).join()).toMatch(/not a clear refusal/);
    expect(judgeUnknownKey(rec({ status: 502, errorMessage: 'migration exhausted' }), { requests: [reqRow()], attempts: [] }).join()).toMatch(/neither a 4xx nor an in-band error/);
    expect(judgeUnknownKey(rec({ status: 400 }), { requests: [reqRow({ attempts: 3 })], attempts: [attRow(0, 'w0'), attRow(1, 'w1'), attRow(2, 'w2')] }).join()).toMatch(/tried on 3 workers/);
    // Answered: the client side says so.
    const spec = specs.find((s) => s.client === 'unknown_key' && !s.stream)!;
    const ref = referenceAnswer(spec);
    const answered: ClientResult = { spec, startedAt: 0, endedAt: 1, status: 200, answer: { output_ids: ref.output_ids, meta: { finish_reason: ref.finish_reason, completion_tokens: ref.completion_tokens, prompt_tokens: ref.prompt_tokens } }, error: null, transport: null, cancelled: false, partialIds: ref.output_ids, problems: [], mode: 'unknown' };
    expect(judgeClient(answered, ref).violations.join()).toMatch(/unknown key: answered/);
  });

  it('a never-reading client: let go in time passes; held until its client hung up, finished, or not opened does not', () => {
    const nr = (over: Partial<RequestRecord> = {}) => rec({ client: 'never_read', stream: true, status: 200, result: 'cancelled', errorMessage: null, startedAt: 0, endedAt: 12_000, ...over });
    const row = (ended: number, outcome: RequestRow['outcome'] = 'cancelled') => ({ requests: [reqRow({ started_at: 10, ended_at: ended, outcome })], attempts: [] });
    expect(judgeNeverReader(nr(), row(6000), 9000, 3000)).toEqual([]);
    expect(judgeNeverReader(nr(), row(6000, 'failed'), 9000, 3000)).toEqual([]);
    expect(judgeNeverReader(nr(), row(12_000), 9000, null).join()).toMatch(/held a stream nobody read for 12.0 s .*no client write timeout/);
    expect(judgeNeverReader(nr(), row(6000, 'finished'), 9000, 3000).join()).toMatch(/finished/);
    // A client that hung up before the limit (the campaign's end) ends the request itself: not judged.
    expect(judgeNeverReader(nr({ endedAt: 5000 }), row(5000), 9000, 3000)).toEqual([]);
    expect(judgeNeverReader(nr({ result: 'error', status: 503, errorMessage: 'router is at its limit of 80 concurrent requests' }), undefined, 9000, 3000).join()).toMatch(/did not open: status 503/);
    // A fault broke its attempt before the stream opened and the continuation was refused (the
    // campaign's 429 proxy): a clear error after attempts, as any client gets it, not a never-read failure.
    const refused = nr({ result: 'error', status: 429, errorMessage: 'Too Many Requests: the gateway refused continuation attempt 1' });
    const broken = { ...attRow(0, 'w0'), outcome: 'failed' as const };
    expect(judgeNeverReader(refused, { requests: [reqRow({ outcome: 'failed' })], attempts: [broken] }, 9000, 3000)).toEqual([]);
    expect(judgeNeverReader(refused, { requests: [], attempts: [broken] }, 9000, 3000).join()).toMatch(/0 request rows/);
    expect(judgeNeverReader(refused, { requests: [reqRow({ outcome: 'failed' })], attempts: [] }, 9000, 3000).join()).toMatch(/did not open: status 429/);
  });

  it('stream_interval and keep-alive requests: a breakage with no fault on its worker counts, one a fault explains or a slow first token does not', () => {
    const rows = { requests: [], attempts: [attRow(0, 'w0', { error_kind: 'stalled', ended_at: 30_000 }), attRow(1, 'w1', { error_kind: 'connect', ended_at: 30_100 }), attRow(2, 'w2', { error_kind: 'first_token_timeout', ended_at: 34_000 })] };
    expect(unexplainedBreakage(rows, [], 5000).map((a) => a.attempt)).toEqual([0, 1]);
    expect(unexplainedBreakage(rows, [{ url: 'w1', start: 29_000, end: 29_500 }], 5000).map((a) => a.attempt)).toEqual([0]);
    // The request must end with its answer, unless a fault explains one of its failures.
    const si = rec({ client: 'stream_interval', unknownKey: undefined, streamInterval: 200, stream: true, status: 200, result: 'error', errorInBand: true, errorMessage: 'migration exhausted after 4 attempts' });
    const slow = { requests: [], attempts: [attRow(0, 'w2', { error_kind: 'first_token_timeout', ended_at: 34_000 })] };
    expect(judgePaced(si, slow, [], 5000)).toEqual(['stream_interval: the request failed with no fault to explain it: migration exhausted after 4 attempts']);
    expect(judgePaced(si, slow, [{ url: 'w2', start: 30_000, end: 31_000 }], 5000)).toEqual([]);
    expect(judgePaced(rec({ client: 'keep_alive', unknownKey: undefined, result: 'answer', exact: true, status: 200, errorMessage: null }), rows, [], 5000)).toEqual([
      expect.stringMatching(/^keep-alive: attempt 0 failed on w0 with stalled and no fault there/),
      expect.stringMatching(/^keep-alive: attempt 1 failed on w1 with connect/),
    ]);
  });

  it('a client that never reads: the server\'s writes block and stay blocked until the client hangs up after holding', async () => {
    const { createServer } = await import('node:http');
    // The server writes whenever it may; the client reads its response head (one read) and no more.
    let blockedAt = 0;
    let lastDrainAt = 0;
    let closedAt = 0;
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = `data: ${'x'.repeat(65_536)}\n\n`;
      const pump = () => {
        while (res.write(chunk)) if (res.writableLength > 64 << 20) return;
        blockedAt = Date.now();
        res.once('drain', () => {
          lastDrainAt = Date.now();
          pump();
        });
      };
      pump();
      res.on('close', () => (closedAt = Date.now()));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const spec = planNeverReader(TRAFFIC, 0).spec;
    const t0 = Date.now();
    const r = await holdUnread(spec, `http://127.0.0.1:${port}`, 800);
    expect(r.status).toBe(200);
    expect(r.cancelled).toBe(true);
    expect(r.endedAt - t0).toBeGreaterThanOrEqual(790);
    // Blocked, and nothing taken out of the socket for most of the hold.
    expect(blockedAt).toBeGreaterThan(0);
    expect(lastDrainAt).toBeLessThan(t0 + 400);
    await new Promise((res) => setTimeout(res, 100));
    expect(closedAt).toBeGreaterThanOrEqual(t0 + 790);
    server.close();
  });
});
