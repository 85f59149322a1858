import { describe, expect, it } from 'vitest';
import { DEFAULT_TRAFFIC, mergeTraffic, parseTrafficPatch } from '../../host/traffic-settings.ts';
import { generateRequest } from '../../host/traffic-request.ts';

describe('traffic settings', () => {
  it('accepts a partial update and refuses unknown or out-of-range fields', () => {
    expect(parseTrafficPatch({ rate: 2.5, running: false })).toEqual({ rate: 2.5, running: false });
    expect(() => parseTrafficPatch({ rate: -1 })).toThrow(/rate/);
    expect(() => parseTrafficPatch({ concurrency: 1.5 })).toThrow(/integer/);
    expect(() => parseTrafficPatch({ streamShare: 2 })).toThrow(/streamShare/);
    expect(() => parseTrafficPatch({ bogus: 1 })).toThrow(/unknown/);
    expect(() => parseTrafficPatch([1])).toThrow(/object/);
    expect(() => parseTrafficPatch({ running: 'yes' })).toThrow(/boolean/);
  });

  it('keeps ranges ordered by moving the end the update did not touch', () => {
    expect(mergeTraffic(DEFAULT_TRAFFIC, { promptMin: 500 })).toMatchObject({ promptMin: 500, promptMax: 500 });
    expect(mergeTraffic(DEFAULT_TRAFFIC, { budgetMax: 2 })).toMatchObject({ budgetMin: 2, budgetMax: 2 });
  });
});

describe('generated requests', () => {
  it('stay within the configured sizes and mix', () => {
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const settings = { ...DEFAULT_TRAFFIC, promptMin: 3, promptMax: 7, budgetMin: 10, budgetMax: 12, streamShare: 0.5, nonMigratableShare: 0.25 };
    let streams = 0;
    let refused = 0;
    const n = 2000;
    for (let i = 0; i < n; i++) {
      const { body, migratable } = generateRequest(settings, random);
      expect(body.input_ids.length).toBeGreaterThanOrEqual(3);
      expect(body.input_ids.length).toBeLessThanOrEqual(7);
      expect(body.sampling_params.max_new_tokens).toBeGreaterThanOrEqual(10);
      expect(body.sampling_params.max_new_tokens).toBeLessThanOrEqual(12);
      if (body.stream) streams++;
      if (!migratable) {
        refused++;
        // What makes it non-migratable must be stateful sampling that admission refuses.
        const p = body.sampling_params as Record<string, number>;
        expect((p.sampling_seed !== undefined && (p.temperature ?? 0) > 0) || (p.frequency_penalty ?? 0) !== 0).toBe(true);
      }
    }
    expect(streams / n).toBeGreaterThan(0.45);
    expect(streams / n).toBeLessThan(0.55);
    expect(refused / n).toBeGreaterThan(0.2);
    expect(refused / n).toBeLessThan(0.3);
  });
});
