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

  it('evicts the least recently used leaf first, so a shared root outlives the branches under it (RadixCache.evict)', () => {
    const c = new PrefixCache(5);
    c.insertSequence([1, 2, 3]);
    c.insertSequence([1, 2, 9]);
    expect(c.size).toBe(4);
    // Two more pages: the oldest leaf goes first ([1,2,3]'s last page), then the next oldest
    // leaf ([1,2,9]'s last page, older than the new pages); [1] and [1,2] are more recent than
    // any page below them and stay.
    c.insertSequence([7, 8]);
    expect(c.peek([1, 2, 3])).toBe(2);
    expect(c.peek([1, 2, 9])).toBe(3);
    c.insertSequence([7, 8, 6]);
    expect(c.peek([1, 2, 9])).toBe(2);
    expect(c.peek([1, 2])).toBe(2);
    expect(c.evictions).toBe(2);
  });

  it('peek reads without touching: a peeked page is still the next to go', () => {
    const c = new PrefixCache(2);
    c.insertSequence([4]);
    c.insertSequence([5]);
    expect(c.peek([4])).toBe(1);
    c.insertSequence([6]);
    expect(c.peek([4])).toBe(0);
    expect(c.peek([5])).toBe(1);
    // match does touch: [5] is now more recent than [6].
    expect(c.match([5], 1)).toBe(1);
    c.insertSequence([7]);
    expect(c.peek([6])).toBe(0);
    expect(c.peek([5])).toBe(1);
  });
});
