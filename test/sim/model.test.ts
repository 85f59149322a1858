import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL, Decoder, promptLogprobs, runModel, type DecodeParams } from '../../sim/model.ts';
import { Vocabulary } from '../../sim/vocab.ts';

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);

/** Runs a fast-check property and names the seed on failure, so a failing case can be replayed with FC_SEED. */
function check<T>(prop: fc.IPropertyWithHooks<T> | fc.IProperty<T>, numRuns: number) {
  try {
    fc.assert(prop as fc.IProperty<T>, { numRuns, seed });
  } catch (err) {
    console.error(`property failed; replay with FC_SEED=${seed}`);
    throw err;
  }
}

const token = fc.integer({ min: 0, max: DEFAULT_MODEL.vocabSize - 1 });
const prompt = fc.array(token, { minLength: 1, maxLength: 48 });
const params = fc.record({
  budget: fc.integer({ min: 1, max: 120 }),
  minNew: fc.integer({ min: 0, max: 40 }),
  ignoreEos: fc.boolean(),
  stopIds: fc.array(fc.integer({ min: 3, max: 400 }), { maxLength: 3 }),
  topN: fc.integer({ min: 0, max: 6 }),
});

function decodeParams(p: { budget: number; minNew: number; ignoreEos: boolean; stopIds: number[]; topN: number }): DecodeParams {
  return { max_new_tokens: p.budget, min_new_tokens: Math.min(p.minNew, p.budget), ignore_eos: p.ignoreEos, stop_token_ids: p.stopIds, top_logprobs_num: p.topN };
}

describe('deterministic model', () => {
  it('continuation law: prompt + first k tokens with budget - k reproduces the tail exactly', () => {
    check(
      fc.property(prompt, params, fc.nat(), (pr, p, kSeed) => {
        const dp = decodeParams(p);
        const full = runModel(pr, dp);
        const k = kSeed % full.output_ids.length;
        const cont = runModel([...pr, ...full.output_ids.slice(0, k)], {
          ...dp,
          max_new_tokens: dp.max_new_tokens - k,
          min_new_tokens: Math.max(0, (dp.min_new_tokens ?? 0) - k),
        });
        expect(cont.output_ids).toEqual(full.output_ids.slice(k));
        expect(cont.output_logprobs).toEqual(full.output_logprobs.slice(k));
        expect(cont.output_top_logprobs).toEqual(full.output_top_logprobs.slice(k));
        expect(cont.finish_reason.type).toBe(full.finish_reason.type);
        if (cont.finish_reason.type === 'length') expect(cont.finish_reason).toEqual({ type: 'length', length: dp.max_new_tokens - k });
        else expect(cont.finish_reason).toEqual(full.finish_reason);
      }),
      2000,
    );
  });

  it('finishes by budget, EOS or a stop token, honouring min_new_tokens and ignore_eos', () => {
    check(
      fc.property(prompt, params, (pr, p) => {
        const dp = decodeParams(p);
        const out = runModel(pr, dp);
        const ids = out.output_ids;
        expect(ids.length).toBeGreaterThan(0);
        expect(ids.length).toBeLessThanOrEqual(dp.max_new_tokens);
        const stops = new Set([...(dp.stop_token_ids ?? []), ...(dp.ignore_eos ? [] : [DEFAULT_MODEL.eosTokenId])]);
        // No stop token before the end, none at all before min_new_tokens, no EOS under ignore_eos.
        ids.slice(0, -1).forEach((id) => expect(stops.has(id)).toBe(false));
        ids.slice(0, dp.min_new_tokens).forEach((id) => expect([...(dp.stop_token_ids ?? []), DEFAULT_MODEL.eosTokenId]).not.toContain(id));
        if (dp.ignore_eos) expect(ids).not.toContain(DEFAULT_MODEL.eosTokenId);
        if (ids.length === dp.max_new_tokens) expect(out.finish_reason).toEqual({ type: 'length', length: dp.max_new_tokens });
        else expect(out.finish_reason).toEqual({ type: 'stop', matched: ids.at(-1) });
      }),
      1000,
    );
  });

  it('logprobs are finite, negative, JSON-exact; top lists are sorted and hold the greedy choice', () => {
    check(
      fc.property(prompt, params, (pr, p) => {
        const dp = decodeParams({ ...p, topN: Math.max(2, p.topN) });
        const out = runModel(pr, dp);
        out.output_logprobs.forEach((lp, i) => {
          expect(Number.isFinite(lp) && lp < 0).toBe(true);
          expect(JSON.parse(JSON.stringify(lp))).toBe(lp);
          const top = out.output_top_logprobs[i]!;
          expect(top).toHaveLength(dp.top_logprobs_num!);
          for (let j = 1; j < top.length; j++) expect(top[j]![0]).toBeLessThan(top[j - 1]![0]);
          expect(new Set(top.map((e) => e[1])).size).toBe(top.length);
          expect(top).toContainEqual([lp, out.output_ids[i]]);
        });
      }),
      500,
    );
  });

  it('produces EOS now and then: mean unconstrained answer length is near 64', () => {
    let total = 0;
    const runs = 3000;
    for (let i = 0; i < runs; i++) total += runModel([i, i + 7], { max_new_tokens: 100_000 }).output_ids.length;
    expect(total / runs).toBeGreaterThan(50);
    expect(total / runs).toBeLessThan(80);
  });

  it('samples only when a temperature > 0 is given; sampling_seed makes the sample repeatable', () => {
    const pr = [11, 12, 13];
    const greedy = runModel(pr, { max_new_tokens: 64, ignore_eos: true });
    expect(runModel(pr, { max_new_tokens: 64, ignore_eos: true, temperature: 0 })).toEqual(greedy);
    const seeded = runModel(pr, { max_new_tokens: 64, ignore_eos: true, temperature: 1.5, sampling_seed: 42 });
    expect(runModel(pr, { max_new_tokens: 64, ignore_eos: true, temperature: 1.5, sampling_seed: 42 })).toEqual(seeded);
    expect(seeded.output_ids).not.toEqual(greedy.output_ids);
    const other = runModel(pr, { max_new_tokens: 64, ignore_eos: true, temperature: 1.5, sampling_seed: 43 });
    expect(other.output_ids).not.toEqual(seeded.output_ids);
    const unseeded = [0, 1, 2].map(() => runModel(pr, { max_new_tokens: 64, ignore_eos: true, temperature: 1.5 }).output_ids.join());
    expect(new Set(unseeded).size).toBeGreaterThan(1);
  });

  it('prompt logprobs: a null first position, then each token under its prefix, matching what decoding reports', () => {
    check(
      fc.property(prompt, fc.integer({ min: 0, max: 5 }), fc.nat(), (pr, topN, startSeed) => {
        const start = startSeed % pr.length;
        const lp = promptLogprobs(pr, start, topN);
        expect(lp.logprobs).toHaveLength(pr.length - start);
        expect(lp.logprobs[0]).toBeNull();
        expect(lp.tops[0]).toBeNull();
        for (let j = start + 1; j < pr.length; j++) {
          const v = lp.logprobs[j - start]!;
          expect(Number.isFinite(v) && v < 0).toBe(true);
          if (topN > 0) expect(lp.tops[j - start]).toEqual(new Decoder(pr.slice(0, j), { max_new_tokens: 1, top_logprobs_num: topN }).next().top);
        }
        // A prompt token the model would have chosen greedily gets the logprob decoding gave it.
        const next = new Decoder(pr, { max_new_tokens: 1 }).next();
        expect(promptLogprobs([...pr, next.token], pr.length - 1, 0).logprobs[1]).toBe(next.logprob);
      }),
      300,
    );
  });

  it('text vocabulary round-trips listed words and gives every id a word', () => {
    const v = new Vocabulary();
    const ids = v.encode('the answer is here');
    expect(ids.map((id) => v.piece(id)).join('')).toBe(' the answer is here');
    expect(v.encode(ids.map((id) => v.piece(id)).join(''))).toEqual(ids);
    const unknown = v.encode('zyzzyva');
    expect(unknown).toHaveLength(1);
    expect(v.piece(unknown[0]!)).toMatch(/^ \S+$/);
    expect(v.piece(DEFAULT_MODEL.eosTokenId)).toBe('');
    expect(v.spelling(DEFAULT_MODEL.eosTokenId)).toBe('</s>');
  });
});
