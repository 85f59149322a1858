// SGLang's endpoints besides /generate, answered for a cluster: /health_generate from a worker's
// own probe, /flush_cache on every worker, and the info endpoints from one reference worker (the
// first eligible by id) so that they agree with each other, as the worker itself answers them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../../router/index.ts';
import { openSse } from '../../sim/helpers.ts';
import { recordingProxy, send } from './helpers.ts';

let w1: SimWorker;
let w2: SimWorker;
let p1: Awaited<ReturnType<typeof recordingProxy>>;
let p2: Awaited<ReturnType<typeof recordingProxy>>;
let r: RouterHandle;

beforeAll(async () => {
  w1 = await startWorker({ tokenIntervalMs: 10, weightVersion: 'step-7' });
  w2 = await startWorker({ tokenIntervalMs: 10, weightVersion: 'step-7' });
  p1 = await recordingProxy(w1.url);
  p2 = await recordingProxy(w2.url);
  r = await startRouter({ port: 0, workers: [p1.url, p2.url], healthIntervalMs: 0 });
});
afterAll(async () => {
  await r.close();
  await p1.close();
  await p2.close();
  await w1.close();
  await w2.close();
});

const hits = (p: typeof p1, path: string) => p.calls.filter((c) => c.path === path).length;

describe('info endpoints', () => {
  it.each(['/server_info', '/get_server_info', '/model_info', '/get_model_info', '/get_weight_version'])('%s is the reference worker\'s own answer', async (path) => {
    const viaRouter = await send(r.url, path);
    const direct = await send(w1.url, path);
    expect(viaRouter.status).toBe(direct.status);
    expect(viaRouter.contentType).toBe(direct.contentType);
    expect(viaRouter.headers['x-baton-worker']).toBe(p1.url);
    expect(viaRouter.headers['x-baton-disagreement']).toBeUndefined();
    // The worker's answer describes itself (its port, its running state); the rest is the same.
    const strip = (t: string) => {
      const o = JSON.parse(t) as Record<string, unknown>;
      delete o.port;
      delete o.internal_states;
      return o;
    };
    expect(strip(viaRouter.text)).toEqual(strip(direct.text));
  });

  it('all five come from the same worker, the first eligible by id, also when it is drained', async () => {
    const names = new Set<unknown>();
    for (const path of ['/server_info', '/get_server_info', '/model_info', '/get_model_info', '/get_weight_version']) names.add((await send(r.url, path)).headers['x-baton-worker']);
    expect([...names]).toEqual([p1.url]);
    const id = r.workers().find((x) => x.url === p1.url)!.id;
    r.drainWorker(id, true);
    try {
      expect((await send(r.url, '/model_info')).headers['x-baton-worker']).toBe(p2.url);
    } finally {
      r.drainWorker(id, false);
    }
  });

  it('workers that disagree on the weights are reported in x-baton-disagreement', async () => {
    const other = await startWorker({ tokenIntervalMs: 0, weightVersion: 'step-8' });
    const mixed = await startRouter({ port: 0, workers: [p1.url, other.url], healthIntervalMs: 0 });
    try {
      const res = await send(mixed.url, '/get_weight_version');
      expect(JSON.parse(res.text)).toEqual({ weight_version: 'step-7' });
      expect(res.headers['x-baton-disagreement']).toBe('weight_version');
    } finally {
      await mixed.close();
      await other.close();
    }
  });

  it('answers 503 in SGLang\'s error shape when no worker is eligible', async () => {
    const empty = await startRouter({ port: 0, workers: [], healthIntervalMs: 0 });
    try {
      const res = await send(empty.url, '/server_info');
      expect(res.status).toBe(503);
      expect(JSON.parse(res.text)).toMatchObject({ object: 'error', param: null, code: 503 });
      expect((await send(empty.url, '/health_generate')).status).toBe(503);
    } finally {
      await empty.close();
    }
  });
});

describe('/health_generate', () => {
  it('is the reference worker\'s one-token probe: 200 with an empty body, 503 when it fails', async () => {
    const before = hits(p1, '/health_generate');
    const ok = await send(r.url, '/health_generate');
    expect([ok.status, ok.text]).toEqual([200, '']);
    expect(hits(p1, '/health_generate')).toBe(before + 1);
    const direct = await send(w1.url, '/health_generate');
    expect([direct.status, direct.text]).toEqual([200, '']);
    w1.fault({ kind: 'reject' });
    try {
      const bad = await send(r.url, '/health_generate');
      expect([bad.status, bad.text]).toEqual([503, '']);
      expect((await send(w1.url, '/health_generate')).status).toBe(503);
    } finally {
      w1.fault({ kind: 'clear' });
    }
  });
});

describe('/flush_cache', () => {
  it.each(['GET', 'POST'])('%s flushes every worker and answers with SGLang\'s text', async (method) => {
    const b1 = hits(p1, '/flush_cache');
    const b2 = hits(p2, '/flush_cache');
    const res = await send(r.url, '/flush_cache', { method, body: method === 'POST' ? '' : undefined, contentType: null });
    const direct = await send(w1.url, '/flush_cache', { method: 'POST' });
    expect(res.status).toBe(200);
    expect(res.text).toBe(direct.text);
    expect(res.text).toMatch(/^Cache flushed\.\n/);
    expect([hits(p1, '/flush_cache') - b1, hits(p2, '/flush_cache') - b2]).toEqual([1, 1]);
  });

  it('answers 400 (the same text) when a worker cannot flush because it is busy, as that worker does', async () => {
    const s = await openSse(w2.url + '/generate', { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 300, ignore_eos: true }, stream: true });
    await s.waitFrames(2);
    try {
      const res = await send(r.url, '/flush_cache', { method: 'POST' });
      const direct = await send(w2.url, '/flush_cache', { method: 'POST' });
      expect(direct.status).toBe(400);
      expect([res.status, res.text]).toEqual([400, direct.text]);
    } finally {
      s.destroy();
      await s.ended;
    }
  });
});
