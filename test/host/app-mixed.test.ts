// `npm start -- --sim-format mixed` / `baton serve --sim-format mixed`: the host on the real router
// with simulated workers of both wire formats (real processes), and traffic in both formats.
// Every request runs on workers of its format; a vLLM worker killed through the API breaks its
// streams, which go on on the other vLLM worker; close() leaves no process behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import { toVllm, generateRequest } from '../../host/traffic-request.ts';
import { DEFAULT_TRAFFIC } from '../../host/traffic-settings.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';
import { pidAlive } from '../sim/helpers.ts';

let app: AppHandle;
beforeAll(async () => {
  app = await startApp({ port: 0, sim: 4, simFormat: 'mixed', traffic: true, trafficSettings: { rate: 30, budgetMin: 40, budgetMax: 80, nonMigratableShare: 0 }, simTokenIntervalMs: 10, staticRoot: null });
});
afterAll(async () => {
  await app?.close();
});

describe('a mixed simulated cluster', () => {
  it('maps a generated request onto vLLM names', () => {
    const body = generateRequest({ ...DEFAULT_TRAFFIC, nonMigratableShare: 1 }, () => 0.1).body;
    const v = toVllm(body);
    expect(v.token_ids).toEqual(body.input_ids);
    expect(v.sampling_params.max_tokens).toBe(body.sampling_params.max_new_tokens);
    expect(v.sampling_params.seed).toBe(body.sampling_params.sampling_seed);
    expect('max_new_tokens' in v.sampling_params).toBe(false);
  });

  it('has workers of both formats, serves traffic of both, each on its own, and migrates vLLM streams too', async () => {
    await expect.poll(() => app.router.workers().map((w) => w.format).sort().join(','), { timeout: 30_000 }).toBe('sglang,sglang,vllm,vllm');
    await expect.poll(() => new Set(app.router.traceRows({ kind: 'request' }).map((r) => (r as RequestRow).format)).size, { timeout: 30_000 }).toBe(2);
    const sims = app.actions.simWorkers()!;
    const formatOf = new Map(app.router.workers().map((w) => [w.url, w.format]));
    const vllmIndex = sims.find((s) => formatOf.get(s.url) === 'vllm')!.index;
    const killedAt = Date.now();
    await fetch(`${app.router.url}/api/sim/${vllmIndex}/kill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    await expect.poll(() => app.router.traceRows({ kind: 'request' }).some((r) => (r as RequestRow).format === 'vllm' && (r as RequestRow).migrations > 0 && r.outcome === 'finished' && r.ended_at > killedAt), { timeout: 30_000 }).toBe(true);
    // Every attempt ran on a worker of its request's format.
    await expect.poll(() => app.router.traceRows({ kind: 'attempt' }).length, { timeout: 30_000 }).toBeGreaterThan(10);
    const rows = app.router.traceRows({ kind: 'attempt' }) as AttemptRow[];
    for (const a of rows) expect(formatOf.get(a.worker), `${a.request_id} on ${a.worker}`).toBe(a.format);
  }, 90_000);

  it('stops the workers of both formats on close', async () => {
    const pids = app.actions.simWorkers()!.filter((w) => w.alive).map((w) => w.pid!);
    expect(pids.length).toBe(3);
    await app.close();
    await expect.poll(() => pids.some(pidAlive), { timeout: 10_000 }).toBe(false);
  });
});
