// Stable worker colours: a function of the worker id alone, so the same worker has the same
// colour in every view, across reloads and in both hosts. Router ids are w0, w1, ...: their
// number picks the palette slot so the first workers get well-separated colours.
export const WORKER_PALETTE = [
  '#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#edc948', '#76b7b2', '#ff9da7', '#9c755f', '#bab0ac', '#17becf',
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
