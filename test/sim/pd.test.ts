// The simulator's P/D roles, with real worker processes and a plain HTTP client that sends the
// same body to both legs at once, as the SGLang gateway does (pd_router.rs): the prefill answers
// with its one token and finish length 0 once the decode has the KV, the decode streams the
// answer from that token, a transfer that fails is the decode's in-band abort, and a room that is
// active twice crashes the worker (sglang#40125).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { eventually, getJson, pidAlive, postJson } from './helpers.ts';

const WAIT_MS = 1500;
let cluster: SimCluster;
let nextRoom = 9_007_199_254_740_993n; // past 2^53: JSON.parse would round it

/** A fresh 64-bit room, as decimal text. */
const room = () => String(nextRoom++ * 1_000_003n % 2n ** 64n);

const P = (i: number) => cluster.workers()[i]!;
const PREFILL = 0;
const DECODE = 2;

/** The /generate body text with the room written as an exact integer. */
function body(fields: Record<string, unknown>, roomText: string, bootstrapPort: number): string {
  return JSON.stringify({ ...fields, bootstrap_host: '127.0.0.1', bootstrap_port: bootstrapPort, bootstrap_room: '@ROOM@' }).replace('"@ROOM@"', roomText);
}

function post(url: string, text: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let t = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (t += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: t }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(text);
  });
}

/** Both legs at once: the prefill unary, the decode streamed. */
async function pair(fields: Record<string, unknown>, r = room(), prefill = PREFILL, decode = DECODE) {
  const text = body(fields, r, P(prefill).bootstrapPort!);
  const [pre, dec] = await Promise.all([post(`${P(prefill).url}/generate`, text), openStream(`${P(decode).url}/generate`, text)]);
  return { room: r, pre, dec };
}

/** A stream whose body keeps the exact room (the text is sent as is). */
function openStream(url: string, text: string): Promise<{ status: number; chunks: Record<string, unknown>[]; done: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let t = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (t += c));
      res.on('end', () => {
        const frames = t.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => f.slice(6));
        resolve({ status: res.statusCode ?? 0, chunks: frames.filter((f) => f !== '[DONE]').map((f) => JSON.parse(f) as Record<string, unknown>), done: frames.includes('[DONE]') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(text);
  });
}

const meta = (x: Record<string, unknown>) => x.meta_info as Record<string, unknown>;
const stats = async (i: number) => (await cluster.stats(i)).pd!;

beforeAll(async () => {
  cluster = await startCluster({
    workers: 4,
    port: 0,
    tokenIntervalMs: 1,
    roles: ['prefill', 'prefill', 'decode', 'decode'],
    disaggregationBootstrapTimeoutMs: WAIT_MS,
    disaggregationWaitingTimeoutMs: WAIT_MS,
  });
}, 120_000);

afterAll(async () => {
  const pids = cluster?.workers().map((w) => w.pid) ?? [];
  await cluster?.stop();
  for (const pid of pids) expect(pidAlive(pid)).toBe(false);
});

describe('sim P/D roles', () => {
  it('advertises its role and bootstrap port in /server_info; the prefill serves a bootstrap server there', async () => {
    const pre = P(PREFILL);
    expect(pre.role).toBe('prefill');
    expect(pre.bootstrapPort).toBeGreaterThan(0);
    expect((await getJson(`${pre.url}/server_info`)).body).toMatchObject({ disaggregation_mode: 'prefill', disaggregation_bootstrap_port: pre.bootstrapPort });
    expect((await getJson(`${P(DECODE).url}/server_info`)).body).toMatchObject({ disaggregation_mode: 'decode' });
    const health = await fetch(`http://127.0.0.1:${pre.bootstrapPort}/health`);
    expect([health.status, await health.text()]).toEqual([200, 'OK']);
    const info = await getJson(`http://127.0.0.1:${pre.bootstrapPort}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1`);
    expect(info).toMatchObject({ status: 200, body: { dp_size: 1, attn_tp_size: 1, pp_size: 1, page_size: 1 } });
    expect((await fetch(`http://127.0.0.1:${pre.bootstrapPort}/route`)).status).toBe(400);
  });

  it('a request without a room is refused with 400 on both legs', async () => {
    for (const i of [PREFILL, DECODE]) {
      const r = await postJson(`${P(i).url}/generate`, { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4 } });
      expect(r.status).toBe(400);
      expect(r.text).toContain('Disaggregated request received without bootstrap room id');
    }
  });

  it('prefill answers its one token with finish length 0; the decode streams the whole answer from that token', async () => {
    const prompt = [11, 12, 13, 14, 15, 16];
    const params = { max_new_tokens: 24, ignore_eos: true };
    const want = runModel(prompt, params).output_ids;
    const { pre, dec } = await pair({ input_ids: prompt, stream: true, sampling_params: params });
    // The prefill leg was sent the same body (stream: true): one final chunk, then [DONE].
    expect(pre.status).toBe(200);
    const preChunks = pre.text.split('\n\n').filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]').map((f) => JSON.parse(f.slice(6)) as Record<string, unknown>);
    expect(preChunks).toHaveLength(1);
    expect(preChunks[0]!.output_ids).toEqual([want[0]]);
    expect(meta(preChunks[0]!)).toMatchObject({ finish_reason: { type: 'length', length: 0 }, completion_tokens: 1, prompt_tokens: prompt.length });
    expect(dec.status).toBe(200);
    expect(dec.done).toBe(true);
    expect(dec.chunks[0]!.output_ids).toEqual([want[0]]);
    const last = dec.chunks.at(-1)!;
    expect(last.output_ids).toEqual(want);
    expect(meta(last)).toMatchObject({ finish_reason: { type: 'length', length: 24 }, completion_tokens: 24 });
  });

  it('the rooms are read exactly (64-bit) and counted; none is seen twice', async () => {
    const before = await stats(DECODE);
    const { room: r } = await pair({ input_ids: [1, 2, 3, 4], sampling_params: { max_new_tokens: 3 } });
    const after = await stats(DECODE);
    expect(after.roomsSeen).toBe(before.roomsSeen + 1);
    expect(after.duplicateRooms).toEqual([]);
    expect(after.roomsActive).toBe(0);
    expect(BigInt(r)).toBeGreaterThan(2n ** 53n);
    // Every room in the order it came, from any point on (the chaos campaign's view).
    const log = (await getJson(`${P(DECODE).url}/_sim/rooms?since=${before.roomsSeen}`)).body as { total: number; rooms: string[] };
    expect(log).toEqual({ total: before.roomsSeen + 1, rooms: [r] });
  });

  it('input logprobs come from the prefill leg; the decode carries the first token\'s output logprob', async () => {
    const prompt = [21, 22, 23, 24, 25];
    const fields = { input_ids: prompt, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2, sampling_params: { max_new_tokens: 5, ignore_eos: true } };
    const r = room();
    const text = body(fields, r, P(PREFILL).bootstrapPort!);
    const [pre, dec] = await Promise.all([post(`${P(PREFILL).url}/generate`, text), post(`${P(DECODE).url}/generate`, text)]);
    const pm = meta(JSON.parse(pre.text) as Record<string, unknown>);
    const dm = meta(JSON.parse(dec.text) as Record<string, unknown>);
    expect((pm.input_token_logprobs as unknown[]).length).toBe(prompt.length);
    expect(dm.input_token_logprobs).toEqual([]);
    expect((dm.output_token_logprobs as unknown[])[0]).toEqual((pm.output_token_logprobs as unknown[])[0]);
    expect((dm.output_top_logprobs as unknown[])[0]).toEqual((pm.output_top_logprobs as unknown[])[0]);
    expect((dm.output_token_logprobs as unknown[]).length).toBe(5);
  });

  it('a hung prefill: the decode aborts in-band with status 500 after its bounded wait; and the prefill never answers before it', async () => {
    await cluster.fault(PREFILL, { kind: 'hang' });
    try {
      const t0 = performance.now();
      const r = room();
      const text = body({ input_ids: [31, 32, 33], stream: true, sampling_params: { max_new_tokens: 8 } }, r, P(PREFILL).bootstrapPort!);
      const pre = post(`${P(PREFILL).url}/generate`, text).catch(() => null);
      const dec = await openStream(`${P(DECODE).url}/generate`, text);
      const waited = performance.now() - t0;
      expect(waited).toBeGreaterThanOrEqual(WAIT_MS - 50);
      expect(dec.status).toBe(200);
      expect(dec.done).toBe(true);
      const fr = meta(dec.chunks.at(-1)!).finish_reason as Record<string, unknown>;
      expect(fr.type).toBe('abort');
      expect(fr.status_code).toBe(500);
      expect(fr.message).toMatch(new RegExp(`^Decode transfer failed for request rank=0 decode_req\\.req\\.rid='\\w+' decode_req\\.req\\.bootstrap_room=${r} with exception KVTransferError\\(bootstrap_room=${r}\\): Request ${r} timed out after 1\\.\\ds in KVPoll\\.WaitingForInput$`));
      expect(dec.chunks.at(-1)!.output_ids).toEqual([]);
      void pre;
    } finally {
      await cluster.fault(PREFILL, { kind: 'clear' });
    }
  });

  it('a prefill killed before its room transfers: the decode aborts at once ("it might be dead"), well before its wait', async () => {
    await cluster.fault(PREFILL, { kind: 'hang' });
    const r = room();
    const text = body({ input_ids: [41, 42, 43], stream: true, sampling_params: { max_new_tokens: 8 } }, r, P(PREFILL).bootstrapPort!);
    void post(`${P(PREFILL).url}/generate`, text).catch(() => null);
    const decP = openStream(`${P(DECODE).url}/generate`, text);
    await new Promise((res) => setTimeout(res, 200));
    const t0 = performance.now();
    await cluster.kill(PREFILL);
    const dec = await decP;
    expect(performance.now() - t0).toBeLessThan(WAIT_MS - 300);
    const fr = meta(dec.chunks.at(-1)!).finish_reason as Record<string, unknown>;
    expect(fr).toMatchObject({ type: 'abort', status_code: 500 });
    expect(fr.message).toContain(`KVTransferError(bootstrap_room=${r}): Failed to get kvcache from prefill instance, it might be dead`);
    await cluster.restart(PREFILL);
    expect(P(PREFILL).bootstrapPort).toBeGreaterThan(0);
    // The same bootstrap port after the restart: a router that cached it keeps working.
    const again = await pair({ input_ids: [1, 2], sampling_params: { max_new_tokens: 2 } });
    expect(again.dec.status).toBe(200);
  });

  it('a prefill request that ends before its transfer (its client gone) fails its decode at once', async () => {
    const r = room();
    const text = body({ input_ids: [45, 46, 47], stream: true, sampling_params: { max_new_tokens: 8 } }, r, P(PREFILL).bootstrapPort!);
    // The prefill leg first: it waits for its decode; then the worker hangs, so once the decode
    // connects the prefill is stuck before its transfer.
    const pre = request(`${P(PREFILL).url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } });
    pre.on('error', () => undefined);
    pre.end(text);
    await eventually(async () => ((await stats(PREFILL)).roomsActive === 1 ? true : undefined), 5000, 'prefill room active');
    await cluster.fault(PREFILL, { kind: 'hang' });
    try {
      const decP = openStream(`${P(DECODE).url}/generate`, text);
      await eventually(async () => ((await stats(DECODE)).roomsActive === 1 ? true : undefined), 5000, 'decode room active');
      await new Promise((res) => setTimeout(res, 100));
      const t0 = performance.now();
      pre.destroy();
      const dec = await decP;
      expect(performance.now() - t0).toBeLessThan(WAIT_MS - 300);
      const fr = meta(dec.chunks.at(-1)!).finish_reason as Record<string, unknown>;
      expect(fr).toMatchObject({ type: 'abort', status_code: 500 });
      expect(fr.message).toContain(`KVTransferError(bootstrap_room=${r}): Failed to get kvcache from prefill instance, it might be dead`);
    } finally {
      await cluster.fault(PREFILL, { kind: 'clear' });
    }
  });

  it('a bare IPv6 bootstrap_host is no address (SGLang writes f"{host}:{port}"): the decode aborts at once, "Could not fetch prefill parallel info"', async () => {
    const r = room();
    const port = P(PREFILL).bootstrapPort!;
    const text = JSON.stringify({ input_ids: [61, 62], stream: true, sampling_params: { max_new_tokens: 4 }, bootstrap_host: '::1', bootstrap_port: port, bootstrap_room: '@ROOM@' }).replace('"@ROOM@"', r);
    const t0 = performance.now();
    const dec = await openStream(`${P(DECODE).url}/generate`, text);
    expect(performance.now() - t0).toBeLessThan(WAIT_MS - 300);
    const fr = meta(dec.chunks.at(-1)!).finish_reason as Record<string, unknown>;
    expect(fr).toMatchObject({ type: 'abort', status_code: 500 });
    expect(fr.message).toContain(`KVTransferError(bootstrap_room=${r}): Could not fetch prefill parallel info from bootstrap_addr: ::1:${port}`);
  });

  it('a prefill whose decode never comes fails its bootstrap with a 500 after its bounded wait', async () => {
    const r = room();
    const text = body({ input_ids: [51, 52], sampling_params: { max_new_tokens: 4 } }, r, P(PREFILL).bootstrapPort!);
    const pre = await post(`${P(PREFILL).url}/generate`, text);
    expect(pre.status).toBe(500);
    expect(JSON.parse(pre.text).message).toMatch(new RegExp(`^Prefill bootstrap failed for request rank=0 req\\.rid='\\w+' req\\.bootstrap_room=${r} with exception KVTransferError\\(bootstrap_room=${r}\\): Request ${r} timed out after 1\\.\\ds in KVPoll\\.Bootstrapping$`));
  });

  it('a finished room sent again is counted as a duplicate (no crash); an active one crashes the decode and the prefill', async () => {
    const { room: r } = await pair({ input_ids: [61, 62], sampling_params: { max_new_tokens: 2 } }, room(), PREFILL, DECODE + 1);
    await pair({ input_ids: [61, 62], sampling_params: { max_new_tokens: 2 } }, r, PREFILL, DECODE + 1);
    expect((await stats(DECODE + 1)).duplicateRooms).toEqual([r]);
    expect((await stats(PREFILL)).duplicateRooms).toContain(r);

    // An active room twice on the decode: its prefill never comes, so the first waits; the second kills the process.
    const dup = room();
    const text = body({ input_ids: [71, 72], stream: true, sampling_params: { max_new_tokens: 4 } }, dup, P(PREFILL + 1).bootstrapPort!);
    const first = openStream(`${P(DECODE + 1).url}/generate`, text).catch((e: Error) => e);
    await eventually(async () => ((await stats(DECODE + 1)).roomsActive === 1 ? true : undefined), 5000, 'room active');
    const second = await post(`${P(DECODE + 1).url}/generate`, text).catch((e: Error) => e);
    expect(second).toBeInstanceOf(Error);
    await eventually(() => (P(DECODE + 1).alive ? undefined : true), 5000, 'decode exit');
    expect(await first).toBeInstanceOf(Error);

    const textP = body({ input_ids: [81, 82], sampling_params: { max_new_tokens: 4 } }, room(), P(PREFILL + 1).bootstrapPort!);
    const firstP = post(`${P(PREFILL + 1).url}/generate`, textP).catch((e: Error) => e);
    await eventually(async () => ((await stats(PREFILL + 1)).roomsActive === 1 ? true : undefined), 5000, 'room active');
    expect(await post(`${P(PREFILL + 1).url}/generate`, textP).catch((e: Error) => e)).toBeInstanceOf(Error);
    await eventually(() => (P(PREFILL + 1).alive ? undefined : true), 5000, 'prefill exit');
    expect(await firstP).toBeInstanceOf(Error);
    await cluster.restart(DECODE + 1);
    await cluster.restart(PREFILL + 1);
  });

  it('FAKE_BOOTSTRAP_HOST (2.2.2.2): each leg runs alone, as SGLang\'s warmup does', async () => {
    const fields = { input_ids: [91, 92, 93], sampling_params: { max_new_tokens: 6, ignore_eos: true }, bootstrap_host: '2.2.2.2', bootstrap_room: 0 };
    const want = runModel([91, 92, 93], { max_new_tokens: 6, ignore_eos: true }).output_ids;
    const pre = await postJson(`${P(PREFILL).url}/generate`, fields);
    expect(pre.body).toMatchObject({ output_ids: [want[0]], meta_info: { finish_reason: { type: 'length', length: 0 } } });
    const dec = await postJson(`${P(DECODE).url}/generate`, { ...fields, bootstrap_room: 1 });
    expect((dec.body as Record<string, unknown>).output_ids).toEqual(want);
  });
});

