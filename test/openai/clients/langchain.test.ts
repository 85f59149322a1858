// LangChain (`@langchain/openai` 1.6 over `@langchain/core` 1.4) as an agent drives it, against
// a real Baton router over scripted simulated workers (./stack.ts): `ChatOpenAI.bindTools` and
// the tool loop its docs show (invoke, run each tool call, append the ToolMessage, invoke again),
// unary and streamed (chunks concatenated), over Chat Completions and over the Responses API
// (`useResponsesApi: true`), with the model's thoughts where LangChain shows them
// (`additional_kwargs.reasoning_content` on chat; reasoning content blocks, built from reasoning
// summaries, on Responses); and a worker SIGKILLed inside a streamed call's arguments.
// `@langchain/openai` declares engines node >=22: on an older Node the file is skipped, saying
// so, and CI's Node 24 leg runs it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AIMessage, BaseMessage } from '@langchain/core/messages';
import {
  MODEL, engineGap, expectedArgs, finalText, question, report, startStack, thought1, thought2, type Stack, killInArguments } from './stack.ts';

const gap = engineGap(['@langchain/openai', '@langchain/core']);
if (gap) console.log(`LangChain tests skipped: ${gap}`);

describe.skipIf(gap !== null)(`LangChain${gap ? ` (skipped: ${gap})` : ''}`, () => {
  let stack: Stack;
  let lc: typeof import('@langchain/openai');
  let messagesLib: typeof import('@langchain/core/messages');
  let toolsLib: typeof import('@langchain/core/tools');

  beforeAll(async () => {
    lc = await import('@langchain/openai');
    messagesLib = await import('@langchain/core/messages');
    toolsLib = await import('@langchain/core/tools');
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  type Args = { city: string; unit?: string };
  const weatherTool = (calls: Args[]) => toolsLib.tool(async (args: Args) => {
    calls.push(args);
    return report(args);
  }, {
    name: 'get_weather',
    description: 'The weather in a city',
    schema: z.object({ city: z.string(), unit: z.string().optional(), details: z.array(z.string()).optional(), note: z.string().optional() }),
  });

  /** The thought LangChain shows on a message: reasoning_content (chat) or reasoning content blocks (Responses). */
  const thoughtOf = (m: AIMessage): string | undefined => {
    const rc = m.additional_kwargs.reasoning_content;
    if (typeof rc === 'string') return rc;
    const blocks = m.contentBlocks.filter((b) => b.type === 'reasoning').map((b) => (b as { reasoning: string }).reasoning);
    return blocks.length > 0 ? blocks.join('') : undefined;
  };

  interface Outcome {
    calls: Args[];
    /** Each turn's tool calls (name and args), text and thought. */
    turns: { toolCalls: { name: string; args: unknown }[]; text: string; thought: string | undefined }[];
    error: string | undefined;
  }

  /** The loop of LangChain's tool-calling docs; `stream`: each turn's chunks concatenated. */
  async function loop(useResponsesApi: boolean, stream: boolean, city: string, onArgsChunk?: () => void): Promise<Outcome> {
    const calls: Args[] = [];
    const tool = weatherTool(calls);
    const model = new lc.ChatOpenAI({ model: MODEL, apiKey: 'unused', configuration: { baseURL: stack.baseURL }, maxRetries: 0, useResponsesApi }).bindTools([tool]);
    const messages: BaseMessage[] = [new messagesLib.HumanMessage(question(city))];
    const turns: Outcome['turns'] = [];
    try {
      for (let step = 0; step < 3; step++) {
        let ai: AIMessage;
        if (stream) {
          let acc: import('@langchain/core/messages').AIMessageChunk | undefined;
          for await (const chunk of await model.stream(messages)) {
            if (chunk.tool_call_chunks?.some((c) => (c.args ?? '').length > 0)) onArgsChunk?.();
            acc = acc ? acc.concat(chunk) : chunk;
          }
          ai = acc!;
        } else {
          ai = await model.invoke(messages);
        }
        turns.push({ toolCalls: (ai.tool_calls ?? []).map((c) => ({ name: c.name, args: c.args })), text: ai.text, thought: thoughtOf(ai) });
        messages.push(ai);
        if (!ai.tool_calls?.length) break;
        for (const call of ai.tool_calls) messages.push(await tool.invoke(call));
      }
      return { calls, turns, error: undefined };
    } catch (err) {
      return { calls, turns, error: (err as Error).message };
    }
  }

  /** The outcome every loop must reach. */
  const expectAnswered = (o: Outcome, city: string) => {
    expect(o.calls).toEqual([expectedArgs(city)]);
    expect(o.error).toBeUndefined();
    expect(o.turns.map((t) => t.toolCalls)).toEqual([[{ name: 'get_weather', args: expectedArgs(city) }], []]);
    expect(o.turns[1]!.text.trim()).toBe(finalText(report({ city })));
  };

  describe('Chat Completions', () => {
    it('invoke: the tool is called with the model\'s arguments, its result reaches the second turn, reasoning_content shows the thoughts', async () => {
      const o = await loop(false, false, 'Paris');
      expectAnswered(o, 'Paris');
      expect(o.turns.map((t) => t.thought)).toEqual([thought1('Paris'), thought2]);
    });

    it('stream: the same', async () => {
      const o = await loop(false, true, 'Lyon');
      expectAnswered(o, 'Lyon');
      expect(o.turns.map((t) => t.thought)).toEqual([thought1('Lyon'), thought2]);
    });
  });

  describe('Responses API (useResponsesApi)', () => {
    it('invoke: the same loop; the thoughts are reasoning content blocks', async () => {
      const o = await loop(true, false, 'Oslo');
      expectAnswered(o, 'Oslo');
      expect(o.turns.map((t) => t.thought)).toEqual([thought1('Oslo'), thought2]);
    });

    it('stream: the same', async () => {
      const o = await loop(true, true, 'Rome');
      expectAnswered(o, 'Rome');
      expect(o.turns.map((t) => t.thought)).toEqual([thought1('Rome'), thought2]);
    });
  });

  it('a worker SIGKILLed inside the streamed call\'s arguments: the loop gets the same call, thoughts and final text as a fault-free run', async () => {
    const { reference, faulted } = await killInArguments(stack, 'Bern', (kill) => loop(false, true, 'Bern', kill));
    expect(faulted).toEqual(reference);
    expectAnswered(faulted, 'Bern');
  });
});
