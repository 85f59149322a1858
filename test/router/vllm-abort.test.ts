// vLLM's abort, at the endpoint each worker actually serves. vLLM serves
// `POST /inference/v1/abort_requests` only since PR #58588 (2026-10); before, `/abort_requests`
// with `--tokens-only`, and nothing with `--enable-scale-out` alone
// (token_in_token_out/api_router.py `attach_router`). The router probes which one a worker
// serves (formats/vllm/probe.ts), shows it in GET /workers, and aborts there; a worker that serves
// none is aborted by closing the attempt's connection. Each shape's worker (the simulator's
// --legacy-generate / --legacy-abort / --enable-scale-out) really stops generating: its own
// counters say so. A real router process; the workers in-process, read through their counters.
import { afterEach, describe, expect, it } from 'vitest';
import { startVllmWorker, type VllmWorkerOptions } from '../../sim/vllm/worker.ts';
import type { SimWorker } from '../../sim/worker.ts';
import { eventually, openSse, postJson } from '../sim/helpers.ts';
import { spawnRouter, waitUntil, type RouterProc } from './harness/procs.ts';

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});

const GEN = '/inference/v1/generate';
const PROMPT = [7, 14, 21, 28, 35];
/** Enough tokens that only an abort ends the request within the test (20 ms a token: 100 s). */
const LONG = { max_tokens: 5000, ignore_eos: true };

async function setup(opts: VllmWorkerOptions, abortPath: string | null): Promise<{ w: SimWorker; r: RouterProc }> {
  const w = await startVllmWorker({ tokenIntervalMs: 20, prefillUsPerToken: 0, ...opts });
  started.push({ stop: () => w.close() });
  const r = await spawnRouter(['--worker', w.url, '--health-interval-ms', '300']);
  started.push(r);
  // The probe's finding, as GET /workers shows it (the dashboard reads the same WorkerInfo).
  await waitUntil(async () => {
    const body = (await (await fetch(r.url + '/workers')).json()) as { workers: Record<string, unknown>[] };
    return body.workers[0]?.format === 'vllm' && 'abort_path' in body.workers[0] && body.workers[0].abort_path === abortPath;
  }, 10_000, `GET /workers to show abort_path ${abortPath}`);
  return { w, r };
}

/** The worker stopped generating: nothing in flight, and no token more after a pause. */
async function stoppedGenerating(w: SimWorker): Promise<void> {
  // Fails fast when the abort went nowhere: the request would run for 100 s more.
  await eventually(() => (w.stats().inFlight === 0 ? true : undefined), 3000, 'the worker to stop generating');
  const tokens = w.stats().tokensGenerated;
  await new Promise((r) => setTimeout(r, 150));
  expect(w.stats().tokensGenerated).toBe(tokens);
}

const SHAPES: { name: string; opts: VllmWorkerOptions; path: string | null; counter: 'requestsAborted' | 'clientDisconnects' }[] = [
  { name: 'current vLLM (/inference/v1/abort_requests)', opts: {}, path: '/inference/v1/abort_requests', counter: 'requestsAborted' },
  { name: 'older serve/disagg vLLM, --tokens-only (/abort_requests only)', opts: { legacyGenerate: true }, path: '/abort_requests', counter: 'requestsAborted' },
  { name: 'older vLLM, --enable-scale-out alone (no abort endpoint)', opts: { legacyAbort: true, enableScaleOut: true }, path: null, counter: 'clientDisconnects' },
];

describe('vLLM abort at the endpoint the worker serves', () => {
  for (const shape of SHAPES) {
    it(`${shape.name}: the router's /inference/v1/abort_requests stops the worker and the client gets its abort finish`, async () => {
      const { w, r } = await setup(shape.opts, shape.path);
      const s = await openSse(r.url + GEN, { token_ids: PROMPT, request_id: 'ab-1', stream: true, sampling_params: LONG });
      await s.waitFrames(3);
      const abort = await postJson(r.url + '/inference/v1/abort_requests', { request_ids: ['generate-tokens-ab-1'] });
      expect(abort.status).toBe(200);
      await stoppedGenerating(w);
      expect(w.stats()[shape.counter]).toBe(1);
      const end = await s.ended;
      expect(end.sawDone).toBe(true);
      const chunks = s.chunks() as { request_id: string; choices: { finish_reason: string | null }[] }[];
      expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('abort');
      expect(chunks.every((c) => c.request_id === 'generate-tokens-ab-1')).toBe(true);
    });
  }

  it('no abort endpoint: a unary request aborted through the router answers 200 with finish_reason "abort", and the worker stops', async () => {
    const { w, r } = await setup({ legacyAbort: true, enableScaleOut: true }, null);
    const pending = postJson(r.url + GEN, { token_ids: PROMPT, request_id: 'ab-u', sampling_params: LONG });
    await eventually(() => (w.stats().tokensGenerated >= 3 ? true : undefined));
    await postJson(r.url + '/abort_requests', { request_ids: ['ab-u'] });
    await stoppedGenerating(w);
    expect(w.stats().clientDisconnects).toBe(1);
    const answer = await pending;
    expect(answer.status).toBe(200);
    const choice = (answer.body as { choices: { finish_reason: string; token_ids: number[] }[] }).choices[0]!;
    expect(choice.finish_reason).toBe('abort');
    expect(choice.token_ids.length).toBeGreaterThanOrEqual(3);
  });

  for (const shape of SHAPES.slice(1)) {
    it(`${shape.name}: a client that goes away stops the worker too`, async () => {
      const { w, r } = await setup(shape.opts, shape.path);
      const s = await openSse(r.url + GEN, { token_ids: PROMPT, stream: true, sampling_params: LONG });
      await s.waitFrames(3);
      s.destroy();
      await stoppedGenerating(w);
      const st = w.stats();
      expect(st.requestsAborted + st.clientDisconnects).toBe(1);
    });
  }
});
