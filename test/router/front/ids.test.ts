// Request ids across a cluster behave as on one SGLang worker: a body rid reused while its first
// request is in flight is refused with SGLang's ValueError ("Duplicate request ID detected: X",
// in-band for a stream, 400 for a unary request); ids taken from correlation headers are shared
// freely; /abort_request aborts as SGLang's tokenizer manager and scheduler do.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../../router/index.ts';
import { openSse, type SseStream } from '../../sim/helpers.ts';
import { frames, post, recordingProxy, send, sleep, until } from './helpers.ts';

const LONG = { max_new_tokens: 400, ignore_eos: true };

let w1: SimWorker;
let w2: SimWorker;
let p1: Awaited<ReturnType<typeof recordingProxy>>;
let p2: Awaited<ReturnType<typeof recordingProxy>>;
let r: RouterHandle;

beforeAll(async () => {
  w1 = await startWorker({ tokenIntervalMs: 15 });
  w2 = await startWorker({ tokenIntervalMs: 15 });
  p1 = await recordingProxy(w1.url);
  p2 = await recordingProxy(w2.url);
  r = await startRouter({ port: 0, workers: [p1.url, p2.url], healthIntervalMs: 0, migrationLimit: 3 });
});
afterAll(async () => {
  await r.close();
  await p1.close();
  await p2.close();
  await w1.close();
  await w2.close();
});

const generateCalls = () => [...p1.calls, ...p2.calls].filter((c) => c.path === '/generate').length;
const inFlight = () => w1.stats().inFlight + w2.stats().inFlight;

function finishOf(chunk: Record<string, unknown> | undefined): Record<string, unknown> | null {
  return ((chunk?.meta_info as Record<string, unknown> | undefined)?.finish_reason ?? null) as Record<string, unknown> | null;
}

/** A long stream through the router, waited on until its first frames arrived. */
async function longStream(rid: string, extra: Record<string, unknown> = {}): Promise<SseStream> {
  const s = await openSse(r.url + '/generate', { input_ids: [11, 12, 13], sampling_params: LONG, stream: true, rid, ...extra });
  await s.waitFrames(2);
  return s;
}

describe('duplicate rids', () => {
  it.each([true, false])('stream=%s: a body rid in flight is refused as SGLang refuses it, and reaches no worker', async (stream) => {
    const rid = `dup-${stream}`;
    const first = await longStream(rid);
    const before = generateCalls();
    const second = await post(r.url, '/generate', { input_ids: [1, 2], sampling_params: { max_new_tokens: 2 }, stream, rid });
    const message = `Duplicate request ID detected: ${rid}`;
    if (stream) {
      expect(second.status).toBe(200);
      expect(second.contentType).toMatch(/^text\/event-stream/);
      expect(second.text).toBe(`data: ${JSON.stringify({ error: { message, type: 'invalid_request_error', code: 400, retryable: false } })}\n\ndata: [DONE]\n\n`);
    } else {
      expect(second.status).toBe(400);
      expect(JSON.parse(second.text)).toEqual({ error: { message } });
    }
    expect(generateCalls()).toBe(before);
    // The first goes on untouched, and once it ended the rid is free again.
    first.destroy();
    await first.ended;
    await until(() => inFlight() === 0, 5000, 'the first request to end');
    const again = await post(r.url, '/generate', { input_ids: [1, 2], sampling_params: { max_new_tokens: 2 }, stream, rid });
    expect(again.status).toBe(200);
    expect(again.text).not.toContain('Duplicate');
  });

  it('a batch claims its per-item rids (<rid>_<i>): a single request reusing one is refused', async () => {
    const batch = await openSse(r.url + '/generate', { input_ids: [[1, 2], [3, 4]], sampling_params: LONG, stream: true, rid: 'bat' });
    await batch.waitFrames(2);
    const res = await post(r.url, '/generate', { input_ids: [1, 2], sampling_params: { max_new_tokens: 2 }, rid: 'bat_1' });
    expect([res.status, JSON.parse(res.text)]).toEqual([400, { error: { message: 'Duplicate request ID detected: bat_1' } }]);
    batch.destroy();
    await batch.ended;
  });

  it('ids from correlation headers are shared freely: both requests are served, also by one worker', async () => {
    // One worker, so that both land on it: the router must not send the shared id as the rid.
    const one = await startRouter({ port: 0, workers: [p1.url], healthIntervalMs: 0 });
    const body = { input_ids: [7, 8, 9], sampling_params: { max_new_tokens: 30, ignore_eos: true }, stream: true };
    const [a, b] = await Promise.all([
      post(one.url, '/generate', body, { 'x-request-id': 'shared-trace' }),
      post(one.url, '/generate', body, { 'x-request-id': 'shared-trace' }),
    ]).finally(() => one.close());
    for (const x of [a, b]) {
      expect(x.status).toBe(200);
      expect(x.headers['x-request-id']).toBe('shared-trace');
      const { chunks, done } = frames(x.text);
      expect(done).toBe(true);
      expect(chunks.some((c) => 'error' in c)).toBe(false);
      expect(finishOf(chunks.at(-1))).toMatchObject({ type: 'length' });
      expect((chunks.at(-1)!.meta_info as { id: string }).id).toBe('shared-trace');
    }
  });
});

describe('/abort_request', () => {
  it('answers 200 with an empty body, like SGLang, also for a rid nobody holds', async () => {
    const res = await post(r.url, '/abort_request', { rid: 'nobody' });
    expect([res.status, res.text]).toEqual([200, '']);
    const direct = await post(w1.url, '/abort_request', { rid: 'nobody' });
    expect([direct.status, direct.text]).toEqual([200, '']);
  });

  it('refuses a malformed body with SGLang\'s 400', async () => {
    for (const body of ['{"rid": 5}', 'not json', '[1]', '{"abort_all": "perhaps"}']) {
      const res = await send(r.url, '/abort_request', { body });
      expect(res.status, body).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({ object: 'error', type: 'Bad Request', param: null, code: 400 });
    }
  });

  it('stream: the request ends with the worker\'s abort finish, as on one worker, and is not migrated', async () => {
    const s = await longStream('ab-stream');
    const res = await post(r.url, '/abort_request', { rid: 'ab-stream' });
    expect([res.status, res.text]).toEqual([200, '']);
    const end = await s.ended;
    expect(end.sawDone).toBe(true);
    const last = s.chunks().at(-1);
    const viaRouter = finishOf(last);
    // The same request straight to a worker, aborted the same way.
    const d = await openSse(w1.url + '/generate', { input_ids: [11, 12, 13], sampling_params: LONG, stream: true, rid: 'ab-direct' });
    await d.waitFrames(2);
    await post(w1.url, '/abort_request', { rid: 'ab-direct' });
    await d.ended;
    expect(viaRouter).toEqual(finishOf(d.chunks().at(-1)));
    expect(viaRouter).toMatchObject({ type: 'abort' });
    expect((last!.meta_info as { id: string }).id).toBe('ab-stream');
    const row = r.traceRows({ request: 'ab-stream', kind: 'request' })[0];
    expect(row).toMatchObject({ attempts: 1, migrations: 0 });
  });

  it('unary: the answer carries the abort finish', async () => {
    const pending = post(r.url, '/generate', { input_ids: [11, 12, 13], sampling_params: LONG, rid: 'ab-unary' });
    await until(() => inFlight() > 0, 5000, 'the request to start');
    await sleep(50);
    await post(r.url, '/abort_request', { rid: 'ab-unary' });
    const res = await pending;
    expect(res.status).toBe(200);
    const body = JSON.parse(res.text) as Record<string, unknown>;
    expect(finishOf(body)).toMatchObject({ type: 'abort' });
    expect((body.output_ids as number[]).length).toBeLessThan(400);
    expect(r.traceRows({ request: 'ab-unary', kind: 'request' })[0]).toMatchObject({ attempts: 1 });
  });

  it('goes on only for a rid held exactly, then aborts every request whose id starts with it', async () => {
    const a = await longStream('job-1');
    const b = await longStream('job-10');
    const c = await longStream('other');
    // No request is named exactly "job": SGLang's tokenizer manager does nothing.
    await post(r.url, '/abort_request', { rid: 'job' });
    const seen = a.frames.length + b.frames.length;
    await until(() => a.frames.length + b.frames.length > seen + 4, 5000, 'the streams to go on');
    expect(a.isEnded() || b.isEnded()).toBe(false);
    // "job-1" is held: it and "job-10" are aborted, "other" goes on.
    await post(r.url, '/abort_request', { rid: 'job-1' });
    await Promise.all([a.ended, b.ended]);
    expect(finishOf(a.chunks().at(-1))).toMatchObject({ type: 'abort' });
    expect(finishOf(b.chunks().at(-1))).toMatchObject({ type: 'abort' });
    expect(c.isEnded()).toBe(false);
    // abort_all takes the rest.
    await post(r.url, '/abort_request', { abort_all: true });
    await c.ended;
    expect(finishOf(c.chunks().at(-1))).toMatchObject({ type: 'abort' });
  });

  it('a batch (passed through under the client\'s rids) is aborted by its worker, item by item', async () => {
    const s = await openSse(r.url + '/generate', { input_ids: [[1, 2], [3, 4]], sampling_params: LONG, stream: true, rid: 'pb' });
    await s.waitFrames(4);
    await post(r.url, '/abort_request', { rid: 'pb_0' });
    await until(() => s.chunks().some((ch) => finishOf(ch)?.type === 'abort'), 5000, 'item 0 to be aborted');
    const aborted = s.chunks().filter((ch) => finishOf(ch)?.type === 'abort').map((ch) => (ch.meta_info as { id: string }).id);
    expect(aborted).toEqual(['pb_0']);
    await post(r.url, '/abort_request', { abort_all: true });
    await s.ended;
    const ids = s.chunks().filter((ch) => finishOf(ch)?.type === 'abort').map((ch) => (ch.meta_info as { id: string }).id);
    expect(ids.sort()).toEqual(['pb_0', 'pb_1']);
  });
});
