// P/D: the first-token deadline against a prefill queue. Real processes: the router in
// --pd-disaggregation mode over two prefill and two decode simulated SGLang workers that prefill
// one request at a time (--serial-prefill), so ten concurrent long prompts queue for seconds on
// healthy prefill servers. A queue longer than --pd-first-token-timeout-ms is load, not a fault:
// no request may fail and no server may be benched for it. A prefill server that is hung (its
// health check and its load report unanswered) is still the prefill leg's failure.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, traceRows, waitUntil, type RouterProc } from './harness/procs.ts';

const DEADLINE = 1200;
/** 2000 prompt tokens at 250 µs: each prefill takes 500 ms, five in a row take 2.5 s. */
const PROMPT_TOKENS = 2000;

let cluster: SimCluster;
let router: RouterProc;

function prompt(i: number): number[] {
  return Array.from({ length: PROMPT_TOKENS }, (_, j) => 100 + ((i * 7919 + j * 104729) % 30000));
}

interface WorkerView {
  url: string;
  pd_role: string | null;
  health: string;
  circuit: string;
}

async function workers(): Promise<WorkerView[]> {
  const ws = (await (await fetch(`${router.url}/workers`)).json()) as { workers: WorkerView[] };
  return ws.workers;
}

beforeAll(async () => {
  cluster = await startCluster({ workers: 4, roles: ['prefill', 'prefill', 'decode', 'decode'], port: 0, tokenIntervalMs: 2, prefillUsPerToken: 250, serialPrefill: true });
  const ws = cluster.workers();
  router = await spawnRouter([
    '--pd-disaggregation',
    ...ws.filter((w) => w.role === 'prefill').flatMap((w) => ['--prefill', w.url, String(w.bootstrapPort)]),
    ...ws.filter((w) => w.role === 'decode').flatMap((w) => ['--decode', w.url]),
    // Each side in turn: five prompts queue on each prefill server.
    '--policy', 'round_robin',
    '--pd-first-token-timeout-ms', String(DEADLINE),
    '--health-interval-ms', '300',
  ]);
}, 60_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

describe('the P/D first-token deadline and a prefill queue', () => {
  it('ten concurrent long prompts queued past the deadline on healthy prefill servers: all ten exact, none moved, no server benched', async () => {
    const params = { max_new_tokens: 8, ignore_eos: true };
    const ids = Array.from({ length: 10 }, (_, i) => `pdq-${i}`);
    const benched = new Set<string>();
    let watching = true;
    // The bench is short-lived: watch the workers while the prompts run, not only at the end.
    const watch = (async () => {
      while (watching) {
        for (const w of await workers()) if (w.health !== 'healthy' || w.circuit !== 'closed') benched.add(`${w.url} ${w.health}/${w.circuit}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const answers = await Promise.all(ids.map(async (rid, i) => {
      const res = await fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid, input_ids: prompt(i), sampling_params: params }) });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    }));
    watching = false;
    await watch;
    console.log(`P/D deadline ${DEADLINE} ms over a prefill queue: statuses ${answers.map((a) => a.status).join(' ')}; benched while it ran: ${[...benched].join(', ') || 'none'}`);
    for (const [i, a] of answers.entries()) {
      expect(a.status, `${ids[i]}: ${JSON.stringify(a.json).slice(0, 300)}`).toBe(200);
      expect(a.json.output_ids, ids[i]).toEqual(runModel(prompt(i), params).output_ids);
    }
    expect([...benched]).toEqual([]);
    let late = 0;
    for (const rid of ids) {
      const rows = await traceRows(router.url, `request=${rid}&kind=attempt`);
      expect(rows.length, `${rid}: ${JSON.stringify(rows.map((r) => [r.outcome, r.error_kind, r.error_evidence]))}`).toBe(1);
      expect(rows[0]).toMatchObject({ outcome: 'finished' });
      expect(rows[0]!.failed_leg).toBeUndefined();
      // The prefill leg answered on its own, within the attempt: its own end is on the row.
      const legEnd = rows[0]!.prefill_ended_at as number;
      expect(legEnd, rid).toEqual(expect.any(Number));
      expect(legEnd).toBeGreaterThanOrEqual(rows[0]!.started_at as number);
      expect(legEnd).toBeLessThanOrEqual(rows[0]!.ended_at as number);
      if ((rows[0]!.ttft_ms as number) > DEADLINE) late++;
    }
    // The deadline did pass for the back of each queue (the test is about those).
    console.log(`P/D deadline ${DEADLINE} ms over a prefill queue: ${late} of 10 first tokens came after it; 10/10 exact, none moved, none benched`);
    expect(late).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('a hung prefill server (health check and load report unanswered) is still the prefill leg\'s failure: the request moves on, exact', async () => {
    await waitUntil(async () => (await workers()).every((w) => w.health === 'healthy'), 15_000, 'every worker healthy');
    const hung = cluster.workers().find((w) => w.role === 'prefill')!;
    await cluster.fault(hung.index, { kind: 'hang' });
    try {
      const params = { max_new_tokens: 8, ignore_eos: true };
      const ids = ['pdh-0', 'pdh-1'];
      const answers = await Promise.all(ids.map(async (rid, i) => {
        const res = await fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid, input_ids: prompt(50 + i).slice(0, 40), sampling_params: params }) });
        return { status: res.status, json: (await res.json()) as Record<string, unknown> };
      }));
      let onHung = 0;
      for (const [i, a] of answers.entries()) {
        expect(a.status, JSON.stringify(a.json).slice(0, 300)).toBe(200);
        expect(a.json.output_ids).toEqual(runModel(prompt(50 + i).slice(0, 40), params).output_ids);
        const rows = (await traceRows(router.url, `request=${ids[i]}&kind=attempt`)).sort((x, y) => (x.attempt as number) - (y.attempt as number));
        if (rows[0]!.prefill_worker !== hung.url) continue;
        onHung++;
        expect(rows[0]).toMatchObject({ outcome: 'failed', error_kind: 'prefill_failed', failed_leg: 'prefill' });
        expect(rows[0]!.error_evidence).toMatch(/P\/D first-token deadline/);
        // The hung leg never ended on its own: the attempt's end closed it.
        expect(rows[0]!.prefill_ended_at).toBeNull();
        expect(rows[1]!.prefill_worker).not.toBe(hung.url);
        expect(rows[1]!.prefill_ended_at).toEqual(expect.any(Number));
      }
      expect(onHung).toBe(1); // round_robin: one of the two went to the hung server
    } finally {
      await cluster.fault(hung.index, { kind: 'clear' });
    }
  }, 60_000);
});
