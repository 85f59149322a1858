// Badges from the first event: a request's `request_admitted` event names its wire
// format and the path it came on, so the dashboard badges format, front and migratability while
// it runs, not once its rows arrive. A real router with one simulated worker of each format.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { RequestBook } from '../../renderer/src/store/request-book.ts';
import { formatBadge } from '../../renderer/src/views/Badges.tsx';

let app: AppHandle;
const events: BatonEvent[] = [];
beforeAll(async () => {
  app = await startApp({ port: 0, sim: 2, simFormat: 'mixed', traffic: false, simTokenIntervalMs: 5, staticRoot: null });
  app.router.subscribe((e) => void events.push(e));
}, 60_000);
afterAll(async () => {
  await app?.close();
});

async function post(path: string, id: string, body: unknown): Promise<void> {
  const res = await fetch(`${app.router.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': id }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  await res.text();
}

it('request_admitted carries format and front, and the page badges them before any row', async () => {
  await expect.poll(() => app.router.workers().map((w) => w.format).sort().join(','), { timeout: 30_000 }).toBe('sglang,vllm');
  await post('/generate', 'badge-sglang', { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 4, temperature: 0 }, stream: true });
  await post('/inference/v1/generate', 'badge-vllm', { token_ids: [1, 2, 3], sampling_params: { max_tokens: 4, temperature: 0.7, seed: 5 }, stream: false });
  for (const [id, format, front] of [['badge-sglang', 'sglang', '/generate'], ['badge-vllm', 'vllm', '/inference/v1/generate']] as const) {
    const admitted = events.find((e) => e.type === 'request_admitted' && e.request_id === id);
    expect(admitted).toMatchObject({ format, front });
    // The page, fed only the first event, knows the format, the front and the admission.
    const book = new RequestBook({ maxFinished: 10, maxTotal: 10 });
    book.applyBatch([admitted!]);
    const r = book.get(id)!;
    expect([r.format, r.front, r.status]).toEqual([format, front, 'running']);
    expect(r.admitted).not.toBeNull();
  }
  expect(events.find((e) => e.type === 'request_admitted' && e.request_id === 'badge-vllm')).toMatchObject({ admitted: false, reason: expect.any(String) });
  expect(formatBadge('openai', '/v1/chat/completions')).toBe('openai chat');
  expect(formatBadge('openai', '/v1/completions')).toBe('openai completions');
  expect(formatBadge('vllm', '/inference/v1/generate')).toBe('vllm');
}, 60_000);
