// The continuation law across two worker processes: whatever the prompt, budget, logprob options
// and split point k, a continuation started on another worker with prompt + the first k generated
// tokens and budget - k produces exactly the rest of the uninterrupted run. This is the property
// the migrating router relies on.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { openSse, postJson } from './helpers.ts';

type Meta = {
  finish_reason: { type: string; length?: number };
  output_token_logprobs?: unknown[];
  output_top_logprobs?: unknown[];
  prompt_tokens: number;
  completion_tokens: number;
};
type Answer = { output_ids: number[]; meta_info: Meta };

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
let cluster: SimCluster;
let urls: string[];

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 0, prefillUsPerToken: 0 });
  urls = cluster.workers().map((w) => w.url);
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

/** One answer, unary or streamed (cumulative chunks: the last one holds the whole answer). */
async function generate(url: string, body: Record<string, unknown>, stream: boolean): Promise<Answer> {
  if (!stream) {
    const r = await postJson(`${url}/generate`, body);
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.text}`);
    return r.body as Answer;
  }
  const s = await openSse(`${url}/generate`, { ...body, stream: true });
  const end = await s.ended;
  if (!end.sawDone) throw new Error('stream ended without [DONE]');
  return s.chunks().at(-1) as Answer;
}

describe('continuation law across two worker processes', () => {
  it('tail of the uninterrupted run == the continuation output', async () => {
    const property = fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 31_999 }), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 80 }),
      fc.integer({ min: 0, max: 30 }),
      fc.boolean(),
      fc.record({ returnLogprob: fc.boolean(), top: fc.integer({ min: 0, max: 4 }), startZero: fc.boolean() }),
      fc.nat(),
      fc.boolean(),
      async (prompt, budget, minNewRaw, ignoreEos, lp, kSeed, stream) => {
        const minNew = Math.min(minNewRaw, budget);
        const logprobs = lp.returnLogprob ? { return_logprob: true, top_logprobs_num: lp.top, ...(lp.startZero ? { logprob_start_len: 0 } : {}) } : {};
        const full = await generate(urls[0]!, { input_ids: prompt, sampling_params: { max_new_tokens: budget, min_new_tokens: minNew, ignore_eos: ignoreEos }, ...logprobs }, false);
        const n = full.output_ids.length;
        const k = kSeed % n;
        const cont = await generate(
          urls[1]!,
          {
            input_ids: [...prompt, ...full.output_ids.slice(0, k)],
            sampling_params: { max_new_tokens: budget - k, min_new_tokens: Math.max(0, minNew - k), ignore_eos: ignoreEos },
            ...logprobs,
          },
          stream,
        );
        expect(cont.output_ids).toEqual(full.output_ids.slice(k));
        if (lp.returnLogprob) {
          expect(cont.meta_info.output_token_logprobs).toEqual(full.meta_info.output_token_logprobs!.slice(k));
          if (lp.top > 0) expect(cont.meta_info.output_top_logprobs).toEqual(full.meta_info.output_top_logprobs!.slice(k));
        }
        expect(cont.meta_info.finish_reason.type).toBe(full.meta_info.finish_reason.type);
        if (full.meta_info.finish_reason.type === 'length') expect(cont.meta_info.finish_reason).toEqual({ type: 'length', length: budget - k });
        else expect(cont.meta_info.finish_reason).toEqual(full.meta_info.finish_reason);
        expect(cont.meta_info.prompt_tokens).toBe(prompt.length + k);
        expect(cont.meta_info.completion_tokens).toBe(n - k);
      },
    );
    try {
      await fc.assert(property, { numRuns: 200, seed });
    } catch (err) {
      console.error(`continuation property failed; replay with FC_SEED=${seed}`);
      throw err;
    }
    // Both workers really took part: the first answered every original, the second every continuation.
    const [a, b] = await Promise.all([cluster.stats(0), cluster.stats(1)]);
    expect(a.requestsFinished).toBeGreaterThanOrEqual(200);
    expect(b.requestsFinished).toBeGreaterThanOrEqual(200);
  }, 180_000);
});
