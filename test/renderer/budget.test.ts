import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { budgetBar, percent } from '../../renderer/src/store/budget.ts';
import { RequestBook } from '../../renderer/src/store/request-book.ts';
import { requestEvents } from './scenario.ts';

function barOf(budget: number | null, attempts: Parameters<typeof requestEvents>[3], finish = true) {
  const book = new RequestBook();
  book.applyBatch(requestEvents('r', 0, budget, attempts, { finish }));
  return budgetBar(book.get('r')!);
}

describe('budget bar', () => {
  it('splits a migrated request at the migration token and shades what was replayed', () => {
    const bar = barOf(100, [{ worker: 'w0', tokens: 30, fails: true }, { worker: 'w1', tokens: 25 }], false);
    expect(bar).toEqual({
      total: 100, produced: 55, remaining: 45, replayed: 30, budgetKnown: true,
      segments: [{ attempt: 0, worker: 'w0', from: 0, to: 30 }, { attempt: 1, worker: 'w1', from: 30, to: 55 }],
    });
  });

  it('shades everything before the latest continuation after two migrations', () => {
    const bar = barOf(60, [{ worker: 'w0', tokens: 10, fails: true }, { worker: 'w1', tokens: 15, fails: true }, { worker: 'w2', tokens: 35 }]);
    expect(bar.replayed).toBe(25);
    expect(bar.remaining).toBe(0);
    expect(bar.segments.map((s) => [s.from, s.to])).toEqual([[0, 10], [10, 25], [25, 60]]);
  });

  it('has nothing shaded without a migration, and no remaining part when the budget is unknown', () => {
    const bar = barOf(null, [{ worker: 'w0', tokens: 12 }]);
    expect(bar).toMatchObject({ total: 12, produced: 12, remaining: 0, replayed: 0, budgetKnown: false });
  });

  it('laws: produced + remaining = budget; segments tile [0, produced); shading within produced', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 100 }), (tokens, extra) => {
        const produced = tokens.reduce((a, b) => a + b, 0);
        const budget = produced + extra;
        const bar = barOf(budget, tokens.map((n, i) => ({ worker: `w${i}`, tokens: n, fails: i < tokens.length - 1 })));
        expect(bar.produced + bar.remaining).toBe(budget);
        expect(bar.total).toBe(Math.max(budget, 1));
        let at = 0;
        for (const s of bar.segments) {
          expect(s.from).toBe(at);
          at = s.to;
        }
        expect(at).toBe(produced);
        expect(bar.replayed).toBe(produced - tokens[tokens.length - 1]!);
        expect(bar.replayed).toBeLessThanOrEqual(bar.produced);
      }),
      { numRuns: 300 },
    );
  });

  it('maps token ranges to clamped CSS percentages', () => {
    expect(percent(25, 50, 100)).toEqual({ left: '25%', width: '25%' });
    expect(percent(-5, 500, 200)).toEqual({ left: '0%', width: '100%' });
  });
});
