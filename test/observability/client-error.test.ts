// Every failed request says on its row what its client got: the router's own error (no worker
// of the request's format, migration exhausted) is the request row's `client_error` and
// `client_status`, word for word what the client read. Real workers (in-process simulated
// SGLang and vLLM), a real router.
import { afterAll, describe, expect, it } from 'vitest';
import { startWorker } from '../../sim/worker.ts';
import { startVllmWorker } from '../../sim/vllm/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { RequestRow } from '../../router/trace/row.ts';
import { promptIds, until } from './harness.ts';

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  while (closers.length) await closers.pop()!();
});

async function post(url: string, path: string, id: string, body: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': id }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

const requestRow = (router: RouterHandle, id: string) => router.traceRows({ request: id, kind: 'request' })[0] as RequestRow | undefined;

describe('a failed request row carries the error its client got', () => {
  it("a mixed cluster whose only vLLM worker is gone: 'no_worker: no healthy worker serves format vllm'", async () => {
    const sg = await startWorker({ tokenIntervalMs: 0 });
    const vl = await startVllmWorker({ tokenIntervalMs: 0, prefillUsPerToken: 0 });
    closers.push(() => sg.close());
    const router = await startRouter({ port: 0, workers: [sg.url, vl.url], healthIntervalMs: 0 });
    closers.push(() => router.close());
    expect(router.workers().map((w) => w.format).sort()).toEqual(['sglang', 'vllm']);
    await vl.close();
    // The first request meets the refused connection (the worker is then dead), the second finds no worker at all.
    for (const id of ['v-0', 'v-1']) {
      await post(router.url, '/inference/v1/generate', id, { token_ids: promptIds(8, 1), sampling_params: { max_tokens: 4 }, stream: false });
    }
    const got = await post(router.url, '/inference/v1/generate', 'v-2', { token_ids: promptIds(8, 1), sampling_params: { max_tokens: 4 }, stream: false });
    expect(got.status).toBe(503);
    expect(got.text).toContain('no healthy worker serves format vllm');
    await until(() => requestRow(router, 'v-2') !== undefined, 5000, 'the request row');
    const row = requestRow(router, 'v-2')!;
    expect(row).toMatchObject({ outcome: 'failed', attempts: 0, client_error: 'no_worker: no healthy worker serves format vllm', client_status: 503 });
    // The SGLang side still serves; a finished request says nothing.
    const ok = await post(router.url, '/generate', 's-0', { input_ids: promptIds(8, 2), sampling_params: { max_new_tokens: 4, ignore_eos: true } });
    expect(ok.status).toBe(200);
    await until(() => requestRow(router, 's-0') !== undefined, 5000, 'the request row');
    expect(requestRow(router, 's-0')).toMatchObject({ outcome: 'finished', client_error: null, client_status: null });
  });

  it("a request whose migration limit is spent: 'migration_exhausted: ...', the message the client read", async () => {
    const a = await startWorker({ tokenIntervalMs: 1 });
    const b = await startWorker({ tokenIntervalMs: 1 });
    closers.push(() => a.close(), () => b.close());
    const router = await startRouter({ port: 0, workers: [a.url, b.url], healthIntervalMs: 0, benchMs: 0, circuitFailureThreshold: 1000, migrationLimit: 1 });
    closers.push(() => router.close());
    a.fault({ kind: 'reset', afterTokens: 5 });
    b.fault({ kind: 'reset', afterTokens: 5 });
    const got = await post(router.url, '/generate', 'x-0', { input_ids: promptIds(8, 3), sampling_params: { max_new_tokens: 40, ignore_eos: true } });
    expect(got.status).toBeGreaterThanOrEqual(500);
    const message = (JSON.parse(got.text) as { message?: string; error?: { message?: string } });
    const text = message.message ?? message.error?.message ?? '';
    expect(text).toMatch(/^migration exhausted after 2 attempts/);
    await until(() => requestRow(router, 'x-0') !== undefined, 5000, 'the request row');
    const row = requestRow(router, 'x-0')!;
    expect(row.outcome).toBe('failed');
    expect(row.client_error).toBe(`migration_exhausted: ${text}`);
    expect(row.client_status).toBe(got.status);
  });
});
