// The OpenAI Agents SDK (`@openai/agents` 0.20) as its docs run it, against a real Baton router
// over scripted simulated workers (./stack.ts): an `Agent` with a function tool, `run()` unary and
// streamed, over its Chat Completions model (`OpenAIChatCompletionsModel`, from an
// `OpenAIProvider` with `useResponses: false`, as one points the SDK at another server) and over
// its Responses model (`OpenAIResponsesModel`, which sends each turn's output items back as
// input). The agent's run items show what the user gets: the tool called with the model's
// arguments, its output, the final output (which quotes the tool's result only if the second
// turn's prompt held it), and the reasoning items (the chat model reads `reasoning`, the
// Responses model reasoning summaries). And a worker SIGKILLed inside a streamed call's arguments.
// @openai/agents loads openai 7, which declares engines node >=22: on an older Node the file is
// skipped, saying so, and CI's Node 24 leg runs it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  MODEL, engineGap, expectedArgs, finalText, question, report, startStack, thought1, thought2, type Stack, killInArguments } from './stack.ts';

const gap = engineGap(['@openai/agents']);
if (gap) console.log(`@openai/agents tests skipped: ${gap}`);

describe.skipIf(gap !== null)(`@openai/agents${gap ? ` (skipped: ${gap})` : ''}`, () => {
  let stack: Stack;
  let agents: typeof import('@openai/agents');
  let chatModel: import('@openai/agents').Model;
  let responsesModel: import('@openai/agents').Model;

  beforeAll(async () => {
    agents = await import('@openai/agents');
    // Nothing here may reach OpenAI's trace exporter.
    agents.setTracingDisabled(true);
    stack = await startStack();
    chatModel = await new agents.OpenAIProvider({ baseURL: stack.baseURL, apiKey: 'unused', useResponses: false }).getModel(MODEL);
    responsesModel = await new agents.OpenAIProvider({ baseURL: stack.baseURL, apiKey: 'unused', useResponses: true }).getModel(MODEL);
    expect(chatModel).toBeInstanceOf(agents.OpenAIChatCompletionsModel);
    expect(responsesModel).toBeInstanceOf(agents.OpenAIResponsesModel);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  type Args = { city: string; unit: string | null };
  const agentFor = (model: import('@openai/agents').Model, calls: Args[]) => new agents.Agent({
    name: 'weather',
    instructions: 'Answer with the weather tool.',
    model,
    modelSettings: { maxTokens: 400 },
    tools: [agents.tool({
      name: 'get_weather',
      description: 'The weather in a city',
      // The SDK's strict schemas need every field: the optional ones are nullable.
      parameters: z.object({ city: z.string(), unit: z.string().nullable(), details: z.array(z.string()).nullable(), note: z.string().nullable() }),
      execute: (args) => {
        calls.push(args);
        return report({ city: args.city, unit: args.unit ?? undefined });
      },
    })],
  });

  interface Outcome {
    calls: Args[];
    /** The run's items in order, each reduced to what the user reads from it. */
    items: unknown[];
    finalOutput: unknown;
    error: string | undefined;
  }

  /** A run item as the user reads it (ids, which are random, left out). */
  const itemView = (item: import('@openai/agents').RunItem): unknown => {
    const raw = item.rawItem as unknown as Record<string, unknown>;
    switch (item.type) {
      case 'reasoning_item': {
        // The chat model puts the thought in rawContent (reasoning_text); the Responses model puts
        // the reasoning summary in content.
        const texts = [...((raw.content as { text: string }[] | undefined) ?? []), ...((raw.rawContent as { text: string }[] | undefined) ?? [])].map((c) => c.text);
        return { reasoning: texts.join('') };
      }
      case 'tool_call_item':
        return { call: raw.name, arguments: JSON.parse(raw.arguments as string) as unknown };
      case 'tool_call_output_item':
        return { output: (item as import('@openai/agents').RunToolCallOutputItem).output };
      case 'message_output_item':
        return { message: (item as import('@openai/agents').RunMessageOutputItem).content.trim() };
      default:
        return { type: item.type };
    }
  };

  /**
   * The items the user reads. A chat stream sends the blank line between the thought and the call
   * as content (the unary answer strips it: content null), which the SDK turns into a message item
   * of blank text; it shows nothing, so it is left out.
   */
  const view = (items: import('@openai/agents').RunItem[]) => items.map(itemView).filter((v) => (v as { message?: string }).message !== '');

  async function runAgent(model: import('@openai/agents').Model, stream: boolean, city: string, onArgsDelta?: () => void): Promise<Outcome> {
    const calls: Args[] = [];
    const agent = agentFor(model, calls);
    try {
      if (!stream) {
        const r = await agents.run(agent, question(city), { maxTurns: 3 });
        return { calls, items: view(r.newItems), finalOutput: r.finalOutput, error: undefined };
      }
      const r = await agents.run(agent, question(city), { maxTurns: 3, stream: true });
      for await (const ev of r) {
        if (ev.type !== 'raw_model_stream_event' || ev.data.type !== 'model') continue;
        const chunk = ev.data.event as { choices?: { delta?: { tool_calls?: { function?: { arguments?: string } }[] } }[]; type?: string; delta?: string };
        const chatArgs = chunk.choices?.some((c) => c.delta?.tool_calls?.some((t) => (t.function?.arguments ?? '').length > 0));
        const responsesArgs = chunk.type === 'response.function_call_arguments.delta' && (chunk.delta ?? '').length > 0;
        if (chatArgs || responsesArgs) onArgsDelta?.();
      }
      await r.completed;
      if (r.error) throw r.error;
      return { calls, items: view(r.newItems), finalOutput: r.finalOutput, error: undefined };
    } catch (err) {
      return { calls, items: [], finalOutput: undefined, error: (err as Error).message };
    }
  }

  /** The items of a full run: thought, call, output, thought, answer. */
  const expectedItems = (city: string) => [
    { reasoning: thought1(city) },
    { call: 'get_weather', arguments: expectedArgs(city) },
    { output: report({ city }) },
    { reasoning: thought2 },
    { message: finalText(report({ city })) },
  ];

  const expectAnswered = (o: Outcome, city: string) => {
    expect(o.calls).toEqual([{ ...expectedArgs(city) }]);
    expect(o.error).toBeUndefined();
    expect((o.finalOutput as string).trim()).toBe(finalText(report({ city })));
    expect(o.items).toEqual(expectedItems(city));
  };

  describe('OpenAIChatCompletionsModel', () => {
    it('run: the tool is called with the model\'s arguments, its result reaches the second turn, both thoughts are reasoning items', async () => {
      expectAnswered(await runAgent(chatModel, false, 'Paris'), 'Paris');
    });

    it('run, streamed: the same', async () => {
      expectAnswered(await runAgent(chatModel, true, 'Lyon'), 'Lyon');
    });
  });

  describe('OpenAIResponsesModel', () => {
    it('run: the same', async () => {
      expectAnswered(await runAgent(responsesModel, false, 'Oslo'), 'Oslo');
    });

    it('run, streamed: the same', async () => {
      expectAnswered(await runAgent(responsesModel, true, 'Rome'), 'Rome');
    });
  });

  it('a worker SIGKILLed inside the streamed call\'s arguments: the run gets the same call, items and final output as a fault-free run', async () => {
    const { reference, faulted } = await killInArguments(stack, 'Bern', (kill) => runAgent(chatModel, true, 'Bern', kill));
    expect(faulted.calls).toEqual([expectedArgs('Bern')]);
    expect(faulted).toEqual(reference);
    expectAnswered(faulted, 'Bern');
  });
});
