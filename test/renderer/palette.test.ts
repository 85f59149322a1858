// Worker colours stay apart for up to 12 workers, with normal vision and under simulated
// protanopia, deuteranopia and tritanopia (Machado et al. 2009, severity 1), measured as the
// smallest CIEDE2000 ΔE between any two (docs/dashboard.md states the figures); and every one
// keeps WCAG's 3:1 contrast for graphics against the attempt tracks (--bar-bg) of both themes,
// in every vision.
import { describe, expect, it } from 'vitest';
import { WORKER_PALETTE, workerColor } from '../../renderer/src/store/colors.ts';
import { THEMES } from './theme-css.ts';
import { contrastRatio, deltaE2000, labOf, minPairwise, VISIONS } from '../../renderer/src/store/color-vision.ts';

/** The figures docs/dashboard.md gives (rounded down to one decimal). */
const FLOOR = { normal: 5.6, protanopia: 4.2, deuteranopia: 4.6, tritanopia: 4.8 } as const;


describe('worker palette', () => {
  it('CIEDE2000 agrees with Sharma, Wu and Dalal\'s test data', () => {
    // Pairs 1, 7 and 17 of the paper's table 1.
    expect(deltaE2000([50, 2.6772, -79.7751], [50, 0, -82.7485])).toBeCloseTo(2.0425, 4);
    expect(deltaE2000([50, 0, 0], [50, -1, 2])).toBeCloseTo(2.3669, 4);
    expect(deltaE2000([50, 2.5, 0], [73, 25, -18])).toBeCloseTo(27.1492, 4);
  });

  it('the simulations move colours as dichromats confuse them (red and green meet for protanopes, not for tritanopes)', () => {
    const gap = (v: (typeof VISIONS)[number]) => deltaE2000(labOf('#cc3333', v), labOf('#669933', v));
    expect(gap('protanopia')).toBeLessThan(gap('normal') / 2);
    expect(gap('deuteranopia')).toBeLessThan(gap('normal') / 2);
    expect(gap('tritanopia')).toBeGreaterThan(gap('normal') / 2);
  });

  it('every worker colour holds 3:1 against both themes\' tracks, in every vision', () => {
    for (const [theme, vars] of Object.entries(THEMES)) {
      const track = vars.get('--bar-bg')!;
      for (const c of WORKER_PALETTE) {
        for (const v of VISIONS) expect(contrastRatio(c, track, v), `${c} on ${theme} ${track}, ${v}`).toBeGreaterThanOrEqual(3);
      }
    }
  });

  it('12 workers, w0..w11, get 12 colours at least ΔE 4 apart in every vision', () => {
    const colors = Array.from({ length: 12 }, (_, i) => workerColor(`w${i}`));
    expect(new Set(colors).size).toBe(12);
    expect(colors).toEqual([...WORKER_PALETTE]);
    for (const v of VISIONS) {
      const { deltaE, pair } = minPairwise(colors, v);
      expect(deltaE, `${v}: ${colors[pair[0]]} vs ${colors[pair[1]]}`).toBeGreaterThanOrEqual(FLOOR[v]);
    }
  });
});
