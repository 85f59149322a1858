// Where a real SGLang cluster differs from a friendly one: regression tests with real processes
// (a router process over simulated worker processes) for the edges of issue "SGLang fidelity at
// the edges". Each test names the finding it pins down.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startCluster, type ClusterOptions, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { parseUpstreamRid } from '../../router/migration/rid.ts';
import { spawnRouter, stream, traceRows, waitUntil, type RouterProc } from './harness/procs.ts';

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});
afterAll(async () => {
  while (started.length) await started.pop()!.stop();
});

async function cluster(workers: number, opts: Partial<ClusterOptions> = {}): Promise<SimCluster> {
  const c = await startCluster({ workers, port: 0, tokenIntervalMs: 10, ...opts });
  started.push(c);
  return c;
}

async function router(urls: string[], extra: string[] = []): Promise<RouterProc> {
  const r = await spawnRouter([...urls.flatMap((u) => ['--worker', u]), '--health-interval-ms', '300', ...extra]);
  started.push(r);
  return r;
}

async function addWorker(r: RouterProc, url: string): Promise<void> {
  const res = await fetch(r.url + '/workers', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url }) });
  expect(res.status).toBe(200);
}

async function workers(r: RouterProc): Promise<{ url: string; health: string; circuit: string; in_flight: number }[]> {
  return ((await (await fetch(r.url + '/workers')).json()) as { workers: { url: string; health: string; circuit: string; in_flight: number }[] }).workers;
}

/** Kill the cluster worker that holds a request right now. */
async function killBusy(r: RouterProc, c: SimCluster): Promise<void> {
  let idx = -1;
  await waitUntil(async () => {
    const busy = (await workers(r)).find((w) => w.in_flight > 0 && c.workers().some((x) => x.url === w.url));
    idx = busy ? c.workers().findIndex((w) => w.url === busy.url) : -1;
    return idx >= 0;
  }, 10_000, 'a busy worker');
  await c.kill(idx);
}

/**
 * A proxy in front of one worker that lets attempt 0 through and answers continuations (rids
 * of attempt >= 1) with `onContinuation`: a 429 from a proxy, a refusal frame, ...
 */
async function continuationProxy(upstream: string, onContinuation: (body: Record<string, unknown>, res: ServerResponse) => Promise<void>): Promise<string> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const raw = Buffer.concat(chunks);
      if (req.url === '/generate') {
        const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
        const attempt = typeof body.rid === 'string' ? (parseUpstreamRid(body.rid)?.attempt ?? 0) : 0;
        if (attempt >= 1) return onContinuation(body, res);
      }
      const up = await fetch(upstream + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: req.method === 'GET' ? undefined : new Uint8Array(raw) });
      res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
      for await (const c of up.body as unknown as AsyncIterable<Uint8Array>) res.write(c);
      res.end();
    })().catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  started.push({ stop: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * A proxy that notices a vanished client late, as SGLang does (its tokenizer manager checks for a
 * disconnect only when no output came for a while): the upstream request runs on for `lagMs`
 * after the router closed its connection. Everything else passes at once.
 */
async function lateNoticingProxy(upstream: string, lagMs: number): Promise<string> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const ac = new AbortController();
      if (req.url === '/generate') res.on('close', () => setTimeout(() => ac.abort(), lagMs));
      const up = await fetch(upstream + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: req.method === 'GET' ? undefined : new Uint8Array(Buffer.concat(chunks)), signal: ac.signal });
      res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
      for await (const c of up.body as unknown as AsyncIterable<Uint8Array>) if (!res.destroyed) res.write(c);
      res.end();
    })().catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  started.push({ stop: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const PROMPT = [11, 22, 33, 44, 55, 66, 77];
const BUDGET = 120;
const SP = { max_new_tokens: BUDGET, ignore_eos: true, temperature: 0 };
const REF = runModel(PROMPT, SP);

describe('finding 1: a request\'s refusal is the request\'s, whatever it says', () => {
  it.each([
    ['current SGLang (code 400, retryable false)', false],
    ['SGLang before 2026-06 ({"message"} only)', true],
  ])('%s: passed through on one attempt, no worker benched, and the next request is served', async (_name, legacyErrors) => {
    const c = await cluster(2, { tokenIntervalMs: 0, legacyErrors });
    const r = await router(c.workers().map((w) => w.url), ['--bench-ms', '60000']);
    for (let i = 0; i < 4; i++) {
      const s = await stream(r.url, { rid: `bad-s-${i}`, input_ids: [5, 6, 99999], sampling_params: { max_new_tokens: 4 } });
      expect(s.status).toBe(200);
      expect(s.error).toMatch(/greater than the vocab size/);
      expect(s.done).toBe(true);
      const u = await fetch(r.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid: `bad-u-${i}`, input_ids: [5, 6, 99999], sampling_params: { max_new_tokens: 4 } }) });
      expect(u.status).toBe(400);
      expect(((await u.json()) as { error: { message: string } }).error.message).toMatch(/greater than the vocab size/);
      for (const id of [`bad-s-${i}`, `bad-u-${i}`]) {
        const rows = await traceRows(r.url, `request=${id}&kind=attempt`);
        expect(rows.map((x) => [x.outcome, x.error_kind])).toEqual([['failed', 'validation']]);
        expect(rows[0]!.error_evidence).toMatch(/refusal/);
      }
    }
    for (const w of await workers(r)) expect([w.health, w.circuit]).toEqual(['healthy', 'closed']);
    const ok = await stream(r.url, { rid: 'good', input_ids: PROMPT, sampling_params: SP });
    expect(ok.error).toBeNull();
    expect(ok.frames.at(-1)!.output_ids).toEqual(REF.output_ids);
  });
});

describe('finding 2: shared header ids', () => {
  it('two requests with one x-trace-id on one worker both get their own exact answer', async () => {
    const c = await cluster(1);
    const r = await router([c.workers()[0]!.url]);
    const send = (prompt: number[]) => fetch(r.url + '/generate', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-trace-id': 'shared-trace' },
      body: JSON.stringify({ input_ids: prompt, sampling_params: SP }),
    });
    const other = [9, 8, 7, 6];
    const [a, b] = await Promise.all([send(PROMPT), send(other)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.headers.get('x-request-id')).toBe('shared-trace');
    const [ja, jb] = (await Promise.all([a.json(), b.json()])) as { output_ids: number[]; meta_info: { id: string } }[];
    expect(ja!.output_ids).toEqual(REF.output_ids);
    expect(jb!.output_ids).toEqual(runModel(other, SP).output_ids);
    expect([ja!.meta_info.id, jb!.meta_info.id]).toEqual(['shared-trace', 'shared-trace']);
    const rids = (await c.stats(0)).rids.filter((x) => x.startsWith('shared-trace'));
    expect(new Set(rids).size).toBe(2);
  });
});

describe('finding 3: a cancel aborts nothing but its own request', () => {
  it('cancelling job-1 leaves job-10 (whose rid starts with job-1) running to its end', async () => {
    const c = await cluster(1, { tokenIntervalMs: 15 });
    // The router's explicit /abort_request then reaches the worker while job-1 still runs there.
    const r = await router([await lateNoticingProxy(c.workers()[0]!.url, 1000)]);
    const long = stream(r.url, { rid: 'job-10', input_ids: PROMPT, sampling_params: SP });
    const ac = new AbortController();
    await stream(r.url, { rid: 'job-1', input_ids: [1, 2, 3], sampling_params: { ...SP, max_new_tokens: 500 } }, (n) => {
      if (n === 5) ac.abort();
    }, ac.signal).catch((e: Error) => expect(e.name).toBe('AbortError'));
    const a = await long;
    expect(a.error).toBeNull();
    const meta = a.frames.at(-1)!.meta_info as { finish_reason: { type: string } };
    expect(meta.finish_reason.type).toBe('length');
    expect(a.frames.at(-1)!.output_ids).toEqual(REF.output_ids);
  });
});

describe('findings 4 and 5: a continuation refused', () => {
  it('a 429 from a proxy on the continuation ends the started stream in band, not never', async () => {
    const first = await cluster(1);
    const second = await cluster(1);
    const proxied = await continuationProxy(second.workers()[0]!.url, async (_body, res) => {
      res.writeHead(429, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'rate limited by the proxy', code: 429 } }));
    });
    const r = await router([first.workers()[0]!.url], ['--bench-ms', '60000']);
    const a = await Promise.race([
      stream(r.url, { rid: 'c429', input_ids: PROMPT, sampling_params: SP }, async (n) => {
        if (n === 6) {
          await addWorker(r, proxied);
          await first.kill(0);
        }
      }),
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error('the client was left waiting')), 20_000)),
    ]);
    expect(a.status).toBe(200);
    expect(a.done).toBe(true);
    expect(a.error).toMatch(/429/);
    const rows = await traceRows(r.url, 'request=c429&kind=attempt');
    expect(rows.map((x) => x.error_kind)).toEqual(['stream_broken', 'http_4xx']);
    // A 4xx is no fault of the worker: it stays in service.
    expect((await workers(r)).find((w) => w.url === proxied)!.health).toBe('healthy');
  });

  it("a continuation's own refusal frame reaches the client rebased: logical id, original prompt, whole output", async () => {
    const first = await cluster(1);
    const second = await cluster(1);
    const proxied = await continuationProxy(second.workers()[0]!.url, async (body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const prompt = (body.input_ids as number[]).length;
      const chunk = { output_ids: [], meta_info: { id: body.rid, finish_reason: { type: 'abort', message: 'injected refusal of the continuation', status_code: 400, err_type: 'BadRequestError' }, prompt_tokens: prompt, completion_tokens: 0, cached_tokens: 0 } };
      res.end(`data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`);
    });
    const r = await router([first.workers()[0]!.url]);
    let seen: number[] = [];
    const a = await stream(r.url, { rid: 'rebased', input_ids: PROMPT, sampling_params: SP }, async (n, f) => {
      seen = f.output_ids as number[];
      if (n === 6) {
        await addWorker(r, proxied);
        await first.kill(0);
      }
    });
    expect(a.done).toBe(true);
    const last = a.frames.at(-1)!;
    const meta = last.meta_info as Record<string, unknown>;
    expect(meta.finish_reason).toMatchObject({ type: 'abort', status_code: 400 });
    expect(meta.id).toBe('rebased');
    expect(meta.prompt_tokens).toBe(PROMPT.length);
    // Cumulative: the refusal's chunk carries the whole output so far, never less than before.
    expect((last.output_ids as number[]).length).toBeGreaterThanOrEqual(6);
    expect(last.output_ids).toEqual(REF.output_ids.slice(0, (last.output_ids as number[]).length));
    expect(meta.completion_tokens).toBe((last.output_ids as number[]).length);
    expect(seen.length).toBeGreaterThan(0);
  });
});

describe('finding 6: continuations land only where they can continue exactly', () => {
  it('skips a worker on other weights and one serving another model; none left is a clear error', async () => {
    const first = await cluster(1);
    const v2 = await cluster(1, { weightVersion: 'v2' });
    const otherModel = await cluster(1, { modelPath: 'other-model' });
    const good = await cluster(1);
    const r = await router([first.workers()[0]!.url]);
    const a = await stream(r.url, { rid: 'pinned', input_ids: PROMPT, sampling_params: SP }, async (n) => {
      if (n === 6) {
        await addWorker(r, v2.workers()[0]!.url);
        await addWorker(r, otherModel.workers()[0]!.url);
        await addWorker(r, good.workers()[0]!.url);
        await first.kill(0);
      }
    });
    expect(a.error).toBeNull();
    expect(a.frames.at(-1)!.output_ids).toEqual(REF.output_ids);
    const rows = await traceRows(r.url, 'request=pinned&kind=attempt');
    expect(rows.map((x) => x.worker)).toEqual([first.workers()[0]!.url, good.workers()[0]!.url]);

    // Only the other-weights worker left: the client is told why.
    const r2 = await router([good.workers()[0]!.url]);
    const b = await stream(r2.url, { rid: 'stranded', input_ids: PROMPT, sampling_params: SP }, async (n) => {
      if (n === 6) {
        await addWorker(r2, v2.workers()[0]!.url);
        await good.kill(0);
      }
    });
    expect(b.done).toBe(true);
    expect(b.error).toMatch(/weight_version v2/);
  });
});

describe('findings 7 and 8: admission of worker defaults, and the context limit', () => {
  it('an advertised repetition penalty makes a request stateful; session_params too', async () => {
    const c = await cluster(1, { tokenIntervalMs: 0, preferredSamplingParams: { max_new_tokens: 8, repetition_penalty: 1.1 } });
    const r = await router([c.workers()[0]!.url]);
    await stream(r.url, { rid: 'penalized', input_ids: PROMPT });
    const c2 = await cluster(1, { tokenIntervalMs: 0 });
    const r2 = await router([c2.workers()[0]!.url]);
    await stream(r2.url, { rid: 'session', input_ids: PROMPT, sampling_params: { max_new_tokens: 4 }, session_params: { id: 's-1' } });
    expect((await traceRows(r.url, 'request=penalized&kind=request'))[0]).toMatchObject({ admitted: false, admission_reason: 'repetition_penalty' });
    expect((await traceRows(r2.url, 'request=session&kind=request'))[0]).toMatchObject({ admitted: false, admission_reason: 'session_params' });
  });

  it('an advertised min_new_tokens is reduced on the continuation', async () => {
    const first = await cluster(1, { preferredSamplingParams: { max_new_tokens: 60, min_new_tokens: 40 } });
    const second = await cluster(1, { preferredSamplingParams: { max_new_tokens: 60, min_new_tokens: 40 } });
    const bodies: Record<string, unknown>[] = [];
    const proxied = await continuationProxy(second.workers()[0]!.url, async (body, res) => {
      bodies.push(body);
      const up = await fetch(second.workers()[0]!.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'text/event-stream' });
      for await (const ch of up.body as unknown as AsyncIterable<Uint8Array>) res.write(ch);
      res.end();
    });
    const r = await router([first.workers()[0]!.url]);
    const a = await stream(r.url, { rid: 'minnew', input_ids: PROMPT, sampling_params: { temperature: 0 } }, async (n) => {
      if (n === 10) {
        await addWorker(r, proxied);
        await first.kill(0);
      }
    });
    expect(a.error).toBeNull();
    expect(a.frames.at(-1)!.output_ids).toEqual(runModel(PROMPT, { max_new_tokens: 60, min_new_tokens: 40, temperature: 0 }).output_ids);
    expect(bodies).toHaveLength(1);
    const replayed = (bodies[0]!.input_ids as number[]).length - PROMPT.length;
    expect(bodies[0]!.sampling_params).toMatchObject({ max_new_tokens: 60 - replayed, min_new_tokens: Math.max(0, 40 - replayed) });
  });

  it("a worker-default budget near the context limit is clamped as SGLang's scheduler clamps it", async () => {
    const c = await cluster(2, { preferredSamplingParams: { max_new_tokens: 128 } });
    const r = await router(c.workers().map((w) => w.url));
    const info = (await (await fetch(c.workers()[0]!.url + '/server_info')).json()) as { context_length: number };
    // 40 positions left: SGLang's scheduler grants min(128, (context_length - 1) - prompt - 1) = 38.
    const prompt = Array.from({ length: info.context_length - 40 }, (_, i) => 3 + ((i * 7919) % 31000));
    const a = await stream(r.url, { rid: 'near-limit', input_ids: prompt, sampling_params: { temperature: 0, ignore_eos: true } }, async (n) => {
      if (n === 10) await killBusy(r, c);
    });
    expect(a.error).toBeNull();
    const meta = a.frames.at(-1)!.meta_info as Record<string, unknown>;
    expect(meta.finish_reason).toEqual({ type: 'length', length: 38 });
    expect(a.frames.at(-1)!.output_ids).toEqual(runModel(prompt, { max_new_tokens: 38, temperature: 0, ignore_eos: true }).output_ids);
    expect(await traceRows(r.url, 'request=near-limit&kind=attempt')).toHaveLength(2);
  }, 90_000);
});
