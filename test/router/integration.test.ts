// Scenarios with real processes: worker processes killed with SIGKILL under a router process,
// in SSE and unary, cumulative and incremental; the limits that stop migration; the refusals
// that keep a request on one worker; a client cancel; a cluster with no worker left.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, stream, traceRows, waitForTokens, waitUntil, type RouterProc } from './harness/procs.ts';

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});
afterAll(async () => {
  while (started.length) await started.pop()!.stop();
});

async function cluster(workers: number, opts: { incremental?: boolean; tokenIntervalMs?: number } = {}): Promise<SimCluster> {
    const c = await startCluster({ workers, port: 0, tokenIntervalMs: opts.tokenIntervalMs ?? 15, incremental: opts.incremental });
  started.push(c);
  return c;
}

async function router(urls: string[], extra: string[] = []): Promise<RouterProc> {
  const r = await spawnRouter([...urls.flatMap((u) => ['--worker', u]), '--health-interval-ms', '500', ...extra]);
  started.push(r);
  return r;
}

/** Index of the worker of `c` that holds the request in flight. */
async function busyWorker(r: RouterProc, c: SimCluster): Promise<number> {
  let idx = -1;
  let seen = '';
  await waitUntil(async () => {
    const { workers } = (await (await fetch(r.url + '/workers')).json()) as { workers: { url: string; in_flight: number }[] };
    seen = JSON.stringify(workers.map((w) => [w.url, w.in_flight])) + ' vs ' + JSON.stringify(c.workers().map((w) => w.url));
    const busy = workers.find((w) => w.in_flight > 0);
    idx = busy ? c.workers().findIndex((w) => w.url === busy.url) : -1;
    return idx >= 0;
  }, 10_000, 'a busy worker').catch(async (e: Error) => {
    const rows = await (await fetch(r.url + '/traces?format=jsonl')).text();
    throw new Error(`${e.message}: ${seen}\n${rows}`);
  });
  return idx;
}

const PROMPT = [11, 22, 33, 44, 55, 66, 77];
// 200 tokens at 15 ms: about 3 s per answer, so a test finds the busy worker and kills it
// mid-stream even when the machine is loaded.
const BUDGET = 200;
const BODY = { input_ids: PROMPT, sampling_params: { max_new_tokens: BUDGET, ignore_eos: true }, return_logprob: true, top_logprobs_num: 2 };
const REF = runModel(PROMPT, { max_new_tokens: BUDGET, ignore_eos: true, top_logprobs_num: 2 });

function foldIncremental(frames: Record<string, unknown>[]) {
  return {
    ids: frames.flatMap((f) => f.output_ids as number[]),
    lps: frames.flatMap((f) => ((f.meta_info as Record<string, unknown>).output_token_logprobs as [number][]).map((x) => x[0])),
  };
}

describe.each([
  ['cumulative', false],
  ['incremental', true],
])('%s workers, kill -9 mid-generation', (_name, incremental) => {
  it('SSE: the stream goes on on the survivor, token-exact', async () => {
    const c = await cluster(2, { incremental });
    const r = await router(c.workers().map((w) => w.url));
    let victim = -1;
    const a = await stream(r.url, { ...BODY, rid: `sse-${incremental}` }, async (n) => {
      if (n === 10) {
        victim = await busyWorker(r, c);
        await c.kill(victim);
      }
    });
    expect(victim).toBeGreaterThanOrEqual(0);
    expect(a.error).toBeNull();
    expect(a.done).toBe(true);
    if (incremental) {
      const f = foldIncremental(a.frames);
      expect(f.ids).toEqual(REF.output_ids);
      expect(f.lps).toEqual(REF.output_logprobs);
    } else {
      // Every cumulative chunk extends the previous: no token lost or repeated around the kill.
      for (let i = 1; i < a.frames.length; i++) {
        const prev = a.frames[i - 1]!.output_ids as number[];
        expect((a.frames[i]!.output_ids as number[]).slice(0, prev.length)).toEqual(prev);
      }
      expect(a.frames.at(-1)!.output_ids).toEqual(REF.output_ids);
    }
    const rows = await traceRows(r.url, `request=sse-${incremental}&kind=attempt`);
    expect(rows.map((x) => x.outcome)).toEqual(['failed', 'finished']);
    expect(rows[0]!.worker).toBe(c.workers()[victim]!.url);
    expect(rows[0]!.tokens as number).toBeGreaterThanOrEqual(10);
  });

  it('unary: a unary request migrates mid-generation too', async () => {
    const c = await cluster(2, { incremental });
    const r = await router(c.workers().map((w) => w.url));
    const pending = fetch(r.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...BODY, rid: `unary-${incremental}` }) });
    const victim = await busyWorker(r, c);
    await waitForTokens(r.url, `unary-${incremental}`, 10);
    await c.kill(victim);
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.headers.get('x-baton-migrations')).toBe('1');
    const body = (await res.json()) as { output_ids: number[]; meta_info: Record<string, unknown> };
    expect(body.output_ids).toEqual(REF.output_ids);
    expect((body.meta_info.output_token_logprobs as [number][]).map((x) => x[0])).toEqual(REF.output_logprobs);
    expect(body.meta_info.completion_tokens).toBe(BUDGET);
    const rows = await traceRows(r.url, `request=unary-${incremental}&kind=attempt`);
    expect(rows).toHaveLength(2);
    expect(rows[0]!.tokens as number).toBeGreaterThan(0);
  });
});

describe('mixed streaming modes', () => {
  it.each([
    ['cumulative → incremental', false],
    ['incremental → cumulative', true],
  ])('%s: the client keeps attempt 0 mode', async (_n, firstIncremental) => {
    const first = await cluster(1, { incremental: firstIncremental });
    const second = await cluster(1, { incremental: !firstIncremental });
    const r = await router([first.workers()[0]!.url]);
    const a = await stream(r.url, { ...BODY, rid: 'mixed' }, async (n) => {
      if (n === 8) {
        await fetch(r.url + '/workers', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: second.workers()[0]!.url }) });
        await first.kill(0);
      }
    });
    expect(a.error).toBeNull();
    const ids = firstIncremental ? foldIncremental(a.frames).ids : (a.frames.at(-1)!.output_ids as number[]);
    expect(ids).toEqual(REF.output_ids);
    if (firstIncremental) expect(foldIncremental(a.frames).lps).toEqual(REF.output_logprobs);
    else for (const f of a.frames) expect((f.output_ids as number[]).length).toBe((f.meta_info as Record<string, unknown>).completion_tokens);
  });
});

describe('where migration stops', () => {
  it('--migration-max-seq-len: prompt + replayed too long ends with a clear error, no continuation', async () => {
    const c = await cluster(2);
    const r = await router(c.workers().map((w) => w.url), ['--migration-max-seq-len', String(PROMPT.length + 5)]);
    const a = await stream(r.url, { ...BODY, rid: 'seqlen' }, async (n) => {
      if (n === 10) await c.kill(await busyWorker(r, c));
    });
    expect(a.error).toMatch(/max-seq-len/);
    expect(a.frames.length).toBeGreaterThanOrEqual(10);
    const rows = await traceRows(r.url, 'request=seqlen&kind=attempt');
    expect(rows).toHaveLength(1);
    const metrics = await (await fetch(r.url + '/metrics')).text();
    expect(metrics).toMatch(/baton_migration_max_seq_len_exceeded_total 1/);
  });

  it('stateful sampling (sampling_seed, temperature > 0) is not continued: the failure reaches the client', async () => {
    const c = await cluster(2);
    const r = await router(c.workers().map((w) => w.url));
    const a = await stream(r.url, { input_ids: PROMPT, rid: 'seeded', sampling_params: { max_new_tokens: 400, temperature: 0.7, sampling_seed: 42, ignore_eos: true } }, async (n) => {
      if (n === 5) await c.kill(await busyWorker(r, c));
    });
    expect(a.error).toMatch(/not migratable \(sampling_seed\)/);
    const rows = await traceRows(r.url, 'request=seeded');
    expect(rows.filter((x) => x.kind === 'attempt')).toHaveLength(1);
    const req = rows.find((x) => x.kind === 'request')!;
    expect(req.admitted).toBe(false);
    expect(req.admission_reason).toBe('sampling_seed');
    expect(req.outcome).toBe('failed');
  });

  it('no worker left: a clear 503 before any output, an in-band error after', async () => {
    const c = await cluster(2);
    const r = await router(c.workers().map((w) => w.url));
    const a = await stream(r.url, { ...BODY, rid: 'alldead' }, async (n) => {
      if (n === 3) {
        await c.kill(0);
        await c.kill(1);
      }
    });
    expect(a.error).toMatch(/no worker left|exhausted/);
    expect(a.done).toBe(true);
    await waitUntil(async () => (await fetch(r.url + '/health')).status === 503, 10_000, '/health to report 503');
    const res = await fetch(r.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...BODY, stream: true }) });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/no healthy worker/);
  });
});

it('a client that disconnects has its upstream attempt aborted at once and is never migrated', async () => {
  const c = await cluster(2, { tokenIntervalMs: 20 });
  const r = await router(c.workers().map((w) => w.url));
  const ac = new AbortController();
  let victim = -1;
  await stream(r.url, { ...BODY, rid: 'cancel-me', sampling_params: { max_new_tokens: 500, ignore_eos: true } }, async (n) => {
    if (n === 5) {
      victim = await busyWorker(r, c);
      ac.abort();
    }
  }, ac.signal).catch((e: Error) => expect(e.name).toBe('AbortError'));
  const t0 = Date.now();
  await waitUntil(async () => (await c.stats(victim)).inFlight === 0, 5_000, 'the worker to drop the request');
  expect(Date.now() - t0).toBeLessThan(1500);
  const stats = await c.stats(victim);
  expect(stats.requestsAborted + stats.clientDisconnects).toBeGreaterThanOrEqual(1);
  expect(stats.tokensGenerated).toBeLessThan(100);
  const rows = await traceRows(r.url, 'request=cancel-me');
  expect(rows.filter((x) => x.kind === 'attempt').map((x) => x.outcome)).toEqual(['cancelled']);
  expect(rows.find((x) => x.kind === 'request')!.outcome).toBe('cancelled');
  const other = await c.stats(1 - victim);
  expect(other.rids.some((x) => x.startsWith('cancel-me'))).toBe(false);
});
