// The Request view's chat section: a chat request whole (messages, tools, the answer's reasoning,
// tool calls and finish) from the router's kept output.
import { expect, it } from 'vitest';
import type { RequestOutput } from '../../host/contract.ts';
import { chatLayout } from '../../renderer/src/store/chat-view.ts';

const chat: NonNullable<RequestOutput['chat']> = {
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] },
    { role: 'tool', content: '18C', tool_call_id: 'call_1' },
  ],
  messages_omitted: 3,
  tools: [{ name: 'get_weather', description: 'Weather by city', parameters: '{"type":"object"}' }],
  tools_omitted: 0,
  tool_choice: 'auto',
  answer: { reasoning: 'The user wants the forecast.', content: '', tool_calls: [{ name: 'get_forecast', arguments: '{"city":"Paris","days":2}' }], finish_reason: 'tool_calls' },
  clipped: false,
};

it('lays out the messages with the gap where the router kept only the head and tail', () => {
  const l = chatLayout(chat);
  expect(l.lines.map((x) => (x.kind === 'gap' ? `gap ${x.omitted}` : `${x.index} ${x.role}`))).toEqual(['0 system', '1 user', 'gap 3', '5 assistant', '6 tool']);
  const asked = l.lines[3]!;
  expect(asked.kind === 'message' && asked.calls).toEqual([{ name: 'get_weather', arguments: '{\n  "city": "Paris"\n}' }]);
  const tool = l.lines[4]!;
  expect(tool.kind === 'message' && tool.toolCallId).toBe('call_1');
});

it('shows the tools offered and the answer: reasoning, tool calls and finish', () => {
  const l = chatLayout(chat);
  expect(l.toolsNote).toBe('1 tool, tool_choice auto');
  expect(l.tools[0]!.name).toBe('get_weather');
  expect(l.answer.reasoning).toBe('The user wants the forecast.');
  expect(l.answer.content).toBeNull();
  expect(l.answer.calls).toEqual([{ name: 'get_forecast', arguments: '{\n  "city": "Paris",\n  "days": 2\n}' }]);
  expect(l.answer.finish).toBe('tool_calls');
  expect(l.clippedNote).toBeNull();
});

it('keeps arguments that are not JSON as sent, and says when the router cut texts', () => {
  const l = chatLayout({ ...chat, messages_omitted: 0, tools: [], answer: { ...chat.answer, tool_calls: [{ name: 'f', arguments: '{"a": 1' }], finish_reason: null }, clipped: true });
  expect(l.lines.some((x) => x.kind === 'gap')).toBe(false);
  expect(l.toolsNote).toBeNull();
  expect(l.answer.calls[0]!.arguments).toBe('{"a": 1');
  expect(l.answer.finish).toMatch(/did not finish/);
  expect(l.clippedNote).toMatch(/4,000 characters/);
});
