// Tick and label layout for the time axes: the request list's (offsets back from its right end)
// and the charts' (wall-clock times). Pure, so the tests hold the values a user reads.

/** A round step of at least `raw`: 1, 2 or 5 × 10^k. */
export function niceStep(raw: number): number {
  if (!(raw > 0)) return 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw * (1 - 1e-9)) ?? 10 * mag;
}

/** Steps for a time axis, in ms: seconds and minutes a clock reads easily. */
const TIME_STEPS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
  1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
];
export function timeStep(raw: number): number {
  return TIME_STEPS.find((s) => s >= raw) ?? niceStep(raw / 86_400_000) * 86_400_000;
}

/**
 * Ticks for an axis of `span` ms labelled by offset back from its right end (−2 s, −4 s, ...):
 * whole multiples of a round step counted from the end, so every label is a round value. The
 * right end carries a label of its own (a clock time or "now"), so ticks closer to it than
 * `endReserve` of the span are left out rather than printed over it; likewise at the left edge.
 * `at` is the tick's distance from the left end, `offset` the (negative) ms it is labelled with.
 */
export function endTicks(span: number, count = 5, endReserve = 0.14): { at: number; offset: number }[] {
  if (!(span > 0)) return [];
  const step = timeStep(span / Math.max(1, count));
  const out: { at: number; offset: number }[] = [];
  for (let k = 1; k * step < span; k++) {
    const at = span - k * step;
    if (k * step < endReserve * span || at < 0.04 * span) continue;
    out.push({ at, offset: -k * step });
  }
  return out.reverse();
}

/** Wall-clock ticks for [from, to] (epoch ms): multiples of a time step, about `count` of them. */
export function clockTicks(from: number, to: number, count = 6): number[] {
  if (!(to > from)) return [from];
  const step = timeStep((to - from) / Math.max(1, count));
  const out: number[] = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) out.push(t);
  return out;
}

/**
 * Labels along a line (marker labels over a chart): each at its x, `width` px wide, put on the
 * lowest of `lanes` rows where it does not overlap a label already placed; one that fits on no
 * row is dropped (lane null), since its marker line still shows and the list above the charts
 * names it. Placed left to right.
 */
export function layoutLabels(items: readonly { x: number; width: number }[], lanes = 3, gap = 4): (number | null)[] {
  const ends: number[] = Array.from({ length: lanes }, () => -Infinity);
  const order = items.map((_, i) => i).sort((a, b) => items[a]!.x - items[b]!.x);
  const out: (number | null)[] = items.map(() => null);
  for (const i of order) {
    const { x, width } = items[i]!;
    const lane = ends.findIndex((end) => x >= end + gap);
    if (lane < 0) continue;
    out[i] = lane;
    ends[lane] = x + width;
  }
  return out;
}
