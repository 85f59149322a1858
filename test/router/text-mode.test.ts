// Text-mode workers (no --skip-tokenizer-init) are served, not migrated: a text prompt passes
// through the router and the answer, text included, is the worker's, in either streaming mode.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { foldText } from './harness/fold-text.ts';

describe.each([false, true])('text worker, incremental=%s', (incremental) => {
  let w: SimWorker;
  let r: RouterHandle;
  beforeAll(async () => {
    w = await startWorker({ text: true, incremental, tokenIntervalMs: 0 });
    r = await startRouter({ port: 0, workers: [w.url], healthIntervalMs: 0 });
  });
  afterAll(async () => {
    await r.close();
    await w.close();
  });

  it.each([false, true])('stream=%s: same text and ids as the worker alone', async (stream) => {
    const body = { text: 'the quick brown fox', sampling_params: { max_new_tokens: 12, ignore_eos: true }, stream };
    const viaRouter = await fetch(r.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, rid: `t-${stream}` }) });
    const direct = await fetch(w.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, rid: `d-${stream}` }) });
    const a = foldText(viaRouter.status, viaRouter.headers, await viaRouter.text(), stream, incremental);
    const b = foldText(direct.status, direct.headers, await direct.text(), stream, incremental);
    expect(a.error).toBeNull();
    const text = (x: typeof a) => (incremental && stream ? x.frames.map((f) => f.text).join('') : x.body!.text);
    expect(text(a)).toEqual(text(b));
    expect(typeof text(a)).toBe('string');
    expect(a.body!.output_ids).toEqual(b.body!.output_ids);
    const rows = r.traceRows({ request: `t-${stream}`, kind: 'request' });
    expect(rows[0]).toMatchObject({ admitted: false, admission_reason: 'text_prompt' });
  });
});
