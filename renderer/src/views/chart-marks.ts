// How a fault marker is drawn on the charts and where its label goes. Pure.
import type { FaultMark } from '../../../host/contract.ts';
import { groupMarks, groupTone, markTone, toneColor } from '../store/faults.ts';
import { layoutLabels } from './axis.ts';

/** Colour by what the mark is (store/faults.ts markTone); dashed when the router reported it. */
export function chartMarkStyle(m: FaultMark): { stroke: string; strokeDasharray: string | undefined } {
  return { stroke: toneColor(markTone(m.kind)), strokeDasharray: m.source === 'dashboard' ? undefined : '4 3' };
}

/** About how wide a marker label is at 11 px: a width estimate is enough to keep labels apart. */
const CHAR_PX = 6.3;
const LANES = 3;

export interface ChartLabel { mark: FaultMark; text: string; lane: number; right: boolean; color: string }

/**
 * The labels of the marks in [from, to] over a plot `plotWidth` px wide: one per group of marks
 * that land together, on the first of three rows where it does not cover another; a label that
 * fits on no row is left off (its line still shows, and the list above the charts names it). A
 * label in the right part of the plot hangs to the left of its line, so the plot does not cut it.
 */
export function chartLabels(marks: readonly FaultMark[], minGap: number, from: number, to: number, plotWidth: number): ChartLabel[] {
  const span = Math.max(1, to - from);
  const groups = groupMarks(marks, minGap);
  const boxes = groups.map((g) => {
    const x = ((g.t - from) / span) * plotWidth;
    const width = g.label.length * CHAR_PX + 8;
    const right = (g.t - from) / span > 0.55;
    return { x: right ? x - width : x, width, right };
  });
  const lanes = layoutLabels(boxes, LANES);
  const out: ChartLabel[] = [];
  groups.forEach((g, i) => {
    const lane = lanes[i];
    if (lane === null || lane === undefined) return;
    out.push({ mark: g.marks[0]!, text: g.label, lane, right: boxes[i]!.right, color: toneColor(groupTone(g.marks)) });
  });
  return out;
}
