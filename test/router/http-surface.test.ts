// The router's HTTP surface besides /generate: health, models, the worker API, request ids,
// and invalid requests answered by the router itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';

const JSON_CT = { 'content-type': 'application/json' };

let w1: SimWorker;
let w2: SimWorker;
let r: RouterHandle;

beforeAll(async () => {
  w1 = await startWorker({ tokenIntervalMs: 0 });
  w2 = await startWorker({ tokenIntervalMs: 0 });
  r = await startRouter({ port: 0, workers: [w1.url], healthIntervalMs: 0 });
});
afterAll(async () => {
  await r.close();
  await w1.close();
  await w2.close();
});

describe('health and models', () => {
  it('GET /health is 200 with a healthy worker', async () => {
    expect((await fetch(r.url + '/health')).status).toBe(200);
  });
  it('GET /v1/models answers from a worker', async () => {
    const res = await fetch(r.url + '/v1/models');
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { id: string }[] }).data[0]!.id).toBe('baton-sim');
  });
  it('unknown routes and methods get Starlette\'s bodies, as SGLang answers them', async () => {
    const a = await fetch(r.url + '/nope');
    expect(a.status).toBe(404);
    expect(await a.json()).toEqual({ detail: 'Not Found' });
    const b = await fetch(r.url + '/generate');
    expect(b.status).toBe(405);
    expect(await b.json()).toEqual({ detail: 'Method Not Allowed' });
    expect(b.headers.get('allow')).toBe('POST, PUT');
  });
});

describe('worker API', () => {
  it('adds, lists, drains and removes workers', async () => {
    const add = await fetch(r.url + '/workers', { method: 'POST', headers: JSON_CT, body: JSON.stringify({ url: w2.url }) });
    expect(add.status).toBe(200);
    const info = (await add.json()) as { id: string; url: string; token_only: boolean; incremental: boolean };
    expect(info).toMatchObject({ url: w2.url, token_only: true, incremental: false });
    const list = (await (await fetch(r.url + '/workers')).json()) as { workers: { id: string }[] };
    expect(list.workers.map((w) => w.id)).toContain(info.id);
    const drain = await fetch(`${r.url}/workers/${info.id}`, { method: 'PUT', headers: JSON_CT, body: JSON.stringify({ draining: true }) });
    expect(((await drain.json()) as { health: string }).health).toBe('draining');
    const del = await fetch(`${r.url}/workers/${info.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect((await fetch(`${r.url}/workers/${info.id}`)).status).toBe(404);
  });
  it('refuses a bad worker URL with a clear message', async () => {
    const res = await fetch(r.url + '/workers', { method: 'POST', headers: JSON_CT, body: JSON.stringify({ url: 'ftp://x' }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/http/);
  });
});

describe('/generate surface', () => {
  it('echoes the request id: rid, else x-request-id, else a fresh one', async () => {
    const body = { input_ids: [1, 2], sampling_params: { max_new_tokens: 2 } };
    const a = await fetch(r.url + '/generate', { method: 'POST', headers: JSON_CT, body: JSON.stringify({ ...body, rid: 'mine' }) });
    expect(a.headers.get('x-request-id')).toBe('mine');
    expect(((await a.json()) as { meta_info: { id: string } }).meta_info.id).toBe('mine');
    const b = await fetch(r.url + '/generate', { method: 'POST', headers: { ...JSON_CT, 'x-request-id': 'hdr-1' }, body: JSON.stringify(body) });
    expect(((await b.json()) as { meta_info: { id: string } }).meta_info.id).toBe('hdr-1');
    const c = await fetch(r.url + '/generate', { method: 'POST', headers: JSON_CT, body: JSON.stringify(body) });
    expect(c.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);
    await c.arrayBuffer();
  });

  it('answers malformed bodies with SGLang\'s 400 itself and forwards none of them', async () => {
    const before = w1.stats().requestsStarted;
    for (const bad of ['{', '[]', '{"input_ids":"x"}', '{"input_ids":[1],"rid":5}', '{"input_ids":[1],"stream":{}}']) {
      const res = await fetch(r.url + '/generate', { method: 'POST', headers: JSON_CT, body: bad });
      expect(res.status).toBe(400);
      const json = (await res.json()) as Record<string, unknown>;
      expect(json).toMatchObject({ object: 'error', type: 'Bad Request', param: null, code: 400 });
      expect(typeof json.message).toBe('string');
    }
    expect(w1.stats().requestsStarted).toBe(before);
  });

  it('forwards what SGLang itself refuses, and the client gets the worker\'s refusal', async () => {
    for (const bad of ['{"input_ids":[]}', '{"input_ids":[1],"sampling_params":{"top_p":5}}']) {
      const res = await fetch(r.url + '/generate', { method: 'POST', headers: JSON_CT, body: bad });
      const direct = await fetch(w1.url + '/generate', { method: 'POST', headers: JSON_CT, body: bad });
      expect(res.status).toBe(direct.status);
      expect(await res.text()).toBe(await direct.text());
    }
  });

  it('passes a batch through to one worker unchanged', async () => {
    const res = await fetch(r.url + '/generate', { method: 'POST', headers: JSON_CT, body: JSON.stringify({ input_ids: [[1, 2], [3, 4]], sampling_params: { max_new_tokens: 3 } }) });
    expect(res.status).toBe(200);
    const json = (await res.json()) as unknown[];
    expect(Array.isArray(json)).toBe(true);
    expect(json).toHaveLength(2);
  });
});

describe('an abort at the worker', () => {
  it('(/abort_request, no error status) reaches the client as SGLang wrote it and is not migrated', async () => {
    const slow = await startWorker({ tokenIntervalMs: 20 });
    const other = await startWorker({ tokenIntervalMs: 20 });
    const router = await startRouter({ port: 0, workers: [slow.url], healthIntervalMs: 0 });
    try {
      await router.addWorker(other.url);
      const pending = fetch(router.url + '/generate', { method: 'POST', headers: JSON_CT, body: JSON.stringify({ rid: 'op-abort', input_ids: [5, 6], sampling_params: { max_new_tokens: 200, ignore_eos: true }, stream: true }) });
      const res = await pending;
      const reader = res.body!.getReader();
      let text = '';
      let aborted = false;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
        if (!aborted && text.split('\n\n').length > 4) {
          aborted = true;
          const owner = slow.stats().inFlight > 0 ? slow : other;
          // The worker holds the attempt under the router's own upstream rid, which starts with the id.
          const rid = owner.stats().rids.find((x) => x.startsWith('op-abort'))!;
          await fetch(owner.url + '/abort_request', { method: 'POST', headers: JSON_CT, body: JSON.stringify({ rid }) });
        }
      }
      const frames = text.split('\n\n').filter(Boolean);
      expect(frames.at(-1)).toBe('data: [DONE]');
      const last = JSON.parse(frames.at(-2)!.slice(6)) as { meta_info: { finish_reason: { type: string } } };
      expect(last.meta_info.finish_reason.type).toBe('abort');
      const rows = router.traceRows({ request: 'op-abort', kind: 'attempt' });
      const out = (await (await fetch(`${router.url}/requests/op-abort/output`)).json()) as { output_ids: number[]; attempts: { from_token: number }[] };
      expect(out.output_ids).toEqual((last as unknown as { output_ids: number[] }).output_ids);
      expect(out.attempts.map((x) => x.from_token)).toEqual([0]);
      expect((await fetch(`${router.url}/requests/nope/output`)).status).toBe(404);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ outcome: 'finished', finish_reason: 'abort' });
    } finally {
      await router.close();
      await slow.close();
      await other.close();
    }
  });
});
