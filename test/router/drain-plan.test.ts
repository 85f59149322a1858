// The drain's plan (router/migration/drain.ts), as laws: the moves of n streams are spread evenly
// over the window, the first at once and none after it; and a stream paced at a steady rate is
// judged to finish by the cutoff exactly when it would.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { finishesBy, staggered } from '../../router/migration/drain.ts';

describe('drain plan', () => {
  it('staggers n moves evenly over the window: the first at once, in order, none at or past its end', () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 120_000 }), (n, window) => {
      const at = staggered(n, window);
      expect(at).toHaveLength(n);
      if (n === 0) return;
      expect(at[0]).toBe(0);
      for (let i = 1; i < n; i++) {
        expect(at[i]!).toBeGreaterThanOrEqual(at[i - 1]!);
        // Even: each gap is the window's n-th part, to the millisecond.
        expect(Math.abs(at[i]! - at[i - 1]! - window / n)).toBeLessThanOrEqual(1);
      }
      if (window > 0) expect(at[n - 1]!).toBeLessThan(window);
      else expect(at.every((t) => t === 0)).toBe(true);
    }));
  });

  it('a stream at a steady pace finishes by the cutoff exactly when its remaining tokens at that pace fit', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 200 }), // ms per token
      fc.integer({ min: 2, max: 500 }), // tokens of this attempt so far
      fc.integer({ min: 0, max: 1000 }), // tokens left in the budget
      fc.integer({ min: -1000, max: 200_000 }), // cutoff, ms from now
      (pace, tokens, remaining, cutoffIn) => {
        const now = 1_700_000_000_000;
        const firstAt = now - pace * (tokens - 1);
        const endsAt = now + remaining * pace;
        expect(finishesBy(now + cutoffIn, now, firstAt, tokens, remaining)).toBe(remaining === 0 || endsAt <= now + cutoffIn);
      },
    ));
  });

  it('moves what it cannot judge: no first token, under two tokens, or no budget', () => {
    const now = 10_000;
    expect(finishesBy(now + 1e9, now, null, 0, 5)).toBe(false);
    expect(finishesBy(now + 1e9, now, now - 100, 1, 5)).toBe(false);
    expect(finishesBy(now + 1e9, now, now - 100, 50, null)).toBe(false);
  });
});
