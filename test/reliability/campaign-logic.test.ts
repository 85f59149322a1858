// The campaign's own logic, without a server: replayable schedules and traffic, and the verdict
// rules, each shown to catch the fault it exists for (a checker that cannot fail proves nothing).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { planFaults } from '../../chaos/schedule.ts';
import { planRequest } from '../../chaos/traffic.ts';
import { referenceAnswer } from '../../chaos/reference.ts';
import { StreamAssembler } from '../../chaos/client.ts';
import { compareAnswer, judgeTrace, outages, type RequestRecord, type TraceContext } from '../../chaos/verify.ts';
import { judgeMemory } from '../../chaos/campaign.ts';
import { runModel } from '../../sim/model.ts';
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
    for (const s of specs) {
      expect(s.admitted).toBe(s.kind === 'greedy');
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
    expect(ref.input_token_logprobs![0]![0]).toBeNull();
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
    id: 'r', index: 0, kind: 'greedy', admitted: true, reason: null, stream: true, startedAt: 1000, endedAt: 2000, status: 200,
    result: 'answer', exact: true, errorMessage: null, errorType: null, mode: 'cumulative', violations: [], ...over,
  });
  const att = (attempt: number, over: Partial<AttemptRow> = {}): AttemptRow => ({
    kind: 'attempt', request_id: 'r', attempt, rid: attempt ? `r~m${attempt}` : 'r', worker: 'w0', started_at: 1000 + attempt, ended_at: 1500, ttft_ms: 1,
    prompt_tokens_sent: 3, replayed_tokens: 0, tokens: 1, budget_before: 4, budget_after: 3, cached_tokens: 0, outcome: 'finished', error_kind: null, error: null, error_evidence: null, finish_reason: 'length', ...over,
  });
  const req = (attempts: number, over: Partial<RequestRow> = {}): RequestRow => ({
    kind: 'request', request_id: 'r', attempts, migrations: attempts - 1, admitted: true, admission_reason: null, prompt_tokens: 3, completion_tokens: 4,
    cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: 1000, ended_at: 2000, stream: true, max_new_tokens: 4, error: null, ...over,
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
    // A failure that does not migrate ended an admitted request: a 4xx from the worker must not happen here.
    expect(judgeTrace(err('no worker left'), { requests: [fail(3)], attempts: [failed(0), failed(1), failed(2, 'http_4xx')] }, ctx)[0]).toMatch(/did not fail migratably/);
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
