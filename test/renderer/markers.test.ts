// Fault markers are coloured by what they are (a restart is not a red kill-like line), and the
// marker colours hold WCAG 3:1 against each theme's track in every simulated vision.
import { describe, expect, it } from 'vitest';
import type { FaultKind, FaultMark } from '../../host/contract.ts';
import { contrastRatio, VISIONS } from '../../renderer/src/store/color-vision.ts';
import { groupMarks, groupTone, markTone, toneColor } from '../../renderer/src/store/faults.ts';
import { chartLabels, chartMarkStyle } from '../../renderer/src/views/chart-marks.ts';
import { THEMES, themeVars } from './theme-css.ts';

const mark = (kind: FaultKind, t = 0, source: FaultMark['source'] = 'dashboard'): FaultMark => ({ t, kind, worker: 'w1', url: null, source, detail: null });

describe('marker colours', () => {
  it('kill, hang, reset, reject, down and router lost are faults; slow, drain, remove degrade; restart, clear, undrain, add recover', () => {
    expect((['kill', 'hang', 'reset', 'reject', 'down', 'router_lost'] as FaultKind[]).map(markTone)).toEqual(Array(6).fill('fault'));
    expect((['slow', 'drain', 'remove'] as FaultKind[]).map(markTone)).toEqual(Array(3).fill('degrade'));
    expect((['restart', 'clear', 'undrain', 'add'] as FaultKind[]).map(markTone)).toEqual(Array(4).fill('recover'));
  });

  it('a restart through the dashboard is drawn in the recovery colour on the charts, a kill the router reported in the fault colour', () => {
    expect(chartMarkStyle(mark('restart')).stroke).toBe('var(--mark-recover)');
    expect(chartMarkStyle(mark('kill', 0, 'router')).stroke).toBe('var(--mark-fault)');
    expect(chartMarkStyle(mark('drain', 0, 'router')).stroke).toBe('var(--mark-degrade)');
    // Who made it is the dash.
    expect(chartMarkStyle(mark('kill')).strokeDasharray).toBeUndefined();
    expect(chartMarkStyle(mark('kill', 0, 'router')).strokeDasharray).toBe('4 3');
  });

  it('a flag shared by a kill and a restart takes the kill\'s colour', () => {
    const [g] = groupMarks([mark('restart', 0), mark('kill', 100)], 500);
    expect(groupTone(g!.marks)).toBe('fault');
    expect(toneColor(groupTone([mark('restart')]))).toBe('var(--mark-recover)');
  });

  it('every marker colour holds 3:1 against its theme\'s track, in every vision', () => {
    for (const [theme, vars] of Object.entries(THEMES)) {
      const track = vars.get('--bar-bg')!;
      for (const tone of ['fault', 'degrade', 'recover']) {
        const c = vars.get(`--mark-${tone}`);
        expect(c, `${theme} --mark-${tone}`).toMatch(/^#[0-9a-f]{6}$/i);
        for (const v of VISIONS) expect(contrastRatio(c!, track, v), `${theme} ${tone} ${c} on ${track}, ${v}`).toBeGreaterThanOrEqual(3);
      }
    }
    // The system-dark block says the same as the chosen-dark one.
    const system = themeVars('  :root:not([data-theme=\'light\']) {');
    for (const tone of ['fault', 'degrade', 'recover']) expect(system.get(`--mark-${tone}`)).toBe(THEMES.dark.get(`--mark-${tone}`));
  });
});

describe('chart marker labels', () => {
  it('labels of marks close together stack on rows instead of printing over each other', () => {
    // Three marks 2 s apart on a 60 s, 600 px plot: 20 px apart, labels ~60 px wide.
    const marks = [mark('kill', 10_000), mark('restart', 12_000), mark('drain', 14_000), mark('kill', 15_000)];
    const labels = chartLabels(marks, 500, 0, 60_000, 600);
    expect(labels.map((l) => l.lane)).toEqual([0, 1, 2]);
    expect(labels.map((l) => l.text)).toEqual(['kill w1', 'restart w1', 'drain w1']);
    expect(labels[1]!.color).toBe('var(--mark-recover)');
  });

  it('far apart, every label is on the first row', () => {
    const labels = chartLabels([mark('kill', 5_000), mark('restart', 30_000)], 500, 0, 60_000, 600);
    expect(labels.map((l) => [l.lane, l.right])).toEqual([[0, false], [0, false]]);
  });
});
