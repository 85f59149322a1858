// The official `openai` SDK (6.x) as agent code drives it, against a real Baton router over
// scripted simulated workers (./stack.ts): the SDK's own tool runner
// (`chat.completions.runTools`, which appends each answer's message to the conversation and calls
// the tools), unary and streamed; a manual loop with `parallel_tool_calls: false`; the Responses
// API's loop, chained by `previous_response_id` (store) and stateless (the output items sent
// back); and a worker SIGKILLed inside a streamed call's arguments. Each asserts what the user
// gets: the tool called with the model's arguments, the tool's result in the final text (the
// model quotes it only if the second turn's prompt held it), and the thoughts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { RunnableToolFunctionWithParse } from 'openai/lib/RunnableFunction';
import {
  MODEL, expectedArgs, finalText, question, report, startStack, thought1, thought2, twoCityQuestion, weatherParameters, type Stack, killInArguments } from './stack.ts';

let stack: Stack;
let client: OpenAI;

beforeAll(async () => {
  stack = await startStack();
  client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await stack?.stop();
});

type Args = { city: string; unit?: string };

/** A get_weather tool for runTools that records every call's arguments. */
function weatherTool(calls: Args[]): RunnableToolFunctionWithParse<Args> {
  return {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: weatherParameters,
      parse: (s: string) => JSON.parse(s) as Args,
      function: (args: Args) => {
        calls.push(args);
        return report(args);
      },
    },
  };
}

const chatTools: OpenAI.Chat.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weatherParameters } }];
const responsesTools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: weatherParameters, strict: false }];

/** The reasoning a chat message or delta carries, in either field a server may name it. */
const reasoningOf = (m: object): string | undefined => (m as { reasoning_content?: string }).reasoning_content ?? (m as { reasoning?: string }).reasoning;

/** One tool loop through runTools as a user writes it; what the user ends with. */
async function runToolsLoop(city: string, stream: boolean, onArgsDelta?: () => void) {
  const calls: Args[] = [];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: question(city) }];
  const body = { model: MODEL, messages, tools: [weatherTool(calls)] };
  let streamedReasoning = '';
  const runner = stream ? client.chat.completions.runTools({ ...body, stream: true }).on('chunk', (chunk) => {
    for (const c of chunk.choices) {
      streamedReasoning += reasoningOf(c.delta) ?? '';
      if ((c.delta.tool_calls ?? []).some((t) => (t.function?.arguments ?? '').length > 0)) onArgsDelta?.();
    }
  }) : client.chat.completions.runTools(body);
  // A failed turn is returned, not thrown, so that a test can check the first turn's call before
  // it looks at the error (the kill scenario compares the calls either way).
  let final: string | null = null;
  let error: string | undefined;
  try {
    final = await runner.finalContent();
  } catch (err) {
    error = (err as Error).message;
  }
  const completions = runner.allChatCompletions();
  // The first turn's answer as the conversation keeps it, without the random call ids.
  const firstTurn = completions[0]?.choices[0]?.message.tool_calls?.map((t) => ({ ...t, id: undefined }));
  return { calls, final, error, completions, streamedReasoning, firstTurn };
}

describe('chat.completions.runTools', () => {
  it('unary: the tool is called with the model\'s arguments, its result reaches the second turn, the thoughts are on the messages', async () => {
    const r = await runToolsLoop('Paris', false);
    expect(r.calls).toEqual([expectedArgs('Paris')]);
    expect(r.error).toBeUndefined();
    expect(r.final?.trim()).toBe(finalText(report({ city: 'Paris' })));
    expect(r.completions).toHaveLength(2);
    expect(reasoningOf(r.completions[0]!.choices[0]!.message)).toBe(thought1('Paris'));
    expect(reasoningOf(r.completions[1]!.choices[0]!.message)).toBe(thought2);
    expect(r.completions[1]!.choices[0]!.finish_reason).toBe('stop');
  });

  it('streamed: the same calls and final text; the thoughts stream as deltas', async () => {
    const r = await runToolsLoop('Lyon', true);
    expect(r.calls).toEqual([expectedArgs('Lyon')]);
    expect(r.error).toBeUndefined();
    expect(r.final?.trim()).toBe(finalText(report({ city: 'Lyon' })));
    expect(r.streamedReasoning).toBe(thought1('Lyon') + thought2);
  });
});

it('a manual loop with parallel_tool_calls false: the model\'s two calls come back as one (vLLM keeps the first), and its result reaches the second turn', async () => {
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: twoCityQuestion('Oslo', 'Rome') }];
  const first = await client.chat.completions.create({ model: MODEL, messages, tools: chatTools, parallel_tool_calls: false });
  const m = first.choices[0]!.message;
  expect(m.tool_calls?.map((t) => (t as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments)).toEqual(['{"city": "Oslo"}']);
  messages.push(m);
  for (const t of m.tool_calls ?? []) {
    const args = JSON.parse((t as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments) as Args;
    messages.push({ role: 'tool', tool_call_id: t.id, content: report(args) });
  }
  const second = await client.chat.completions.create({ model: MODEL, messages, tools: chatTools, parallel_tool_calls: false });
  expect(second.choices[0]!.message.content?.trim()).toBe(finalText(report({ city: 'Oslo' })));
});

describe('responses', () => {
  /** The reasoning items' text, from their content (reasoning_text) or their summary. */
  const reasoningText = (r: OpenAI.Responses.Response) => r.output.filter((o): o is OpenAI.Responses.ResponseReasoningItem => o.type === 'reasoning')
    .map((o) => (o.content ?? []).map((c) => c.text).join('') || o.summary.map((s) => s.text).join('')).join('');

  /** Runs the call the response asks for; the function_call_output items to send back. */
  const runCalls = (r: OpenAI.Responses.Response, calls: Args[]): OpenAI.Responses.ResponseInputItem.FunctionCallOutput[] => r.output
    .filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')
    .map((fc) => {
      expect(fc.name).toBe('get_weather');
      const args = JSON.parse(fc.arguments) as Args;
      calls.push(args);
      return { type: 'function_call_output', call_id: fc.call_id, output: report(args) };
    });

  it('previous_response_id: the second turn sends only the tool\'s output and the stored response supplies the rest', async () => {
    const calls: Args[] = [];
    const first = await client.responses.create({ model: MODEL, input: question('Lima'), tools: responsesTools, store: true });
    expect(reasoningText(first)).toBe(thought1('Lima'));
    const outputs = runCalls(first, calls);
    expect(calls).toEqual([expectedArgs('Lima')]);
    const second = await client.responses.create({ model: MODEL, previous_response_id: first.id, input: outputs, tools: responsesTools, store: true });
    expect(second.previous_response_id).toBe(first.id);
    expect(second.output_text.trim()).toBe(finalText(report({ city: 'Lima' })));
    expect(reasoningText(second)).toBe(thought2);
  });

  it('previous_response_id, streamed with the SDK\'s stream helper', async () => {
    const calls: Args[] = [];
    const first = await client.responses.stream({ model: MODEL, input: question('Kyiv'), tools: responsesTools, store: true }).finalResponse();
    const outputs = runCalls(first, calls);
    expect(calls).toEqual([expectedArgs('Kyiv')]);
    const s = client.responses.stream({ model: MODEL, previous_response_id: first.id, input: outputs, tools: responsesTools, store: true });
    let text = '';
    s.on('response.output_text.delta', (e) => { text += e.delta; });
    const second = await s.finalResponse();
    expect(text.trim()).toBe(finalText(report({ city: 'Kyiv' })));
    expect(second.output_text).toBe(text);
  });

  it('stateless: the first response\'s output items and the tool\'s output are the second turn\'s input', async () => {
    const calls: Args[] = [];
    const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: question('Doha') }];
    const first = await client.responses.create({ model: MODEL, input, tools: responsesTools, store: false });
    input.push(...(first.output as OpenAI.Responses.ResponseInputItem[]), ...runCalls(first, calls));
    expect(calls).toEqual([expectedArgs('Doha')]);
    const second = await client.responses.create({ model: MODEL, input, tools: responsesTools, store: false });
    expect(second.output_text.trim()).toBe(finalText(report({ city: 'Doha' })));
    expect(reasoningText(second)).toBe(thought2);
  });
});

it('a worker SIGKILLed inside the streamed call\'s arguments: runTools gets the same call, thoughts and final text as a fault-free run', async () => {
  const { reference, faulted } = await killInArguments(stack, 'Bern', (kill) => runToolsLoop('Bern', true, kill));
  expect(faulted.calls).toEqual([expectedArgs('Bern')]);
  expect(faulted.calls).toEqual(reference.calls);
  expect(faulted.firstTurn).toEqual(reference.firstTurn);
  expect(faulted.error).toBe(reference.error);
  expect(reference.error).toBeUndefined();
  expect(faulted.streamedReasoning).toBe(reference.streamedReasoning);
  expect(faulted.final).toBe(reference.final);
  expect(faulted.final?.trim()).toBe(finalText(report({ city: 'Bern' })));
});
