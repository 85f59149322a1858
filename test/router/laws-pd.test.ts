// The equivalence law for P/D pairs (docs/pd.md): after any fault schedule over both legs of
// every attempt (the fault-injecting proxies stand in front of the prefill and the decode
// workers alike, and a schedule names calls in arrival order, whichever leg they are), every
// answer the client gets whole equals the fault-free one and the uninterrupted model's; no room
// is used twice. In-process simulated P/D workers (sim/pd.ts), real sockets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { FaultBook, FaultProxy, type Fault } from './harness/fault-proxy.ts';
import { essence, waitFor } from './harness/setup.ts';
import { foldText } from './harness/fold-text.ts';
import { runModel, type DecodeParams } from '../../sim/model.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { AttemptRow } from '../../router/trace/row.ts';
import { ROOMS } from '../../router/migration/pd.ts';

const RUNS = Number(process.env.LAW_RUNS ?? 200);
const params = (): fc.Parameters<unknown> => ({ numRuns: RUNS, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}) });

const book = new FaultBook();
const workers: SimWorker[] = [];
const proxies: FaultProxy[] = [];
let router: RouterHandle;
let caseNo = 0;

beforeAll(async () => {
  const urls = { prefill: [] as string[], decode: [] as string[] };
  for (const role of ['prefill', 'prefill', 'decode', 'decode', 'decode'] as const) {
    const w = await startWorker({ tokenIntervalMs: 0, prefillUsPerToken: 0, incremental: false, disaggregationMode: role, disaggregationWaitingTimeoutMs: 5_000, disaggregationBootstrapTimeoutMs: 5_000 });
    workers.push(w);
    const p = await new FaultProxy(w.url, book).start();
    proxies.push(p);
    urls[role].push(p.url);
  }
  router = await startRouter({
    port: 0,
    pdDisaggregation: true,
    prefill: urls.prefill,
    decode: urls.decode,
    migrationLimit: 3,
    benchMs: 0, // each case starts with every worker eligible
    circuitFailureThreshold: 1_000_000,
    healthIntervalMs: 0,
    interTokenTimeoutMs: 10_000,
    pdFirstTokenTimeoutMs: 3_000,
  });
});

afterAll(async () => {
  await router?.close();
  for (const p of proxies) await p.close();
  for (const w of workers) await w.close();
});

/** Failures that migrate, on whichever leg the call is. */
const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.constantFrom(500, 502, 503).map((status) => ({ kind: 'refuse' as const, status })),
  fc.record({ kind: fc.constantFrom('reset' as const, 'cut' as const, 'abort' as const, 'error' as const, 'end' as const), afterFrames: fc.integer({ min: 0, max: 30 }) }),
);

const requestArb = fc.record({
  prompt: fc.array(fc.integer({ min: 3, max: 31999 }), { minLength: 1, maxLength: 24 }),
  budget: fc.integer({ min: 1, max: 30 }),
  ignoreEos: fc.boolean(),
  stream: fc.boolean(),
  logprob: fc.boolean(),
  temperature: fc.constantFrom(undefined, 0, 0.7),
});

describe('P/D law: equivalence over both legs', () => {
  it(`an answer that reaches the client whole equals the fault-free one; one fault never fails a request (${RUNS} cases)`, async () => {
    const roomsSeen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(requestArb, fc.array(faultArb, { maxLength: 3 }), async (r, schedule) => {
        const sp: Record<string, unknown> & DecodeParams = { max_new_tokens: r.budget, ignore_eos: r.ignoreEos };
        if (r.temperature !== undefined) sp.temperature = r.temperature;
        const body = (id: string) => ({ rid: id, input_ids: r.prompt, sampling_params: sp, stream: r.stream, ...(r.logprob ? { return_logprob: true, top_logprobs_num: 2 } : {}) });
        const id = `pdlaw-${process.pid}-${caseNo++}`;
        const clean = `${id}-clean`;
        book.schedules.set(id, schedule);
        const faulty = await send(router.url, body(id), r.stream);
        const base = await send(router.url, body(clean), r.stream);
        expect(base.error).toBeNull();
        expect(base.body!.output_ids).toEqual(runModel(r.prompt, sp).output_ids);
        if (schedule.length <= 1) expect(faulty.error, JSON.stringify(schedule)).toBeNull();
        if (faulty.error === null) expect(essence(faulty.body!)).toEqual(essence(base.body!));
        await waitFor(() => router.traceRows({ request: id, kind: 'request' })[0]);
        const rows = router.traceRows({ request: id, kind: 'attempt' }) as AttemptRow[];
        for (const row of rows) {
          expect(row.prefill_worker).toEqual(expect.any(String));
          expect(roomsSeen.has(row.bootstrap_room!), `room ${row.bootstrap_room} used twice`).toBe(false);
          roomsSeen.add(row.bootstrap_room!);
        }
      }),
      params(),
    );
    // No worker saw a room twice (a room sent again crashes SGLang's schedulers, sglang #40125).
    for (const w of workers) expect(w.stats().pd?.duplicateRooms ?? []).toEqual([]);
    // Every attempt, whichever way it ended, gave its room back: the issuer holds its ring only.
    expect(ROOMS.inFlight).toBe(0);
    expect(ROOMS.remembered).toBeLessThanOrEqual(4096);
  }, 240_000); // ~26 s for 200 cases on an idle machine; the shared CI boxes run several files at once
});

async function send(url: string, body: Record<string, unknown>, stream: boolean) {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return foldText(res.status, res.headers, await res.text(), stream, false);
}
