// Numbers carry units; times are relative on the waterfall and absolute in tooltips.

export function fmtRate(perSec: number, unit = '/s'): string {
  if (perSec >= 1000) return `${(perSec / 1000).toFixed(1)}k${unit}`;
  if (perSec >= 100) return `${Math.round(perSec)}${unit}`;
  return `${perSec.toFixed(1)}${unit}`;
}

export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function fmtClock(epochMs: number | null | undefined): string {
  if (epochMs === null || epochMs === undefined) return '—';
  const d = new Date(epochMs);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function fmtTokens(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : `${n} tok`;
}

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A worker's short label: its id and, when it fits, the host:port it lives on. */
export function workerLabel(id: string, url?: string): string {
  if (!url) return id;
  try {
    return `${id} · ${new URL(url).host}`;
  } catch {
    return id;
  }
}

/** ISO 8601 (UTC), or — for a missing time. */
export function fmtIso(epochMs: number | null | undefined): string {
  if (epochMs === null || epochMs === undefined || !Number.isFinite(epochMs)) return '—';
  return new Date(epochMs).toISOString();
}

/** A duration as a tick label: +0, +250 ms, +1.5 s, +2 min. */
export function fmtOffset(ms: number, sign = '+'): string {
  const a = Math.abs(ms);
  const s = ms < 0 ? '−' : sign;
  if (a === 0) return `${sign === '+' ? '+' : ''}0`;
  if (a < 1000) return `${s}${Math.round(a)} ms`;
  if (a < 60_000) return `${s}${Number((a / 1000).toFixed(a % 1000 === 0 ? 0 : 1))} s`;
  return `${s}${Number((a / 60_000).toFixed(a % 60_000 === 0 ? 0 : 1))} min`;
}

/** Tick positions for [0, span] ms: round steps (1, 2, 5 × 10^k ms), about `count` of them. */
export function niceTicks(span: number, count = 6): number[] {
  if (!(span > 0)) return [0];
  const raw = span / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let t = 0; t <= span + 1e-9; t += step) out.push(t);
  return out;
}
