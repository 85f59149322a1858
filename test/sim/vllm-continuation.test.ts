// The continuation law on simulated vLLM workers, across two worker processes: whatever the
// prompt, budget, min_tokens, sampling (greedy, seeded or unseeded), logit bias, logprob options
// and split point k, a continuation sent to another worker with prompt + the first k generated
// tokens, max_tokens − k and min_tokens − k produces exactly the rest of the uninterrupted run:
// token ids, logprobs and finish reason. Also the cluster's vLLM format and its process faults.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { vllmReference } from '../../sim/vllm/reference.ts';
import { openSse, postJson } from './helpers.ts';

const GEN = '/inference/v1/generate';
const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
let cluster: SimCluster;
let urls: string[];

beforeAll(async () => {
  cluster = await startCluster({ format: 'vllm', workers: 2, port: 0, tokenIntervalMs: 0, prefillUsPerToken: 0 });
  urls = cluster.workers().map((w) => w.url);
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

type Choice = { finish_reason: string; token_ids: number[]; logprobs: { content: unknown[] } | null };
type Answer = { ids: number[]; logprobs: unknown[] | null; finish: string; usage: { prompt_tokens: number; completion_tokens: number } };

/** One answer, unary or streamed (deltas concatenated, usage from the include_usage chunk). */
async function generate(url: string, body: Record<string, unknown>, stream: boolean): Promise<Answer> {
  if (!stream) {
    const r = await postJson(url + GEN, body);
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.text}`);
    const b = r.body as { choices: Choice[]; usage: Answer['usage'] };
    const c = b.choices[0]!;
    return { ids: c.token_ids, logprobs: c.logprobs?.content ?? null, finish: c.finish_reason, usage: b.usage };
  }
  const s = await openSse(url + GEN, { ...body, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } });
  const end = await s.ended;
  if (!end.sawDone) throw new Error('stream ended without [DONE]');
  const chunks = s.chunks() as { choices: Choice[]; usage: Answer['usage'] }[];
  const choices = chunks.flatMap((c) => c.choices);
  const withLogprobs = choices.some((c) => c.logprobs !== null);
  return {
    ids: choices.flatMap((c) => c.token_ids),
    logprobs: withLogprobs ? choices.flatMap((c) => c.logprobs!.content) : null,
    finish: choices.at(-1)!.finish_reason,
    usage: chunks.at(-1)!.usage,
  };
}

describe('continuation law across two vLLM worker processes', () => {
  it('tail of the uninterrupted run == the continuation output (ids, logprobs, finish)', async () => {
    const property = fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 31_999 }), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 0, max: 30 }),
      fc.boolean(),
      fc.oneof(
        fc.constant({ temperature: 0 }),
        fc.record({ temperature: fc.constantFrom(0.5, 1.0, 1.5), top_p: fc.constantFrom(1, 0.9), top_k: fc.constantFrom(0, 4), min_p: fc.constantFrom(0, 0.05) }),
        fc.record({ temperature: fc.constant(0.9), seed: fc.integer({ min: 0, max: 1000 }) }),
      ),
      fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
      fc.option(fc.dictionary(fc.integer({ min: 3, max: 400 }).map(String), fc.constantFrom(-100, -5, 3, 100), { maxKeys: 2 }), { nil: undefined }),
      fc.nat(),
      fc.boolean(),
      async (prompt, budget, minRaw, ignoreEos, sampling, logprobs, bias, kSeed, stream) => {
        const minTokens = Math.min(minRaw, budget);
        const extra = { ...sampling, ...(logprobs === undefined ? {} : { logprobs }), ...(bias ? { logit_bias: bias } : {}) };
        const sp = { max_tokens: budget, min_tokens: minTokens, ignore_eos: ignoreEos, ...extra };
        const full = await generate(urls[0]!, { token_ids: prompt, sampling_params: sp }, false);
        const ref = vllmReference(prompt, sp);
        expect(full.ids).toEqual(ref.token_ids);
        expect(full.logprobs).toEqual(ref.logprobs);
        expect(full.finish).toBe(ref.finish_reason);
        const n = full.ids.length;
        const k = kSeed % n;
        // max_tokens − k ≥ 1 always (k < n ≤ max_tokens): vLLM refuses max_tokens 0.
        const cont = await generate(
          urls[1]!,
          { token_ids: [...prompt, ...full.ids.slice(0, k)], sampling_params: { ...sp, max_tokens: budget - k, min_tokens: Math.max(0, minTokens - k) } },
          stream,
        );
        expect(cont.ids).toEqual(full.ids.slice(k));
        if (logprobs !== undefined) expect(cont.logprobs).toEqual(full.logprobs!.slice(k));
        expect(cont.finish).toBe(full.finish);
        expect(cont.usage.prompt_tokens).toBe(prompt.length + k);
        expect(cont.usage.completion_tokens).toBe(n - k);
      },
    );
    try {
      await fc.assert(property, { numRuns: 120, seed });
    } catch (err) {
      console.error(`vLLM continuation property failed; replay with FC_SEED=${seed}`);
      throw err;
    }
    const [a, b] = await Promise.all([cluster.stats(0), cluster.stats(1)]);
    expect(a.requestsFinished).toBeGreaterThanOrEqual(120);
    expect(b.requestsFinished).toBeGreaterThanOrEqual(120);
  }, 180_000);
});

describe('vLLM cluster processes', () => {
  it('kill -9 mid-stream truncates the body (no terminal chunk, no [DONE]); the other worker continues exactly', async () => {
    await cluster.fault(0, { kind: 'slow', intervalMs: 5 });
    const prompt = [9, 8, 7, 6];
    const sp = { max_tokens: 40, temperature: 0, ignore_eos: true, logprobs: 2 };
    const s = await openSse(urls[0]! + GEN, { token_ids: prompt, stream: true, sampling_params: sp });
    await s.waitFrames(8);
    await cluster.kill(0);
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    const got = (s.chunks() as { choices: Choice[] }[]).flatMap((c) => c.choices.flatMap((x) => x.token_ids));
    expect(got.length).toBeGreaterThanOrEqual(8);
    const cont = await generate(urls[1]!, { token_ids: [...prompt, ...got], sampling_params: { ...sp, max_tokens: 40 - got.length } }, true);
    const ref = vllmReference(prompt, sp);
    expect([...got, ...cont.ids]).toEqual(ref.token_ids);
    expect(cont.logprobs).toEqual(ref.logprobs!.slice(got.length));
    await cluster.restart(0);
    const health = await fetch(cluster.workers()[0]!.url + '/health');
    expect(health.status).toBe(200);
  }, 60_000);

  it('the error fault reaches a worker process through cluster.fault', async () => {
    await cluster.fault(1, { kind: 'error', afterTokens: 2 });
    const s = await openSse(urls[1]! + GEN, { token_ids: [1, 2, 3], stream: true, sampling_params: { max_tokens: 20, ignore_eos: true } });
    await s.ended;
    expect(s.frames.at(-2)!.data).toContain('"type": "InternalServerError"');
    expect(s.frames.at(-1)!.data).toBe('[DONE]');
  });
});
