// Requests Baton cannot stitch per sample (batches, n > 1) are passed through on one attempt,
// and still leave exactly one attempt row and one request row; with no worker at all, exactly
// one request row (no attempt), like any other request.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';

let worker: SimWorker;
let router: RouterHandle;
let empty: RouterHandle;

beforeAll(async () => {
  worker = await startWorker({ tokenIntervalMs: 1 });
  router = await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 60_000 });
  empty = await startRouter({ port: 0, workers: [], healthIntervalMs: 60_000 });
});
afterAll(async () => {
  await router?.close();
  await empty?.close();
  await worker?.close();
});

async function post(url: string, id: string, body: object): Promise<number> {
  const res = await request(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': id }, body: JSON.stringify(body) });
  await res.body.text();
  return res.statusCode;
}

describe('rows of pass-through requests', () => {
  it('a batch and an n > 1 request: one attempt row and one request row each', async () => {
    const sampling = { max_new_tokens: 4, ignore_eos: true };
    expect(await post(router.url, 'batch-1', { input_ids: [[1, 2, 3], [4, 5, 6]], sampling_params: sampling })).toBe(200);
    expect(await post(router.url, 'n2-1', { input_ids: [1, 2, 3], sampling_params: { ...sampling, n: 2, temperature: 1 } })).toBe(200);
    for (const [id, reason] of [['batch-1', 'batch'], ['n2-1', 'n_gt_1']] as const) {
      const rows = router.traceRows({ request: id });
      const attempts = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
      const requests = rows.filter((r): r is RequestRow => r.kind === 'request');
      expect(attempts).toHaveLength(1);
      expect(requests).toHaveLength(1);
      expect(attempts[0]).toMatchObject({ attempt: 0, rid: id, worker: worker.url, outcome: 'finished' });
      expect(requests[0]).toMatchObject({ attempts: 1, migrations: 0, admitted: false, admission_reason: reason, outcome: 'finished' });
    }
  });

  it('with no worker: a 503 and one request row, no attempt row', async () => {
    expect(await post(empty.url, 'nobody-batch', { input_ids: [[1, 2], [3, 4]], sampling_params: { max_new_tokens: 2 } })).toBe(503);
    expect(await post(empty.url, 'nobody', { input_ids: [1, 2], sampling_params: { max_new_tokens: 2 } })).toBe(503);
    for (const id of ['nobody-batch', 'nobody']) {
      const rows = empty.traceRows({ request: id });
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ kind: 'request', attempts: 0, migrations: 0, outcome: 'failed', error: null });
    }
  });
});
