// `npm start -- --sim-format openai` / `baton serve --sim-format openai`: the host on the real
// router with its OpenAI front on the bundled tokenizer (Qwen3's), simulated SGLang workers on the
// same tokenizer (real processes), and chat-completion traffic. A worker killed through the API
// breaks chat streams, which go on on the other worker; the dashboard's output carries the text.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import { toOpenAiChat, generateRequest } from '../../host/traffic-request.ts';
import { DEFAULT_TRAFFIC } from '../../host/traffic-settings.ts';
import type { RequestRow } from '../../router/trace/row.ts';

let app: AppHandle;
beforeAll(async () => {
  app = await startApp({ port: 0, sim: 2, simFormat: 'openai', traffic: true, trafficSettings: { rate: 25, budgetMin: 60, budgetMax: 100, nonMigratableShare: 0, streamShare: 1 }, simTokenIntervalMs: 10, staticRoot: null });
});
afterAll(async () => {
  await app?.close();
});

it('maps a generated request onto a chat completion', () => {
  const body = generateRequest({ ...DEFAULT_TRAFFIC, nonMigratableShare: 1 }, () => 0.1).body;
  const c = toOpenAiChat(body);
  expect(c.max_tokens).toBe(body.sampling_params.max_new_tokens);
  expect(c.seed).toBe(body.sampling_params.sampling_seed);
  expect((c.messages as { content: string }[])[0]!.content.split(' ').length).toBe(body.input_ids.length + 1);
});

it('serves chat traffic through the OpenAI front, migrates it when a worker dies, and keeps its text for the dashboard', async () => {
  const openaiFinished = () => app.router.traceRows({ kind: 'request' }).filter((r) => (r as RequestRow).format === 'openai' && r.outcome === 'finished');
  await expect.poll(() => openaiFinished().length, { timeout: 30_000 }).toBeGreaterThan(3);
  const killedAt = Date.now();
  await fetch(`${app.router.url}/api/sim/0/kill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  let migrated: RequestRow | undefined;
  await expect.poll(() => {
    migrated = openaiFinished().find((r) => (r as RequestRow).migrations > 0 && r.ended_at > killedAt) as RequestRow | undefined;
    return migrated !== undefined;
  }, { timeout: 30_000 }).toBe(true);
  const out = app.router.requestOutput(migrated!.request_id)!;
  expect(out.token_text).toHaveLength(out.output_ids.length);
  expect(out.attempts.length).toBe(2);
  expect(out.token_text!.join('').length).toBeGreaterThan(0);
  // The chat request whole for the panel: the messages it was sent, the answer the client got.
  expect(out.chat?.messages.map((m) => m.role)).toContain('user');
  expect(out.chat?.answer.content).toBe(out.token_text!.join(''));
  expect(out.chat?.answer.finish_reason).toBe(migrated!.finish_reason);
}, 90_000);
