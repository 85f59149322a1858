// The simulator's prefix cache: page-aligned matches of what was inserted, bounded by its
// capacity, and eviction of what was not used for a while before what was used recently.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PrefixCache } from '../../sim/prefix-cache.ts';

describe('PrefixCache', () => {
  it('matches the longest inserted page-aligned prefix, within the limit', () => {
    const c = new PrefixCache(1000, 4);
    c.insertSequence([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(c.match([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 100)).toBe(8);
    expect(c.match([1, 2, 3, 4, 5, 6, 7, 0], 100)).toBe(4);
    expect(c.match([1, 2, 3, 4, 5, 6, 7, 8], 7)).toBe(4);
    expect(c.match([2, 1], 100)).toBe(0);
  });

  it('never holds more than its capacity, and evicts a page untouched for a whole capacity before one in use', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 60 }), fc.integer({ min: 64, max: 256 }), (seqs, capacity) => {
        const c = new PrefixCache(capacity);
        const hot = [99, 98, 97];
        c.insertSequence(hot);
        for (const s of seqs) {
          // The hot prefix is used by every request, as a chat template's first tokens are; a
          // request adds at most 15 pages, far fewer than three quarters of the capacity.
          expect(c.match(hot, 100)).toBe(3);
          c.insertSequence([...hot, ...s]);
          expect(c.size).toBeLessThanOrEqual(capacity);
        }
      }),
      { numRuns: 200 },
    );
    // A page nobody touches again is gone after a capacity of other inserts.
    const c = new PrefixCache(16);
    c.insertSequence([7]);
    for (let i = 0; i < 16; i++) c.insertSequence([1000 + i]);
    expect(c.match([7], 10)).toBe(0);
  });
});
