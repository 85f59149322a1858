// Each fault as the client observes it on the wire (in-process workers; the process-level crash
// is in cluster.test.ts).

import { afterEach, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker, type WorkerOptions } from '../../sim/worker.ts';
import { eventually, median, openSse, postJson } from './helpers.ts';

const PROMPT = [5, 10, 15, 20];
const long = (extra: Record<string, unknown> = {}) => ({ input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 20_000, ignore_eos: true }, ...extra });

const started: SimWorker[] = [];
async function worker(opts: WorkerOptions = {}): Promise<SimWorker> {
  const w = await startWorker(opts);
  started.push(w);
  return w;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.close()));
});

const lastCompletion = (s: { chunks(): Record<string, unknown>[] }) =>
  (s.chunks().at(-1) as { meta_info?: { completion_tokens?: number } } | undefined)?.meta_info?.completion_tokens;

/** Observes the stream for `ms` and returns how many frames arrived meanwhile. */
async function framesDuring(s: { frames: unknown[] }, ms: number): Promise<number> {
  const before = s.frames.length;
  await new Promise((r) => setTimeout(r, ms));
  return s.frames.length - before;
}

describe('hang', () => {
  it('stops sending on open streams and answering new requests, keeps sockets open; clear resumes both', async () => {
    const w = await worker({ tokenIntervalMs: 2 });
    const s = await openSse(`${w.url}/generate`, long());
    await s.waitFrames(3);
    w.fault({ kind: 'hang' });
    // Frames written before the hang may still be in flight; wait for the last one the worker sent.
    const sent = w.stats().tokensGenerated;
    await eventually(() => (lastCompletion(s) === sent ? true : undefined), 20_000, 'frames sent before the hang');
    expect(await framesDuring(s, 500)).toBe(0);
    expect(s.isEnded()).toBe(false);
    const health = fetch(`${w.url}/health`);
    const answered = await Promise.race([health.then(() => true), new Promise((r) => setTimeout(() => r(false), 300))]);
    expect(answered).toBe(false);
    w.fault({ kind: 'clear' });
    expect((await health).status).toBe(200);
    await s.waitFrames(s.frames.length + 3);
    s.destroy();
  });

  it('after_tokens: exactly N more tokens go out, then silence', async () => {
    const w = await worker();
    w.fault({ kind: 'hang', afterTokens: 5 });
    const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 50, ignore_eos: true } });
    await s.waitFrames(5);
    expect(await framesDuring(s, 400)).toBe(0);
    expect(s.frames).toHaveLength(5);
    expect(w.stats().hung).toBe(true);
    w.fault({ kind: 'clear' });
    expect((await s.ended).sawDone).toBe(true);
    expect(s.chunks()).toHaveLength(50);
  });
});

describe('reset', () => {
  it('destroys open connections now; the server stays up', async () => {
    const w = await worker({ tokenIntervalMs: 5 });
    const s = await openSse(`${w.url}/generate`, long());
    await s.waitFrames(2);
    w.fault({ kind: 'reset' });
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    expect(end.error?.code).toBe('ECONNRESET');
    expect((await fetch(`${w.url}/health`)).status).toBe(200);
    expect(w.stats().inFlight).toBe(0);
  });
});

describe('reject', () => {
  it('answers 503 to new /generate and /health until cleared', async () => {
    const w = await worker();
    w.fault({ kind: 'reject' });
    const r = await postJson(`${w.url}/generate`, { input_ids: PROMPT });
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ object: 'error', message: expect.any(String), param: null, code: 503 });
    expect((await fetch(`${w.url}/health`)).status).toBe(503);
    w.fault({ kind: 'clear' });
    expect((await postJson(`${w.url}/generate`, { input_ids: PROMPT })).status).toBe(200);
    expect((await fetch(`${w.url}/health`)).status).toBe(200);
  });

  it('after_tokens, over the HTTP control API: requests are accepted until N tokens have gone out', async () => {
    const w = await worker();
    const ctl = await postJson(`${w.url}/_sim/fault`, { kind: 'reject', after_tokens: 8 });
    expect(ctl.status).toBe(200);
    const first = await postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { max_new_tokens: 8, ignore_eos: true } });
    expect(first.status).toBe(200);
    expect((await postJson(`${w.url}/generate`, { input_ids: PROMPT })).status).toBe(503);
  });
});

describe('slow', () => {
  it('changes the token interval: frame gaps grow by the ratio asked for', async () => {
    const w = await worker({ tokenIntervalMs: 2 });
    const s = await openSse(`${w.url}/generate`, long());
    const ctl = await postJson(`${w.url}/_sim/fault`, { kind: 'slow', after_tokens: 20, interval_ms: 100 });
    expect(ctl.status).toBe(200);
    await s.waitFrames(40);
    s.destroy();
    const gaps = s.frames.slice(1, 40).map((f, i) => f.at - s.frames[i]!.at);
    const before = median(gaps.slice(2, 17));
    const after = median(gaps.slice(22, 38));
    expect(after / before).toBeGreaterThan(4);
    expect(w.stats().tokenIntervalMs).toBe(100);
  });
});

describe('abort (engine-side)', () => {
  it('ends streams with an abort chunk carrying a 5xx status, and unary calls with a 503', async () => {
    const w = await worker({ tokenIntervalMs: 5 });
    const s = await openSse(`${w.url}/generate`, long());
    const unary = postJson(`${w.url}/generate`, { input_ids: PROMPT, sampling_params: { max_new_tokens: 20_000, ignore_eos: true } });
    await s.waitFrames(2);
    await eventually(() => (w.stats().inFlight === 2 ? true : undefined));
    w.fault({ kind: 'abort' });
    expect((await s.ended).sawDone).toBe(true);
    const last = s.chunks().at(-1) as { meta_info: { finish_reason: unknown } };
    expect(last.meta_info.finish_reason).toMatchObject({ type: 'abort', status_code: 503 });
    const u = await unary;
    expect(u.status).toBe(503);
    expect(u.body).toMatchObject({ object: 'error', code: 503 });
  });
});

describe('crash (in-process)', () => {
  it('closes every connection without a final frame and stops listening', async () => {
    const w = await worker({ tokenIntervalMs: 5 });
    const s = await openSse(`${w.url}/generate`, long());
    await s.waitFrames(2);
    w.fault({ kind: 'crash' });
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    expect(s.frames.every((f) => f.data !== '[DONE]')).toBe(true);
    await expect(fetch(`${w.url}/health`)).rejects.toThrow();
    expect(w.stats().crashed).toBe(true);
  });

  it('after_tokens: the client receives exactly N tokens, then the connection ends', async () => {
    const w = await worker();
    w.fault({ kind: 'crash', afterTokens: 7 });
    const s = await openSse(`${w.url}/generate`, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 100, ignore_eos: true } });
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    const chunks = s.chunks() as { output_ids: number[] }[];
    expect(chunks).toHaveLength(7);
    expect(chunks.at(-1)!.output_ids).toHaveLength(7);
  });
});
