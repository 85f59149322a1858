// The laws of migration.md as properties: many random prompts, budgets, streaming modes,
// logprob options and fault schedules each, against real sockets (in-process simulated workers
// behind fault-injecting proxies). fast-check prints the seed and path of any counterexample;
// set FC_SEED to replay one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Fixture, generate, essence, waitFor, type Mode } from './harness/setup.ts';
import type { Fault } from './harness/fault-proxy.ts';
import { predict } from './harness/oracle.ts';
import { DEFAULT_MODEL, runModel, weightsSalt, type DecodeParams } from '../../sim/model.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';

const RUNS = Number(process.env.LAW_RUNS ?? 200);
const params = (): fc.Parameters<unknown> => ({ numRuns: RUNS, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}) });

const fixtures = new Map<Mode | 'defaults', Fixture>();
let caseNo = 0;
const nextId = (law: string) => `${law}-${process.pid}-${caseNo++}`;

let weightsFixture: Fixture;

beforeAll(async () => {
  for (const m of ['cumulative', 'incremental', 'mixed'] as const) fixtures.set(m, await Fixture.start(m));
  // Two weight versions side by side, as an RL cluster has while it rolls new weights out.
  weightsFixture = await Fixture.start('mixed', 4, ['default', 'v2', 'default', 'v2']);
});
afterAll(async () => {
  for (const f of fixtures.values()) await f.close();
  await weightsFixture?.close();
});

/** Failures that migrate. */
const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.constantFrom(500, 502, 503, 529).map((status) => ({ kind: 'refuse' as const, status })),
  fc.record({ kind: fc.constantFrom('reset' as const, 'cut' as const, 'abort' as const, 'error' as const, 'end' as const), afterFrames: fc.integer({ min: 0, max: 40 }) }),
  fc.constant({ kind: 'lose_final' as const }),
);

/** The request's own refusals, on any attempt: in band (both of SGLang's shapes) or a 4xx. */
const refusalArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.record({ kind: fc.constant('refusal' as const), afterFrames: fc.integer({ min: 0, max: 40 }), legacy: fc.boolean() }),
  fc.constantFrom(400, 401, 403, 413, 429).map((status) => ({ kind: 'status4xx' as const, status })),
);

const anyFaultArb: fc.Arbitrary<Fault> = fc.oneof({ arbitrary: faultArb, weight: 4 }, { arbitrary: refusalArb, weight: 1 });

const requestArb = fc.record({
  prompt: fc.array(fc.integer({ min: 3, max: 31999 }), { minLength: 1, maxLength: 24 }),
  budget: fc.integer({ min: 0, max: 40 }),
  ignoreEos: fc.boolean(),
  minNew: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
  stream: fc.boolean(),
  logprob: fc.option(fc.record({ top: fc.integer({ min: 0, max: 3 }), start: fc.option(fc.nat(), { nil: undefined }) }), { nil: undefined }),
  mode: fc.constantFrom<Mode>('cumulative', 'incremental', 'mixed'),
  // Absent: SGLang's default temperature 1.0 (the simulator's draws are a pure function of the
  // context, so a continuation samples what the uninterrupted run would have).
  temperature: fc.constantFrom(undefined, 0, 0.7),
  // A stop token taken from the uninterrupted answer at this position (modulo its length).
  stopAt: fc.option(fc.nat(40), { nil: undefined }),
});
type Req = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

/** The sampling params a case sends (and the reference run uses). */
function samplingOf(r: Req): Record<string, unknown> & DecodeParams {
  const sp: Record<string, unknown> & DecodeParams = { max_new_tokens: r.budget, ignore_eos: r.ignoreEos };
  if (r.minNew !== undefined) sp.min_new_tokens = Math.min(r.minNew, r.budget);
  if (r.temperature !== undefined) sp.temperature = r.temperature;
  if (r.stopAt !== undefined) {
    const free = runModel(r.prompt, { ...sp, stop_token_ids: [] });
    if (free.output_ids.length > 0) sp.stop_token_ids = [free.output_ids[r.stopAt % free.output_ids.length]!];
  }
  return sp;
}

function bodyOf(r: Req, id: string): Record<string, unknown> {
  const sp: Record<string, unknown> = samplingOf(r);
  const body: Record<string, unknown> = { rid: id, input_ids: r.prompt, sampling_params: sp, stream: r.stream };
  if (r.logprob) {
    body.return_logprob = true;
    body.top_logprobs_num = r.logprob.top;
    if (r.logprob.start !== undefined) body.logprob_start_len = r.logprob.start % r.prompt.length;
  }
  return body;
}

/** A stop can end this request's answer (EOS or a stop token), not only its budget. */
const canStop = (r: Req) => !r.ignoreEos || r.stopAt !== undefined;

/** lose_final needs a length finish (a stop lost with its frame is ambiguous, see the proxy). */
function fit(r: Req, schedule: Fault[]): Fault[] {
  return schedule.map((f) => (f.kind === 'lose_final' && canStop(r) ? { kind: 'reset', afterFrames: 0 } : f));
}

function fullRun(r: Req) {
  return runModel(r.prompt, samplingOf(r));
}

async function rowsOf(f: { traceRows(x: object): unknown[] }, id: string): Promise<{ attempts: AttemptRow[]; request: RequestRow }> {
  const request = await waitFor(() => f.traceRows({ request: id, kind: 'request' })[0] as RequestRow | undefined);
  const attempts = (f.traceRows({ request: id, kind: 'attempt' }) as AttemptRow[]).sort((a, b) => a.attempt - b.attempt);
  return { attempts, request };
}

/** Whether the client of this request sees incremental chunks: the mode of attempt 0's worker. */
function clientIncremental(fx: Fixture, id: string): boolean {
  const first = fx.calls(id)[0];
  return first ? fx.modeOf.get(first.proxy) === 'incremental' : false;
}

describe('law 1: equivalence', () => {
  it(`a migrated answer equals the fault-free answer (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(faultArb, { maxLength: 3 }), async (r, raw) => {
        const fx = fixtures.get(r.mode)!;
        const router = await fx.router(3);
        const id = nextId('eq');
        const schedule = fit(r, raw);
        // Within the limit, and not two failures before any token that no worker shows to be its
        // own (those end the request: law 6's oracle).
        fc.pre(predict(fullRun(r).output_ids.length, r.budget, true, 3, schedule, Boolean(r.logprob)).ok);
        fx.schedule(id, schedule);
        const clean = nextId('eq-clean');
        const [faulty, base] = [await send(fx, router.url, bodyOf(r, id), id), await send(fx, router.url, bodyOf(r, clean), clean)];
        expect(faulty.error).toBeNull();
        expect(base.error).toBeNull();
        expect(essence(faulty.body!)).toEqual(essence(base.body!));
        const meta = faulty.body!.meta_info as Record<string, unknown>;
        expect(meta.id).toBe(id);
        expect(meta.cached_tokens as number).toBeLessThanOrEqual(r.prompt.length);
      }),
      params(),
    );
  });
});

/** Send and fold per the mode the client turned out to get. */
async function send(fx: Fixture, url: string, body: Record<string, unknown>, id: string) {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const { foldText } = await import('./harness/fold-text.ts');
  return foldText(res.status, res.headers, text, Boolean(body.stream), clientIncremental(fx, id));
}

describe('law 2: admission', () => {
  const refusals: [string, (b: Record<string, unknown>) => void][] = [
    ['sampling_seed', (b) => Object.assign(b.sampling_params as object, { sampling_seed: 7, temperature: 0.8 })],
    ['frequency_penalty', (b) => Object.assign(b.sampling_params as object, { frequency_penalty: 0.5 })],
    ['presence_penalty', (b) => Object.assign(b.sampling_params as object, { presence_penalty: -0.4 })],
    ['repetition_penalty', (b) => Object.assign(b.sampling_params as object, { repetition_penalty: 1.2 })],
    ['grammar_regex', (b) => Object.assign(b.sampling_params as object, { regex: '[0-9]+' })],
    ['unbounded_budget', (b) => Object.assign(b.sampling_params as object, { max_new_tokens: null })],
    ['unresolved_budget', (b) => delete (b.sampling_params as Record<string, unknown>).max_new_tokens],
    ['return_hidden_states', (b) => Object.assign(b, { return_hidden_states: true })],
    ['custom_logit_processor', (b) => Object.assign(b, { custom_logit_processor: 'x' })],
    ['thinking_budget', (b) => Object.assign(b.sampling_params as object, { custom_params: { thinking_budget: 16 } })],
  ];
  it(`refused requests are never continued; admitted ones are continued after every failure until the limit (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.option(fc.constantFrom(...refusals.keys()), { nil: undefined }), fc.array(anyFaultArb, { minLength: 1, maxLength: 5 }), async (r, refusal, raw) => {
        const fx = fixtures.get(r.mode)!;
        const limit = 3;
        const router = await fx.router(limit);
        const id = nextId('adm');
        const schedule = fit({ ...r, ignoreEos: true }, raw).map((f) => (f.kind === 'lose_final' ? { kind: 'reset' as const, afterFrames: 0 } : f));
        fx.schedule(id, schedule);
        const body = bodyOf({ ...r, budget: Math.max(r.budget, 41), stopAt: undefined }, id); // budget beyond every fault point
        (body.sampling_params as Record<string, unknown>).ignore_eos = true;
        if (refusal !== undefined) refusals[refusal]![1](body);
        const answer = await send(fx, router.url, body, id);
        const { request } = await rowsOf(router, id);
        const calls = fx.calls(id).length;
        if (refusal !== undefined) {
          expect(request.admitted).toBe(false);
          expect(request.admission_reason).toBe(refusals[refusal]![0]);
          expect(calls).toBe(1);
          expect(request.attempts).toBe(1);
        } else {
          expect(request.admitted).toBe(true);
          const p = predict(41, 41, true, limit, schedule);
          expect(calls).toBe(p.attempts);
          expect(answer.error === null).toBe(p.ok);
        }
      }),
      params(),
    );
  });
});

describe('law 3: budget', () => {
  it(`continuations ask for the saturating remainder and nothing beyond the budget is delivered (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(anyFaultArb, { maxLength: 5 }), async (r, raw) => {
        const fx = fixtures.get(r.mode)!;
        const router = await fx.router(3);
        const id = nextId('bud');
        const schedule = fit(r, raw);
        fx.schedule(id, schedule);
        const answer = await send(fx, router.url, bodyOf(r, id), id);
        const full = fullRun(r);
        const calls = fx.calls(id);
        let replayed = 0;
        for (const [k, c] of calls.entries()) {
          const sp = c.body.sampling_params as Record<string, unknown>;
          const ids = c.body.input_ids as number[];
          expect(ids).toEqual([...r.prompt, ...full.output_ids.slice(0, replayed)]);
          if (k > 0) {
            expect(sp.max_new_tokens).toBe(Math.max(0, r.budget - replayed));
            if (r.minNew !== undefined) expect(sp.min_new_tokens).toBe(Math.min(Math.max(0, Math.min(r.minNew, r.budget) - replayed), r.budget - replayed));
          }
          replayed += c.framesSent > 0 ? tokensOfCall(c, k === calls.length - 1, full.output_ids.length - replayed) : 0;
        }
        if (answer.body) expect((answer.body.output_ids as number[]).length).toBeLessThanOrEqual(r.budget);
        // An exhausted budget finishes without another call: never a call that asks for 0 tokens
        // after a failure that delivered the whole budget.
        const p = predict(full.output_ids.length, r.budget, true, 3, schedule, Boolean(r.logprob));
        expect(calls.length).toBe(p.attempts);
        if (p.finishedLocally) {
          expect(answer.error).toBeNull();
          expect((answer.body!.meta_info as Record<string, unknown>).finish_reason).toEqual({ type: 'length', length: r.budget });
        }
      }),
      params(),
    );
  });

  it('a request without max_new_tokens is admitted when every worker advertises the same default', async () => {
    const { startWorker } = await import('../../sim/worker.ts');
    const { startRouter } = await import('../../router/index.ts');
    const ws = [];
    for (let i = 0; i < 3; i++) ws.push(await startWorker({ tokenIntervalMs: 0, preferredSamplingParams: { max_new_tokens: 12 } }));
    const router = await startRouter({ port: 0, workers: ws.map((w) => w.url), healthIntervalMs: 0 });
    try {
      // Every worker breaks after 5 tokens: 5 + 5 replayed, and the third attempt's remaining 2 fit.
      for (const w of ws) w.fault({ kind: 'reset', afterTokens: 5 });
      const a = await generate(router.url, { rid: 'default-budget', input_ids: [9, 8, 7], sampling_params: { ignore_eos: true }, stream: true });
      expect(a.error).toBeNull();
      const { attempts, request } = await rowsOf(router, 'default-budget');
      expect(request.admitted).toBe(true);
      expect(request.max_new_tokens).toBe(12);
      expect(attempts.map((x) => x.replayed_tokens)).toEqual([0, 5, 10]);
      expect(attempts.map((x) => x.budget_before)).toEqual([12, 7, 2]);
      expect((a.body!.output_ids as number[])).toEqual(runModel([9, 8, 7], { max_new_tokens: 12, ignore_eos: true }).output_ids);
      expect((a.body!.meta_info as Record<string, unknown>).finish_reason).toEqual({ type: 'length', length: 12 });
    } finally {
      await router.close();
      for (const w of ws) await w.close();
    }
  });
});

/** Tokens a call delivered: frames sent, except the final frame of a finished call carries its token too. */
function tokensOfCall(c: { framesSent: number; fault: Fault | null }, _last: boolean, left: number): number {
  if (c.fault?.kind === 'refuse') return 0;
  if (c.fault?.kind === 'lose_final') return left;
  return Math.min(c.framesSent, left);
}

describe('law 4: limit', () => {
  it(`never more than limit + 1 attempts; the last error reaches the client (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.integer({ min: 0, max: 3 }), fc.array(anyFaultArb, { minLength: 0, maxLength: 6 }), async (r, limit, raw) => {
        const fx = fixtures.get(r.mode)!;
        const router = await fx.router(limit);
        const id = nextId('lim');
        const schedule = fit(r, raw);
        fx.schedule(id, schedule);
        const answer = await send(fx, router.url, bodyOf(r, id), id);
        const calls = fx.calls(id).length;
        expect(calls).toBeLessThanOrEqual(limit + 1);
        const p = predict(fullRun(r).output_ids.length, r.budget, limit > 0, limit, schedule, Boolean(r.logprob));
        expect(answer.error === null).toBe(p.ok);
        if (!p.ok) {
          const last = schedule[p.attempts - 1];
          if (last?.kind === 'refusal' || last?.kind === 'status4xx') {
            // The request's own refusal reaches the client as the worker wrote it, on that attempt.
            expect(answer.error).toMatch(/injected (refusal|4\d\d)/);
            const status = last.kind === 'status4xx' ? last.status : 400;
            if (answer.frames.length === 0 && !(r.stream && last.kind === 'refusal')) expect(answer.status).toBe(status);
          } else {
            expect(answer.error).toMatch(limit === 0 ? /not migratable \(migration_disabled\)|injected|CUDA|worker answered|stream ended/ : /exhausted|failed the same way on 2 workers before any token/);
            if (answer.frames.length === 0) expect(answer.status).toBeGreaterThanOrEqual(500);
          }
        }
      }),
      params(),
    );
  });
});

describe('law 5: trace rows', () => {
  it(`attempts started = attempt rows, one request row per request (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(anyFaultArb, { maxLength: 5 }), async (r, raw) => {
        const fx = fixtures.get(r.mode)!;
        const router = await fx.router(3);
        const id = nextId('tr');
        fx.schedule(id, fit(r, raw));
        const started: number[] = [];
        const unsub = router.subscribe((e) => {
          if (e.type === 'attempt_started' && e.request_id === id) started.push(e.attempt);
        });
        const answer = await send(fx, router.url, bodyOf(r, id), id);
        const { attempts, request } = await rowsOf(router, id);
        unsub();
        expect(router.traceRows({ request: id, kind: 'request' })).toHaveLength(1);
        expect(attempts.map((a) => a.attempt)).toEqual(started);
        expect(attempts.map((a) => a.attempt)).toEqual([...attempts.keys()]);
        expect(attempts.length).toBe(fx.calls(id).length);
        expect(request.attempts).toBe(attempts.length);
        expect(request.migrations).toBe(attempts.length - 1);
        if (answer.error === null) {
          expect(attempts.reduce((s, a) => s + a.tokens, 0)).toBe(request.completion_tokens);
          expect(request.completion_tokens).toBe((answer.body!.output_ids as number[]).length);
        }
        const out = router.requestOutput(id)!;
        expect(out.attempts.map((x) => [x.from_token, x.tokens])).toEqual(attempts.map((x) => [x.replayed_tokens, x.tokens]));
        if (answer.error === null) expect(out.output_ids).toEqual(answer.body!.output_ids);
        for (const [k, a] of attempts.entries()) {
          expect(a.replayed_tokens).toBe(attempts.slice(0, k).reduce((s, x) => s + x.tokens, 0));
          expect(a.prompt_tokens_sent).toBe(r.prompt.length + a.replayed_tokens);
        }
      }),
      params(),
    );
  });
});

describe('law 6: oracle', () => {
  it(`an independent model predicts outcome, attempts and tokens per attempt (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(fc.option(anyFaultArb, { nil: null, freq: 4 }), { maxLength: 5 }), async (r, rawSchedule) => {
        const fx = fixtures.get(r.mode)!;
        const router = await fx.router(3);
        const id = nextId('or');
        const schedule = rawSchedule.map((f) => (f && f.kind === 'lose_final' && canStop(r) ? ({ kind: 'reset', afterFrames: 0 } as Fault) : f));
        fx.schedule(id, schedule);
        const answer = await send(fx, router.url, bodyOf(r, id), id);
        const full = fullRun(r);
        const p = predict(full.output_ids.length, r.budget, true, 3, schedule, Boolean(r.logprob));
        const { attempts, request } = await rowsOf(router, id);
        expect(answer.error === null).toBe(p.ok);
        expect(request.attempts).toBe(p.attempts);
        expect(attempts.map((a) => a.tokens)).toEqual(p.tokensPerAttempt);
        expect(attempts.at(-1)!.outcome).toBe(p.ok ? (p.finishedLocally ? 'budget_exhausted' : 'finished') : 'failed');
        if (p.ok) {
          expect(answer.body!.output_ids).toEqual(full.output_ids);
          const lp = (answer.body!.meta_info as Record<string, unknown>).output_token_logprobs;
          if (r.logprob) expect((lp as [number, number, null][]).map((x) => x[0])).toEqual(full.output_logprobs);
        }
      }),
      params(),
    );
  });

  it('two failures before any token that no worker shows to be its own end the request; ones that carry their own evidence do not', async () => {
    const fx = fixtures.get('cumulative')!;
    const router = await fx.router(3);
    const r: Req = { prompt: [5, 6, 7], budget: 12, ignoreEos: true, minNew: undefined, stream: false, logprob: undefined, mode: 'cumulative', temperature: 0, stopAt: undefined };
    const total = fullRun(r).output_ids.length;
    const cases: [(Fault | null)[], boolean, number][] = [
      [[{ kind: 'reset', afterFrames: 0 }, { kind: 'end', afterFrames: 0 }, null], false, 2],
      [[{ kind: 'refuse', status: 500 }, { kind: 'cut', afterFrames: 0 }, null], false, 2],
      [[{ kind: 'refuse', status: 503 }, { kind: 'refuse', status: 502 }, { kind: 'reset', afterFrames: 0 }, null], true, 4],
      [[{ kind: 'reset', afterFrames: 0 }, { kind: 'reset', afterFrames: 3 }, { kind: 'reset', afterFrames: 0 }, null], true, 4],
    ];
    for (const [schedule, ok, attempts] of cases) {
      expect(predict(total, r.budget, true, 3, schedule)).toMatchObject({ ok, attempts });
      const id = nextId('unproven');
      fx.schedule(id, schedule);
      const answer = await send(fx, router.url, bodyOf(r, id), id);
      const { attempts: rows, request } = await rowsOf(router, id);
      expect(request.attempts).toBe(attempts);
      if (ok) expect(answer.error).toBeNull();
      else {
        expect(answer.status).toBe(500);
        expect(answer.error).toMatch(/failed the same way on 2 workers before any token/);
        for (const row of rows) expect(row.error_evidence).toMatch(/no evidence against the worker/);
      }
    }
  });
});

describe('law 7: weights', () => {
  it(`no answer mixes tokens of two weight versions: it is one version's exact answer, or an error that says why (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(faultArb, { maxLength: 3 }), async (r, raw) => {
        const fx = weightsFixture;
        const router = await fx.router(3);
        const id = nextId('wv');
        const schedule = fit(r, raw);
        fx.schedule(id, schedule);
        const answer = await send(fx, router.url, bodyOf(r, id), id);
        const { attempts } = await rowsOf(router, id);
        const producing = attempts.filter((a) => a.tokens > 0).map((a) => fx.versionOf.get(a.worker)!);
        expect(new Set(producing).size).toBeLessThanOrEqual(1);
        if (answer.error === null) {
          const version = producing[0] ?? fx.versionOf.get(attempts.at(-1)!.worker)!;
          const ref = runModel(r.prompt, samplingOf(r), DEFAULT_MODEL, weightsSalt('baton-sim', version));
          expect(answer.body!.output_ids).toEqual(ref.output_ids);
        } else {
          expect(answer.error).toMatch(/weight_version|exhausted|no worker|failed the same way on 2 workers before any token/);
        }
      }),
      params(),
    );
  });
});
