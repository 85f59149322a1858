// The Vercel AI SDK (`ai` 7 with `@ai-sdk/openai` 4) as an agent drives it, against a real Baton
// router over scripted simulated workers (./stack.ts): `generateText` and `streamText` with a tool
// and `stopWhen: stepCountIs(3)` (the SDK runs the tool and sends its result back itself), over
// the Chat Completions model (`createOpenAI({baseURL}).chat(model)`) and over the provider's
// default model, the Responses API with `store: true` (from its second step it refers to the
// first step's output items by id: `item_reference` input items); and a worker SIGKILLed inside a
// streamed call's arguments. Both packages declare engines node >=22: on an older Node the file is
// skipped, saying so, and CI's Node 24 leg runs it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  MODEL, engineGap, expectedArgs, finalText, question, report, startStack, thought1, thought2, type Stack, killInArguments } from './stack.ts';

const gap = engineGap(['ai', '@ai-sdk/openai']);
if (gap) console.log(`Vercel AI SDK tests skipped: ${gap}`);

describe.skipIf(gap !== null)(`Vercel AI SDK${gap ? ` (skipped: ${gap})` : ''}`, () => {
  let stack: Stack;
  let ai: typeof import('ai');
  let provider: ReturnType<typeof import('@ai-sdk/openai').createOpenAI>;

  beforeAll(async () => {
    ai = await import('ai');
    const { createOpenAI } = await import('@ai-sdk/openai');
    stack = await startStack();
    provider = createOpenAI({ baseURL: stack.baseURL, apiKey: 'unused' });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  type Args = { city: string; unit?: string };
  const tools = (calls: Args[]) => ({
    get_weather: ai.tool({
      description: 'The weather in a city',
      inputSchema: z.object({ city: z.string(), unit: z.string().optional(), details: z.array(z.string()).optional(), note: z.string().optional() }),
      execute: async (args: Args) => {
        calls.push(args);
        return report(args);
      },
    }),
  });

  /** What a user holds after a run: the calls the tool saw, each step's text and reasoning, or the error. */
  interface Outcome {
    calls: Args[];
    steps: { text: string; reasoning: string | undefined; toolCalls: unknown[] }[];
    text: string | undefined;
    error: string | undefined;
  }
  const stepsOf = (steps: readonly { text: string; reasoningText: string | undefined; toolCalls: readonly { toolName: string; input: unknown }[] }[]) =>
    steps.map((s) => ({ text: s.text, reasoning: s.reasoningText, toolCalls: s.toolCalls.map((c) => ({ toolName: c.toolName, input: c.input })) }));

  async function generate(model: Parameters<typeof ai.generateText>[0]['model'], city: string): Promise<Outcome> {
    const calls: Args[] = [];
    try {
      const r = await ai.generateText({ model, tools: tools(calls), stopWhen: ai.stepCountIs(3), prompt: question(city), maxRetries: 0 });
      return { calls, steps: stepsOf(r.steps), text: r.text, error: undefined };
    } catch (err) {
      return { calls, steps: [], text: undefined, error: (err as Error).message };
    }
  }

  async function stream(model: Parameters<typeof ai.streamText>[0]['model'], city: string, onArgsDelta?: () => void): Promise<Outcome & { streamedReasoning: string }> {
    const calls: Args[] = [];
    let streamedReasoning = '';
    let error: string | undefined;
    const r = ai.streamText({
      model,
      tools: tools(calls),
      stopWhen: ai.stepCountIs(3),
      prompt: question(city),
      maxRetries: 0,
      onChunk: ({ chunk }) => {
        if (chunk.type === 'reasoning-delta') streamedReasoning += chunk.text;
        if (chunk.type === 'tool-input-delta' && chunk.delta.length > 0) onArgsDelta?.();
      },
      onError: ({ error: e }) => { error ??= (e as Error).message; },
    });
    const text = await r.text;
    const steps = stepsOf(await r.steps);
    return { calls, steps, text, error, streamedReasoning };
  }

  describe('Chat Completions model (provider.chat)', () => {
    it('generateText: the tool is called with the model\'s arguments and its result reaches the second step', async () => {
      const o = await generate(provider.chat(MODEL), 'Paris');
      expect(o.calls).toEqual([expectedArgs('Paris')]);
      expect(o.error).toBeUndefined();
      expect(o.steps.map((s) => s.toolCalls)).toEqual([[{ toolName: 'get_weather', input: expectedArgs('Paris') }], []]);
      expect(o.text?.trim()).toBe(finalText(report({ city: 'Paris' })));
      // @ai-sdk/openai's chat model reads neither reasoning_content nor reasoning (its
      // openaiChatResponseSchema has no such field): no thoughts to check on this path.
    });

    it('streamText: the same calls and final text', async () => {
      const o = await stream(provider.chat(MODEL), 'Lyon');
      expect(o.calls).toEqual([expectedArgs('Lyon')]);
      expect(o.error).toBeUndefined();
      expect(o.steps.map((s) => s.toolCalls)).toEqual([[{ toolName: 'get_weather', input: expectedArgs('Lyon') }], []]);
      expect(o.text?.trim()).toBe(finalText(report({ city: 'Lyon' })));
    });
  });

  describe('Responses model (the provider\'s default, store true)', () => {
    it('generateText: the second step\'s item_reference inputs resolve; each step shows its thought (reasoning summary)', async () => {
      const o = await generate(provider(MODEL), 'Oslo');
      expect(o.calls).toEqual([expectedArgs('Oslo')]);
      expect(o.error).toBeUndefined();
      expect(o.steps.map((s) => s.toolCalls)).toEqual([[{ toolName: 'get_weather', input: expectedArgs('Oslo') }], []]);
      expect(o.text?.trim()).toBe(finalText(report({ city: 'Oslo' })));
      expect(o.steps.map((s) => s.reasoning)).toEqual([thought1('Oslo'), thought2]);
    });

    it('one step, unary and streamed: the thought is the step\'s reasoning (the SDK reads reasoning summary parts)', async () => {
      const calls: Args[] = [];
      const unary = await ai.generateText({ model: provider(MODEL), tools: tools(calls), prompt: question('Lima'), maxRetries: 0 });
      expect(unary.toolCalls.map((c) => c.input)).toEqual([expectedArgs('Lima')]);
      expect(unary.reasoningText).toBe(thought1('Lima'));
      let streamed = '';
      const s = ai.streamText({ model: provider(MODEL), tools: tools(calls), prompt: question('Lima'), maxRetries: 0, onChunk: ({ chunk }) => { if (chunk.type === 'reasoning-delta') streamed += chunk.text; } });
      expect((await s.toolCalls).map((c) => c.input)).toEqual([expectedArgs('Lima')]);
      expect(streamed).toBe(thought1('Lima'));
      expect(await s.reasoningText).toBe(thought1('Lima'));
    });

    it('streamText: the same, and the thoughts stream as reasoning deltas', async () => {
      const o = await stream(provider(MODEL), 'Rome');
      expect(o.calls).toEqual([expectedArgs('Rome')]);
      expect(o.error).toBeUndefined();
      expect(o.text?.trim()).toBe(finalText(report({ city: 'Rome' })));
      expect(o.streamedReasoning).toBe(thought1('Rome') + thought2);
    });
  });

  it('a worker SIGKILLed inside the streamed call\'s arguments: streamText gets the same call and final text as a fault-free run', async () => {
    const { reference, faulted } = await killInArguments(stack, 'Bern', (kill) => stream(provider.chat(MODEL), 'Bern', kill));
    expect(faulted.calls).toEqual([expectedArgs('Bern')]);
    expect(faulted.calls).toEqual(reference.calls);
    expect(faulted.error).toBe(reference.error);
    expect(reference.error).toBeUndefined();
    expect(faulted.steps).toEqual(reference.steps);
    expect(faulted.text?.trim()).toBe(finalText(report({ city: 'Bern' })));
  });
});
