// Chat templates render as HF's apply_chat_template does. The expected strings were derived by
// reading each template (Qwen3's and Llama 3's, as the fixture packages ship them) and then
// checked against Python's jinja2 3.1.6 run with HF's settings (sandboxed, trim_blocks,
// lstrip_blocks, loopcontrols, HF's tojson); both agreed.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TemplateError, loadTokenizer, type ChatMessage } from '../../router/tokenizer/index.ts';
import fc from 'fast-check';
import { ChatTemplates, templatesFromConfig } from '../../router/tokenizer/chat-template.ts';
import { jinjaLowered, jinja, publishedJinja } from '../../router/tokenizer/jinja.ts';
import { LLAMA3_DIR, QWEN3_DIR, fixture, makeModelDir, runs } from './fixtures.ts';

const qwen = fixture('qwen3');
const llama = fixture('llama3');
const scratch = mkdtempSync(join(tmpdir(), 'baton-tpl-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const qwenConfig = JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
/** A Qwen3 directory whose tokenizer_config has these changes. */
const qwenWith = (name: string, config: Record<string, unknown>, files: Record<string, unknown> = {}) =>
  loadTokenizer(makeModelDir(scratch, name, QWEN3_DIR, { 'tokenizer_config.json': { ...qwenConfig, ...config }, ...files }), name, {
    now: () => new Date(2024, 6, 26, 9, 5, 7),
  });

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Hello!' },
];

describe('chat templates', () => {
  it('Qwen3: system + user with the generation prompt', () => {
    expect(qwen.applyChatTemplate(conversation, { addGenerationPrompt: true })).toBe(
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n',
    );
    // add_generation_prompt defaults to false, as in HF.
    expect(qwen.applyChatTemplate(conversation)).toBe('<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n');
    // A template kwarg: Qwen3's enable_thinking=false writes an empty think block.
    expect(qwen.applyChatTemplate(conversation, { addGenerationPrompt: true, extra: { enable_thinking: false } })).toMatch(/<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);
  });

  it('Llama 3: BOS from the template, headers, trimmed content', () => {
    expect(llama.applyChatTemplate([...conversation.slice(0, 1), { role: 'user', content: '  Hello!\n' }], { addGenerationPrompt: true })).toBe(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>' +
        '<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
  });

  it('Qwen3 with tools: tool definitions through tojson, an assistant tool call and a tool response', () => {
    const tools = [
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
      },
    ];
    const messages: ChatMessage[] = [
      ...conversation,
      { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', content: 'sunny' },
    ];
    expect(qwen.applyChatTemplate(messages, { addGenerationPrompt: true, tools })).toBe(
      '<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
        'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
        '{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n' +
        '</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\nHello!<|im_end|>\n' +
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('encodeChat encodes the rendered prompt without added special tokens (no second BOS)', () => {
    expect(qwen.encodeChat(conversation, { addGenerationPrompt: true })).toEqual([
      151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198, 9707, 0, 151645, 198, 151644, 77091, 198,
    ]);
    const ids = llama.encodeChat(conversation, { addGenerationPrompt: true });
    expect(ids.slice(0, 5)).toEqual([128000, 128006, 9125, 128007, 271]);
    expect(ids.filter((id) => id === 128000)).toHaveLength(1);
    expect(llama.decode(ids, { skipSpecialTokens: false })).toBe(llama.applyChatTemplate(conversation, { addGenerationPrompt: true }));
  });
});

describe('template errors and template choice', () => {
  it("raise_exception in a template is a TemplateError with the template's message", () => {
    const tok = qwenWith('raises', { chat_template: "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation roles must alternate user/assistant') }}{% endif %}ok" });
    expect(() => tok.applyChatTemplate(conversation)).toThrow(new TemplateError('Conversation roles must alternate user/assistant'));
    expect(tok.applyChatTemplate([{ role: 'user', content: 'x' }])).toBe('ok');
  });

  it('a model without a template, a template that does not parse, and one that fails at run time are TemplateErrors', () => {
    const { chat_template: _drop, ...noTemplate } = qwenConfig;
    const none = loadTokenizer(makeModelDir(scratch, 'none', QWEN3_DIR, { 'tokenizer_config.json': noTemplate }));
    expect(() => none.applyChatTemplate(conversation)).toThrow(TemplateError);
    expect(() => none.applyChatTemplate(conversation)).toThrow(/no chat template/);
    expect(() => qwenWith('unparsable', { chat_template: '{% for m in messages %}' }).applyChatTemplate(conversation)).toThrow(/cannot be parsed/);
    // Qwen3's template calls content.startswith: a null content fails inside the template.
    expect(() => qwen.applyChatTemplate([{ role: 'user', content: null }])).toThrow(TemplateError);
  });

  it('a list of named templates: "default", or "tool_use" when tools are given', () => {
    const tok = qwenWith('named', {
      chat_template: [
        { name: 'default', template: 'plain:{{ messages[0].content }}' },
        { name: 'tool_use', template: 'tools:{{ tools | length }}' },
      ],
    });
    expect(tok.applyChatTemplate(conversation)).toBe('plain:You are a helpful assistant.');
    expect(tok.applyChatTemplate(conversation, { tools: [{ type: 'function' }] })).toBe('tools:1');
    expect(tok.applyChatTemplate(conversation, { tools: null })).toBe('plain:You are a helpful assistant.');
  });

  it('chat_template.jinja takes priority over the config (as transformers loads it)', () => {
    const tok = qwenWith('jinja-file', {}, { 'chat_template.jinja': '{{ bos_token }}|{{ eos_token }}|{% for m in messages %}{{ m.role }}{% endfor %}' });
    // Qwen3 has no BOS: bos_token is absent, and jinja prints an undefined variable as nothing.
    expect(tok.applyChatTemplate(conversation)).toBe('|<|im_end|>|systemuser');
  });

  it('strftime_now formats the current time as Python does', () => {
    const tok = qwenWith('date', { chat_template: "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%A %B %-d') }} {{ strftime_now('%H:%M:%S %p %j %y') }}" });
    expect(tok.applyChatTemplate(conversation)).toBe('26 Jul 2024 Friday July 26 09:05:07 AM 208 24');
  });
});

describe('the lowered jinja build (router/tokenizer/jinja.ts)', () => {
  it('is the one in use, and renders what the published package renders, refusals included', () => {
    expect(jinjaLowered()).toBe(true);
    const now = () => new Date(2024, 6, 26, 9, 5, 7);
    const pairs = [QWEN3_DIR, LLAMA3_DIR].map((dir) => {
      const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
      const special = { bos_token: String(config.bos_token ?? ''), eos_token: String(config.eos_token ?? '') };
      const sources = templatesFromConfig(config.chat_template);
      return [new ChatTemplates(sources, special, now, jinja()), new ChatTemplates(sources, special, now, publishedJinja)] as const;
    });
    const outcome = (t: ChatTemplates, messages: ChatMessage[], opts: Parameters<ChatTemplates['render']>[1]) => {
      try {
        return { text: t.render(messages, opts) };
      } catch (err) {
        return { error: (err as Error).message };
      }
    };
    const content = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 30 }), fc.constantFrom('<think>\nhm\n</think>\n\nok', '<tool_response>x</tool_response>', '  padded  '));
    const toolCall = fc.record({ type: fc.constant('function'), function: fc.record({ name: fc.constantFrom('get_weather', 'f'), arguments: fc.oneof(fc.constant('{"a":1}'), fc.dictionary(fc.string({ maxLength: 4 }), fc.integer())) }) });
    const message = fc.oneof(
      fc.record({ role: fc.constantFrom('system', 'user', 'tool'), content }),
      fc.record({ role: fc.constant('assistant'), content, tool_calls: fc.option(fc.array(toolCall, { maxLength: 2 }), { nil: undefined }) }, { requiredKeys: ['role', 'content'] }),
    );
    const tools = fc.option(fc.constant([{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }] as unknown[]), { nil: null });
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 5 }), fc.boolean(), tools, fc.option(fc.boolean(), { nil: undefined }), (messages, addGenerationPrompt, tl, thinking) => {
        const opts = { addGenerationPrompt, tools: tl, extra: thinking === undefined ? undefined : { enable_thinking: thinking } };
        for (const [lowered, pub] of pairs) expect(outcome(lowered, messages as ChatMessage[], opts)).toEqual(outcome(pub, messages as ChatMessage[], opts));
      }),
      { numRuns: runs() },
    );
  });
});
