// Stable worker colours: a function of the worker id alone, so the same worker has the same
// colour in every view, across reloads and in both hosts. Router ids are w0, w1, ...: their
// number picks the palette slot so the first workers get well-separated colours.
//
// Twelve colours chosen by a greedy max-min search over the sRGB cube for CIEDE2000 distance under
// normal vision and Machado et al.'s protanopia, deuteranopia and tritanopia (store/color-vision.ts),
// among the colours that keep WCAG's 3:1 contrast for graphics against the attempt track of both
// themes (--bar-bg, light and dark) in all four visions. That holds their luminance to a narrow
// middle band, so they differ by hue and chroma alone and sit closer together than colours free
// to vary in lightness would. Chroma 20 or more (no greys), at least ΔE 15 from the failure reds
// and the migration oranges. In this order the first workers are the most distinct.
// test/renderer/palette.test.ts holds the contrast and the minimum pairwise ΔE per vision.
export const WORKER_PALETTE = [
  '#059146', '#cd0aff', '#917391', '#64876e', '#8778b9', '#738200', '#a07382', '#826ed2', '#6e875f', '#8273a0', '#4b877d', '#5f69fa',
] as const;

export function workerColor(id: string): string {
  const n = /(\d+)$/.exec(id);
  let slot: number;
  if (n) {
    slot = Number(n[1]) % WORKER_PALETTE.length;
  } else {
    let h = 0;
    for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
    slot = h % WORKER_PALETTE.length;
  }
  return WORKER_PALETTE[slot]!;
}
