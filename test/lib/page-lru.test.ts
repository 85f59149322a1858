// The LRU set of page keys both prefix caches stand on: a path inserted deepest first keeps the
// held pages prefix-closed, eviction takes the least recently used leaf, and the bound holds.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PageLru, pageKey } from '../../lib/page-lru.ts';

/** A path of pages named by its length alone (the hash: the path's id). */
class Paths extends PageLru {
  insert(id: number, pages: number): void {
    const keys = new Float64Array(pages);
    for (let i = 0; i < pages; i++) keys[i] = pageKey(i + 1, id);
    this.insertPath(keys, pages);
  }

  touch(id: number, pages: number): void {
    const keys = new Float64Array(pages);
    for (let i = 0; i < pages; i++) keys[i] = pageKey(i + 1, id);
    this.touchPath(keys, pages);
  }

  holds(id: number, page: number): boolean {
    return this.slots.has(pageKey(page, id));
  }
}

describe('PageLru', () => {
  it('evicts the least recently used leaf first, and a touched path last', () => {
    const l = new Paths(6);
    l.insert(1, 3);
    l.insert(2, 3);
    l.touch(1, 3);
    l.insert(3, 2);
    // Path 2 was least recent: its leaves go first, deepest first.
    expect([l.holds(2, 3), l.holds(2, 2), l.holds(2, 1)]).toEqual([false, false, true]);
    expect([1, 2, 3].every((p) => l.holds(1, p))).toBe(true);
    expect(l.size).toBe(6);
    expect(l.evictions).toBe(2);
  });

  it('stays within its bound and prefix-closed over any inserts, touches and clears', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 }), fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 12 })), { maxLength: 80 }), (cap, ops) => {
        const l = new Paths(cap * 2, 2);
        for (const [op, id, pages] of ops) {
          if (op === 0) l.clear();
          else if (op === 1) {
            let held = 0;
            while (held < pages && l.holds(id, held + 1)) held++;
            l.touch(id, held);
          } else l.insert(id, pages);
          expect(l.size).toBeLessThanOrEqual(cap);
          expect(l.tokens).toBe(l.size * 2);
          for (let id2 = 0; id2 <= 4; id2++) for (let p = 2; p <= 12; p++) if (l.holds(id2, p)) expect(l.holds(id2, p - 1)).toBe(true);
        }
      }),
    );
  });

  it('holds nothing at a capacity under one page, and rejects a page size that is not a positive integer', () => {
    const l = new Paths(3, 4);
    l.insert(1, 5);
    expect(l.size).toBe(0);
    expect(() => new PageLru(10, 0)).toThrow(/page size/);
    expect(() => new PageLru(10, 1.5)).toThrow(/page size/);
  });
});
