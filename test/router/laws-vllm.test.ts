// The laws of migration.md, once more for vLLM's token-in/token-out API: many random prompts,
// budgets, logprob and usage options and fault schedules, against real sockets (in-process
// simulated vLLM workers behind fault-injecting proxies), with the same independent oracle as the
// SGLang laws (harness/oracle.ts). FC_SEED replays a counterexample; LAW_RUNS sets the cases.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Fixture, waitFor } from './harness/setup.ts';
import type { Fault } from './harness/fault-proxy.ts';
import { predict } from './harness/oracle.ts';
import { vllmReference } from '../../sim/vllm/reference.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';

const RUNS = Number(process.env.LAW_RUNS ?? 200);
const params = (): fc.Parameters<unknown> => ({ numRuns: RUNS, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}) });

let fx: Fixture;
let caseNo = 0;
const nextId = (law: string) => `v${law}-${process.pid}-${caseNo++}`;

beforeAll(async () => {
  fx = await Fixture.start('incremental', 5, [], 'vllm');
});
afterAll(async () => {
  await fx?.close();
});

const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.constantFrom(500, 502, 503, 529).map((status) => ({ kind: 'refuse' as const, status })),
  fc.record({ kind: fc.constantFrom('reset' as const, 'cut' as const, 'abort' as const, 'error' as const, 'end' as const), afterFrames: fc.integer({ min: 0, max: 40 }) }),
  fc.constant({ kind: 'lose_final' as const }),
);
const refusalArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.record({ kind: fc.constant('refusal' as const), afterFrames: fc.integer({ min: 0, max: 40 }), legacy: fc.constant(false) }),
  fc.constantFrom(400, 413, 429).map((status) => ({ kind: 'status4xx' as const, status })),
);
const anyFaultArb = fc.oneof({ arbitrary: faultArb, weight: 4 }, { arbitrary: refusalArb, weight: 1 });

const requestArb = fc.record({
  prompt: fc.array(fc.integer({ min: 3, max: 31999 }), { minLength: 1, maxLength: 24 }),
  // vLLM requires max_tokens >= 1.
  budget: fc.integer({ min: 1, max: 40 }),
  ignoreEos: fc.boolean(),
  minNew: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
  stream: fc.boolean(),
  logprobs: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
  usage: fc.constantFrom('none', 'final', 'continuous'),
  temperature: fc.constantFrom(undefined, 0, 0.7),
});
type Req = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

function samplingOf(r: Req): Record<string, unknown> {
  const sp: Record<string, unknown> = { max_tokens: r.budget, ignore_eos: r.ignoreEos };
  if (r.minNew !== undefined) sp.min_tokens = Math.min(r.minNew, r.budget);
  if (r.logprobs !== undefined) sp.logprobs = r.logprobs;
  if (r.temperature !== undefined) sp.temperature = r.temperature;
  return sp;
}

function bodyOf(r: Req, id: string): Record<string, unknown> {
  const body: Record<string, unknown> = { request_id: id, token_ids: r.prompt, sampling_params: samplingOf(r), stream: r.stream };
  if (r.usage !== 'none') body.stream_options = { include_usage: true, continuous_usage_stats: r.usage === 'continuous' };
  return body;
}

const canStop = (r: Req) => !r.ignoreEos;
const fit = (r: Req, s: Fault[]) => s.map((f) => (f.kind === 'lose_final' && canStop(r) ? ({ kind: 'reset', afterFrames: 0 } as Fault) : f));

interface Folded {
  status: number;
  error: string | null;
  ids: number[];
  logprobs: unknown[] | null;
  finish: string | null;
  usage: Record<string, unknown> | null;
  requestId: string | null;
}

/** An answer as a vLLM client reads it: deltas concatenated, the final usage chunk. */
async function send(url: string, body: Record<string, unknown>): Promise<Folded> {
  const res = await fetch(url + '/inference/v1/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const out: Folded = { status: res.status, error: null, ids: [], logprobs: null, finish: null, usage: null, requestId: null };
  if (!res.headers.get('content-type')?.includes('text/event-stream')) {
    const j = JSON.parse(text) as Record<string, unknown>;
    if (j.error) return { ...out, error: (j.error as { message: string }).message };
    const c = (j.choices as Record<string, unknown>[])[0]!;
    return { ...out, ids: c.token_ids as number[], logprobs: (c.logprobs as { content: unknown[] } | null)?.content ?? null, finish: c.finish_reason as string, usage: j.usage as Record<string, unknown>, requestId: j.request_id as string };
  }
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  for (const f of text.split('\n\n').filter((x) => x && x !== 'data: [DONE]')) {
    const j = JSON.parse(f.slice(6)) as Record<string, unknown>;
    if (j.error) return { ...out, error: (j.error as { message: string }).message };
    out.requestId = j.request_id as string;
    const c = (j.choices as Record<string, unknown>[])[0];
    if (j.usage) out.usage = j.usage as Record<string, unknown>;
    if (!c) continue;
    out.ids.push(...(c.token_ids as number[]));
    const lp = (c.logprobs as { content: unknown[] } | null)?.content;
    if (lp) (out.logprobs ??= []).push(...lp);
    if (c.finish_reason) out.finish = c.finish_reason as string;
  }
  return out;
}

async function rowsOf(router: { traceRows(x: object): unknown[] }, id: string): Promise<{ attempts: AttemptRow[]; request: RequestRow }> {
  const request = await waitFor(() => router.traceRows({ request: id, kind: 'request' })[0] as RequestRow | undefined);
  const attempts = (router.traceRows({ request: id, kind: 'attempt' }) as AttemptRow[]).sort((a, b) => a.attempt - b.attempt);
  return { attempts, request };
}

const ref = (r: Req) => vllmReference(r.prompt, samplingOf(r));

describe('vLLM law 1: equivalence', () => {
  it(`a migrated answer equals the fault-free answer and the model's (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(faultArb, { maxLength: 3 }), async (r, raw) => {
        const router = await fx.router(3);
        const id = nextId('eq');
        // Not two failures before any token that no worker shows to be its own (the oracle's).
        fc.pre(predict(ref(r).token_ids.length, r.budget, true, 3, fit(r, raw), r.logprobs !== undefined).ok);
        fx.schedule(id, fit(r, raw));
        const clean = nextId('eq-clean');
        const [a, b] = [await send(router.url, bodyOf(r, id)), await send(router.url, bodyOf(r, clean))];
        expect(a.error).toBeNull();
        expect(b.error).toBeNull();
        expect({ ...a, requestId: null }).toEqual({ ...b, requestId: null });
        expect(a.requestId).toBe(`generate-tokens-${id}`);
        const want = ref(r);
        expect(a.ids).toEqual(want.token_ids);
        expect(a.finish).toBe(want.finish_reason);
        if (r.logprobs !== undefined) expect(a.logprobs).toEqual(want.logprobs);
        if (r.usage !== 'none' || !r.stream) expect(a.usage).toMatchObject(want.usage);
      }),
      params(),
    );
  });
});

describe('vLLM laws 2–6: admission, budget, limit, trace rows, oracle', () => {
  it(`refused requests are never continued (${RUNS} cases)`, async () => {
    const refusals: [string, (sp: Record<string, unknown>) => void][] = [
      ['sampling_seed', (sp) => Object.assign(sp, { seed: 7, temperature: 0.8 })],
      ['repetition_penalty', (sp) => Object.assign(sp, { repetition_penalty: 1.2 })],
      ['structured_outputs', (sp) => Object.assign(sp, { structured_outputs: { regex: '[0-9]+' } })],
      ['unresolved_budget', (sp) => delete sp.max_tokens],
    ];
    await fc.assert(
      fc.asyncProperty(requestArb, fc.option(fc.constantFrom(...refusals.keys()), { nil: undefined }), fc.array(anyFaultArb, { minLength: 1, maxLength: 5 }), async (r, refusal, raw) => {
        const router = await fx.router(3);
        const id = nextId('adm');
        const schedule = fit({ ...r, ignoreEos: true }, raw).map((f) => (f.kind === 'lose_final' ? ({ kind: 'reset', afterFrames: 0 } as Fault) : f));
        fx.schedule(id, schedule);
        const body = bodyOf({ ...r, budget: 41, ignoreEos: true }, id);
        if (refusal !== undefined) refusals[refusal]![1](body.sampling_params as Record<string, unknown>);
        const answer = await send(router.url, body);
        const { request } = await rowsOf(router, id);
        const calls = fx.calls(id).length;
        if (refusal !== undefined) {
          expect(request).toMatchObject({ admitted: false, admission_reason: refusals[refusal]![0], attempts: 1 });
          expect(calls).toBe(1);
        } else {
          const p = predict(41, 41, true, 3, schedule);
          expect(request.admitted).toBe(true);
          expect(calls).toBe(p.attempts);
          expect(answer.error === null).toBe(p.ok);
        }
      }),
      params(),
    );
  });

  it(`budgets, the limit, exactly-once rows and the oracle agree (${RUNS} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, fc.integer({ min: 0, max: 3 }), fc.array(fc.option(anyFaultArb, { nil: null, freq: 4 }), { maxLength: 5 }), async (r, limit, rawSchedule) => {
        const router = await fx.router(limit);
        const id = nextId('or');
        const schedule = rawSchedule.map((f) => (f && f.kind === 'lose_final' && canStop(r) ? ({ kind: 'reset', afterFrames: 0 } as Fault) : f));
        fx.schedule(id, schedule);
        const started: number[] = [];
        const unsub = router.subscribe((e) => {
          if (e.type === 'attempt_started' && e.request_id === id) started.push(e.attempt);
        });
        const answer = await send(router.url, bodyOf(r, id));
        const want = ref(r);
        const p = predict(want.token_ids.length, r.budget, limit > 0, limit, schedule, r.logprobs !== undefined);
        const { attempts, request } = await rowsOf(router, id);
        unsub();
        const calls = fx.calls(id);
        // Law 4: never more than limit + 1 attempts; the oracle says how many, and whether it ends well.
        expect(calls.length).toBeLessThanOrEqual(limit + 1);
        expect(calls.length).toBe(p.attempts);
        expect(answer.error === null).toBe(p.ok);
        // Law 3: every continuation asks for the saturating remainder, explicitly.
        let replayed = 0;
        for (const [k, c] of calls.entries()) {
          const sp = c.body.sampling_params as Record<string, unknown>;
          expect(c.body.token_ids).toEqual([...r.prompt, ...want.token_ids.slice(0, replayed)]);
          expect(c.body.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
          if (k > 0) expect(sp.max_tokens).toBe(r.budget - replayed);
          replayed += p.tokensPerAttempt[k]!;
        }
        // Law 5: exactly-once rows.
        expect(attempts.map((a) => a.attempt)).toEqual(started);
        expect(request.attempts).toBe(attempts.length);
        expect(attempts.map((a) => a.tokens)).toEqual(p.tokensPerAttempt);
        // Law 6: the oracle's outcome, and the model's answer when it ends well.
        if (p.ok) {
          expect(answer.ids).toEqual(want.token_ids);
          if (r.logprobs !== undefined) expect(answer.logprobs).toEqual(want.logprobs);
          expect(attempts.at(-1)!.outcome).toBe(p.finishedLocally ? 'budget_exhausted' : 'finished');
        }
      }),
      params(),
    );
  });
});
