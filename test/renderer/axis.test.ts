// The time axes' ticks and the chart marker labels' layout.
import { describe, expect, it } from 'vitest';
import { clockTicks, endTicks, layoutLabels, niceStep } from '../../renderer/src/views/axis.ts';
import { fmtOffset } from '../../renderer/src/views/format.ts';

const roundSeconds = (ms: number) => [1, 2, 5, 10, 15, 30, 60, 120, 300, 600].some((s) => (Math.abs(ms) / 1000) % s === 0 && Math.abs(ms) / 1000 / s <= 10);

describe('request list axis (offsets from its right end)', () => {
  // A fitted axis spans whatever the fitted requests span, e.g. 9.3 s or 79.3 s: the old ticks
  // were counted from the left, so their offsets from the end were −1.3 s, −3.3 s, ... and the
  // last one printed into the end's clock label ("−1.323:55:05").
  for (const span of [9_300, 79_323, 1_000, 4_321, 61_000, 300_000, 873_210]) {
    it(`a ${span} ms span: round offsets, none printed over the end label`, () => {
      const ticks = endTicks(span, 5);
      expect(ticks.length).toBeGreaterThan(0);
      for (const { at, offset } of ticks) {
        expect(at).toBeCloseTo(span + offset, 6);
        expect(span - at).toBeGreaterThanOrEqual(0.14 * span);
        expect(at).toBeGreaterThan(0);
        expect(fmtOffset(offset)).not.toMatch(/\.\d/);
        expect(roundSeconds(offset) || Math.abs(offset) < 1000, `${offset}`).toBe(true);
      }
    });
  }
});

describe('nice steps', () => {
  it('are 1, 2 or 5 × 10^n', () => {
    expect([0.13, 0.3, 3, 7, 42, 130].map(niceStep)).toEqual([0.2, 0.5, 5, 10, 50, 200]);
  });

  it('chart clock ticks fall on whole 10 s / 15 s / 30 s / minute boundaries', () => {
    const from = Date.UTC(2026, 0, 1, 12, 0, 7, 321);
    const ticks = clockTicks(from, from + 300_000, 6);
    expect(ticks.length).toBeGreaterThanOrEqual(4);
    const step = ticks[1]! - ticks[0]!;
    expect([30_000, 60_000]).toContain(step);
    for (const t of ticks) expect(t % step).toBe(0);
    expect(clockTicks(from, from + 60_000, 6).every((t) => t % 10_000 === 0)).toBe(true);
  });
});

describe('chart marker labels', () => {
  it('labels that would overlap go to the next row; with no row free they are dropped', () => {
    const lanes = layoutLabels([{ x: 0, width: 50 }, { x: 20, width: 50 }, { x: 40, width: 50 }, { x: 45, width: 50 }, { x: 100, width: 30 }], 3);
    expect(lanes).toEqual([0, 1, 2, null, 0]);
  });

  it('apart, they all stay on the first row', () => {
    expect(layoutLabels([{ x: 200, width: 40 }, { x: 0, width: 40 }, { x: 100, width: 40 }])).toEqual([0, 0, 0]);
  });
});
