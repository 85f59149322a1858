// Nothing a client sends can take a worker out (migration.md, "Blame needs evidence"), and a
// deadline honours what the request asked for. Real processes: the router as `baton router`,
// simulated SGLang workers as `baton sim` children that do what SGLang does with a request its
// SamplingParams cannot be built from (a TypeError its generate handler does not catch: a unary
// request gets Starlette's 500, a stream is cut after its 200 headers).
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, stream, traceRows, waitUntil, type RouterProc } from '../router/harness/procs.ts';

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});

async function cluster(opts: Parameters<typeof startCluster>[0]): Promise<SimCluster> {
  const c = await startCluster(opts);
  started.push(c);
  return c;
}

async function router(c: SimCluster, extra: string[] = []): Promise<RouterProc> {
  const r = await spawnRouter([...c.workers().flatMap((w) => ['--worker', w.url]), '--health-interval-ms', '1000', ...extra]);
  started.push(r);
  // Every worker probed (its format, its advertised defaults) before the test sends anything.
  await waitUntil(async () => (await workers(r)).every((w) => w.format === 'sglang'), 10_000, 'workers probed');
  return r;
}

interface WorkerView {
  url: string;
  health: string;
  circuit: string;
  format: string | null;
}

async function workers(r: RouterProc): Promise<WorkerView[]> {
  return ((await (await fetch(r.url + '/workers')).json()) as { workers: WorkerView[] }).workers;
}

async function unary(url: string, body: Record<string, unknown>): Promise<{ status: number; contentType: string | null; json: Record<string, unknown> }> {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, contentType: res.headers.get('content-type'), json: (await res.json()) as Record<string, unknown> };
}

/** The in-band error frames and [DONE] of a stream, raw. */
async function rawStream(url: string, body: Record<string, unknown>): Promise<{ status: number; frames: string[] }> {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
  const text = await res.text();
  return { status: res.status, frames: text.split('\n\n').filter(Boolean) };
}

const PROMPT = [11, 22, 33, 44, 55, 66, 77];
const GOOD = { input_ids: PROMPT, sampling_params: { max_new_tokens: 24, ignore_eos: true } };
const GOOD_REF = runModel(PROMPT, { max_new_tokens: 24, ignore_eos: true });

describe('a request every worker fails before its first token', () => {
  // Workers of SGLang 2025, whose SamplingParams has no sampling_seed: the router lets it through
  // (a newer SGLang takes it), and every such worker raises the TypeError alike. Greedy, so the
  // seed does not make the request stateful: it may migrate.
  const BAD = { input_ids: PROMPT, sampling_params: { max_new_tokens: 24, temperature: 0, sampling_seed: 5 } };

  it('benches no worker: it is tried on one more, then the client gets the error naming the evidence; other traffic keeps flowing', async () => {
    const c = await cluster({ workers: 3, port: 0, tokenIntervalMs: 2, legacySampling: true });
    const r = await router(c);
    for (let i = 0; i < 6; i++) {
      const rid = `bad-${i}`;
      if (i % 2 === 0) {
        const a = await unary(r.url, { ...BAD, rid });
        // 500: what SGLang itself answers a unary request whose handler raised.
        expect(a.status).toBe(500);
        expect((a.json.error as { message: string }).message).toMatch(/failed the same way on 2 workers before any token.*no worker was benched/);
      } else {
        const s = await stream(r.url, { ...BAD, rid });
        expect(s.status).toBe(200);
        expect(s.frames).toEqual([]);
        expect(s.error).toMatch(/failed the same way on 2 workers before any token.*no worker was benched/);
        expect(s.done).toBe(true);
      }
      const rows = (await traceRows(r.url, `request=${rid}&kind=attempt`)).sort((x, y) => (x.attempt as number) - (y.attempt as number));
      expect(rows.map((x) => [x.error_kind, x.outcome])).toEqual([
        ['stream_broken', 'failed'],
        ['stream_broken', 'failed'],
      ]);
      expect(rows[0]!.worker).not.toBe(rows[1]!.worker);
      for (const row of rows) expect(row.error_evidence).toMatch(/before any token, no evidence against the worker \(a health probe right after: GET \/health answered 200\).*not counted against it/);
      expect((await workers(r)).map((w) => [w.health, w.circuit])).toEqual([
        ['healthy', 'closed'],
        ['healthy', 'closed'],
        ['healthy', 'closed'],
      ]);
    }
    // Every worker still takes work: concurrent good requests all answered, token-exact.
    const answers = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => unary(r.url, { ...GOOD, rid: `good-${i}` })));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.json.output_ids).toEqual(GOOD_REF.output_ids);
    }
    const used = new Set((await traceRows(r.url, 'kind=attempt')).filter((x) => String(x.request_id).startsWith('good-')).map((x) => x.worker));
    expect(used.size).toBeGreaterThan(1);
  }, 60_000);

  it('a worker that really dies before the first token is benched on the probe\'s evidence, and the request goes on, token-exact', async () => {
    // A long prompt and a slow prefill: the request is in prefill, with its 200 headers sent and no
    // token, when its worker is killed.
    const prompt = Array.from({ length: 1500 }, (_, i) => 3 + ((i * 7919) % 30000));
    const c = await cluster({ workers: 2, port: 0, tokenIntervalMs: 2, prefillUsPerToken: 1500 });
    const r = await router(c);
    const body = { input_ids: prompt, sampling_params: { max_new_tokens: 16, ignore_eos: true }, rid: 'dies-in-prefill' };
    const pending = stream(r.url, body);
    let victim = -1;
    await waitUntil(async () => {
      const busy = (await workers(r)).find((w) => (w as unknown as { in_flight: number }).in_flight > 0);
      victim = busy ? c.workers().findIndex((w) => w.url === busy.url) : -1;
      return victim >= 0;
    }, 10_000, 'the request in flight');
    await c.kill(victim);
    const a = await pending;
    expect(a.error).toBeNull();
    expect(a.done).toBe(true);
    expect(a.frames.at(-1)!.output_ids).toEqual(runModel(prompt, { max_new_tokens: 16, ignore_eos: true }).output_ids);
    const rows = (await traceRows(r.url, 'request=dies-in-prefill&kind=attempt')).sort((x, y) => (x.attempt as number) - (y.attempt as number));
    const dead = c.workers()[victim]!.url;
    expect(rows.map((x) => [x.worker === dead, x.outcome, x.error_kind, x.tokens])).toEqual([
      [true, 'failed', 'stream_broken', 0],
      [false, 'finished', null, 16],
    ]);
    // Refused, or reset while the dying process's listener goes away.
    expect(rows[0]!.error_evidence).toMatch(/before any token, a health probe right after failed \(GET \/health failed: ECONN(REFUSED|RESET).*\): the worker's fault/);
    expect((await workers(r)).find((w) => w.url === dead)!.health).not.toBe('healthy');
  }, 60_000);
});

describe('a sampling key SGLang does not take', () => {
  it('is refused at admission with SGLang\'s own TypeError wording, before any worker sees it', async () => {
    const c = await cluster({ workers: 2, port: 0, tokenIntervalMs: 2 });
    const r = await router(c);
    const cases: [string, string, Record<string, unknown> | Record<string, unknown>[]][] = [
      ['openai-max-tokens', 'max_tokens', { max_tokens: 8 }],
      ['typo', 'max_new_token', { temperature: 0, max_new_token: 8 }],
      ['batch', 'seed', [{ max_new_tokens: 4 }, { max_new_tokens: 4, seed: 3 }]],
    ];
    for (const [rid, key, sp] of cases) {
      const message = `SamplingParams.__init__() got an unexpected keyword argument '${key}'`;
      const input = Array.isArray(sp) ? { input_ids: [PROMPT, PROMPT] } : { input_ids: PROMPT };
      // Unary: SGLang's answer to a request's ValueError (http_server.py generate_request, _create_error_response).
      const a = await unary(r.url, { ...input, sampling_params: sp, rid: `${rid}-u` });
      expect(a.status).toBe(400);
      expect(a.json).toEqual({ error: { message } });
      // Stream: 200, SGLang's in-band ValueError frame, then [DONE].
      const s = await rawStream(r.url, { ...input, sampling_params: sp, rid: `${rid}-s` });
      expect(s.status).toBe(200);
      expect(s.frames).toEqual([`data: ${JSON.stringify({ error: { message, type: 'invalid_request_error', code: 400, retryable: false } })}`, 'data: [DONE]']);
    }
    // No worker saw any of them, and none is benched.
    for (let i = 0; i < 2; i++) expect((await c.stats(i)).requestsStarted).toBe(0);
    expect(await traceRows(r.url, 'kind=attempt')).toEqual([]);
    expect((await workers(r)).map((w) => w.health)).toEqual(['healthy', 'healthy']);
    // Every key a supported SGLang version takes still passes.
    const ok = await unary(r.url, { input_ids: PROMPT, sampling_params: { max_new_tokens: 4, stream_interval: null, sampling_seed: null, stop_regex: null, no_stop_trim: false }, rid: 'known-keys' });
    expect(ok.status).toBe(200);
  }, 60_000);
});

describe('stream_interval', () => {
  // 20 ms a token and a 300 ms inter-token deadline: one frame per 30 tokens is 600 ms of silence.
  const STALL = ['--inter-token-timeout-ms', '300', '--first-token-timeout-ms', '5000'];
  const sp = { max_new_tokens: 70, ignore_eos: true };
  const ref = runModel(PROMPT, sp);

  async function expectOneQuietAttempt(r: RouterProc, rid: string): Promise<void> {
    const rows = await traceRows(r.url, `request=${rid}&kind=attempt`);
    expect(rows.map((x) => [x.outcome, x.error_kind])).toEqual([['finished', null]]);
  }

  it('of the request (both places SGLang reads it) spaces frames without a stall, a migration or a bench', async () => {
    const c = await cluster({ workers: 2, port: 0, tokenIntervalMs: 20 });
    const r = await router(c, STALL);
    const s = await stream(r.url, { input_ids: PROMPT, sampling_params: { ...sp, stream_interval: 30 }, rid: 'si-stream' });
    expect(s.error).toBeNull();
    expect(s.frames.map((f) => (f.output_ids as number[]).length)).toEqual([1, 31, 61, 70]);
    expect(s.frames.at(-1)!.output_ids).toEqual(ref.output_ids);
    await expectOneQuietAttempt(r, 'si-stream');
    // A unary request streams from its worker too: the same frames, the same deadline.
    const u = await unary(r.url, { input_ids: PROMPT, sampling_params: { ...sp, stream_interval: 30 }, rid: 'si-unary' });
    expect(u.status).toBe(200);
    expect(u.json.output_ids).toEqual(ref.output_ids);
    await expectOneQuietAttempt(r, 'si-unary');
    expect((await workers(r)).map((w) => w.health)).toEqual(['healthy', 'healthy']);
  }, 60_000);

  it('the workers advertise (preferred_sampling_params, merged under the request\'s) counts too', async () => {
    const c = await cluster({ workers: 2, port: 0, tokenIntervalMs: 20, preferredSamplingParams: { stream_interval: 30 } });
    const r = await router(c, STALL);
    const s = await stream(r.url, { input_ids: PROMPT, sampling_params: sp, rid: 'si-preferred' });
    expect(s.error).toBeNull();
    expect(s.frames.map((f) => (f.output_ids as number[]).length)).toEqual([1, 31, 61, 70]);
    expect(s.frames.at(-1)!.output_ids).toEqual(ref.output_ids);
    await expectOneQuietAttempt(r, 'si-preferred');
    expect((await workers(r)).map((w) => w.health)).toEqual(['healthy', 'healthy']);
  }, 60_000);
});
