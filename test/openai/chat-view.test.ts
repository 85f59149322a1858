// What the router keeps of a chat request for the dashboard is bounded: a long conversation keeps
// its head and tail, long texts are cut, tools and calls past their limits are left out.
import { expect, it } from 'vitest';
import { CALL_LIMIT, ChatAnswerLog, chatViewOf, MESSAGE_LIMIT, TEXT_LIMIT, TOOL_LIMIT, VIEW_BUDGET } from '../../router/core/chat-view.ts';

it('keeps a long conversation bounded: its head and tail, texts cut, tools counted', () => {
  const messages = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: i === 39 ? 'x'.repeat(TEXT_LIMIT + 10) : `m${i}` }));
  const tools = Array.from({ length: TOOL_LIMIT + 3 }, (_, i) => ({ type: 'function', function: { name: `t${i}`, parameters: { type: 'object' } } }));
  const v = chatViewOf({ messages, tools, tool_choice: { type: 'function', function: { name: 't1' } } });
  expect(v.messages).toHaveLength(MESSAGE_LIMIT);
  expect(v.messages_omitted).toBe(40 - MESSAGE_LIMIT);
  expect(v.messages.slice(0, 3).map((m) => m.content)).toEqual(['m0', 'm1', `m${40 - MESSAGE_LIMIT + 2}`]);
  expect(v.messages.at(-1)!.content).toHaveLength(TEXT_LIMIT);
  expect(v.clipped).toBe(true);
  expect(v.tools).toHaveLength(TOOL_LIMIT);
  expect(v.tools_omitted).toBe(3);
  expect(v.tools[0]!.parameters).toBe('{"type":"object"}');
  expect(v.tool_choice).toBe('t1');
});

it('reads an agent turn sent back: the assistant calls (arguments a JSON string) and the tool answer', () => {
  const v = chatViewOf({ messages: [
    { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    { role: 'assistant', content: null, reasoning_content: 'think', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'ok' },
  ] });
  expect(v.messages).toEqual([
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: '', reasoning: 'think', tool_calls: [{ name: 'f', arguments: '{"a":1}' }] },
    { role: 'tool', content: 'ok', tool_call_id: 'c1' },
  ]);
  expect(v.tool_choice).toBe('none');
  expect(v.clipped).toBe(false);
});

it('logs the answer as streamed within its limits', () => {
  const log = new ChatAnswerLog();
  log.addReasoning('a'.repeat(TEXT_LIMIT));
  log.addReasoning('more');
  log.callDelta(0, 'f', '{"a":');
  log.callDelta(0, null, '1}');
  log.callDelta(CALL_LIMIT, 'g', '{}');
  log.setFinish('tool_calls');
  const v = log.view(chatViewOf({ messages: [{ role: 'user', content: 'q' }] }));
  expect(v.answer.reasoning).toHaveLength(TEXT_LIMIT);
  expect(v.answer.tool_calls).toEqual([{ name: 'f', arguments: '{"a":1}' }]);
  expect(v.answer.finish_reason).toBe('tool_calls');
  expect(v.clipped).toBe(true);
});

it('keeps at most VIEW_BUDGET characters of a request however long its messages', () => {
  const v = chatViewOf({ messages: Array.from({ length: MESSAGE_LIMIT }, () => ({ role: 'user', content: 'y'.repeat(TEXT_LIMIT), reasoning_content: 'z'.repeat(TEXT_LIMIT) })) });
  expect(v.messages.reduce((n, m) => n + m.content.length + (m.reasoning?.length ?? 0), 0)).toBe(VIEW_BUDGET);
  expect(v.messages).toHaveLength(MESSAGE_LIMIT);
  expect(v.clipped).toBe(true);
});
