// `npm start -- --sim-format openai` / `baton serve --sim-format openai`: the host on the real
// router with its OpenAI front on the bundled tokenizer (Qwen3's), simulated SGLang workers on the
// same tokenizer (real processes), and chat-completion traffic. A worker killed through the API
// breaks chat streams, which go on on the other worker; the dashboard's output carries the text.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import { agentTurn, toOpenAiChat, generateRequest } from '../../host/traffic-request.ts';
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
  // A plain chat (no tools): the answer is the model's text as it is; an agent's is parsed (below).
  if (out.chat!.tools.length === 0) expect(out.chat?.answer.content).toBe(out.token_text!.join(''));
  // The finish the client got: the worker's, but "tool_calls" where the answer holds a call.
  expect(out.chat?.answer.finish_reason).toBe(out.chat!.answer.tool_calls.length > 0 ? 'tool_calls' : migrated!.finish_reason);
}, 90_000);

it("sends agents' chat requests with tools: the model thinks and calls get_weather, then answers the tool's result", async () => {
  const chats = () => app.router.traceRows({ kind: 'request' })
    .filter((r) => (r as RequestRow).format === 'openai' && r.outcome === 'finished')
    .map((r) => app.router.requestOutput(r.request_id)?.chat)
    .filter((c) => c !== undefined && c.tools.length > 0);
  await expect.poll(() => {
    const c = chats();
    return c.some((x) => x!.answer.finish_reason === 'tool_calls') && c.some((x) => x!.messages.some((m) => m.role === 'tool'));
  }, { timeout: 30_000 }).toBe(true);
  for (const c of chats()) {
    const city = /weather in (\w+)/.exec(c!.messages[0]!.content)![1]!;
    expect(c!.tools.map((t) => t.name)).toEqual(['get_weather']);
    if (c!.messages.some((m) => m.role === 'tool')) {
      // The second turn: the thought, then the answer quoting the tool's result.
      expect(c!.answer.finish_reason).toBe('stop');
      expect(c!.answer.reasoning).toContain('The tool answered');
      expect(c!.answer.content).toMatch(new RegExp(`^\\s*The forecast says .* in ${city}\\.$`));
    } else {
      // The first: a thought and the call, exactly as scripted (a migrated one included).
      expect(c!.answer.reasoning).toBe(`\nThey ask about the weather in ${city}. The get_weather tool knows it.\n`);
      expect(c!.answer.tool_calls.map((t) => [t.name, JSON.parse(t.arguments)])).toEqual([['get_weather', { city, unit: 'celsius' }]]);
      expect(c!.answer.finish_reason).toBe('tool_calls');
    }
  }
}, 60_000);

it('picks agent turns by the prompt ids: a question with the tool, or the turn after with its result', () => {
  const ask = toOpenAiChat({ input_ids: [7, 2, 0, 1, 2, 3], sampling_params: { max_new_tokens: 50, temperature: 0, ignore_eos: true }, stream: false });
  expect(agentTurn([7, 2])).toBe('ask');
  expect(ask.tools).toHaveLength(1);
  expect(ask.messages).toEqual([{ role: 'user', content: 'What is the weather in Paris?' }]);
  // Room for the whole script, and no ignore_eos: cut short, the call would not parse.
  expect(ask.max_tokens).toBe(200);
  expect(ask).not.toHaveProperty('ignore_eos');
  const answer = toOpenAiChat({ input_ids: [9, 1, 1, 4, 5, 6], sampling_params: { max_new_tokens: 300, temperature: 0 }, stream: true });
  expect((answer.messages as { role: string }[]).map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
  expect(answer.max_tokens).toBe(300);
  expect(agentTurn([3, 1])).toBeNull();
});
