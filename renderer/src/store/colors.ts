// Stable worker colours: a function of the worker id alone, so the same worker has the same
// colour in every view, across reloads and in both hosts. Router ids are w0, w1, ...: their
// number picks the palette slot so the first workers get well-separated colours.
//
// Twelve colours chosen by a max-min search over the sRGB cube for CIEDE2000 distance under normal
// vision and Machado et al.'s protanopia, deuteranopia and tritanopia (store/color-vision.ts):
// lightness L* 40..80 (drawn on light and dark themes), chroma 20 or more (no greys), and at least
// ΔE 20 from the failure red and the migration orange. In this order the first workers are the
// most distinct. test/renderer/palette.test.ts holds the minimum pairwise ΔE per vision.
export const WORKER_PALETTE = [
  '#6688ff', '#666600', '#aacc00', '#ffaacc', '#aa2288', '#228866', '#0044ff', '#88cc88', '#888800', '#aa88aa', '#ccaaff', '#44aa88',
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
