// Probing helpers shared by the formats (each format's probe: formats/<name>/probe.ts), and the
// health check, which is the same `GET /health` for SGLang and vLLM.
import type { Pool } from 'undici';

export type { ProbeResult } from './types.ts';

export async function getJson(pool: Pool, path: string, timeoutMs: number): Promise<Record<string, unknown> | null> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await pool.request({ path, method: 'GET', signal });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return null;
    }
    const v = (await res.body.json()) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * SGLang advertises preferred_sampling_params as an object since December 2025; before, as the
 * JSON string it was given on the command line. Both are read.
 */
export function preferredParams(v: unknown): Record<string, unknown> | null {
  let obj = v;
  if (typeof v === 'string') {
    try {
      obj = JSON.parse(v);
    } catch {
      return null;
    }
  }
  return typeof obj === 'object' && obj !== null && !Array.isArray(obj) ? (obj as Record<string, unknown>) : null;
}

export function preferredMaxNewTokens(v: unknown): number | null {
  const m = preferredParams(v)?.max_new_tokens;
  return typeof m === 'number' && Number.isInteger(m) && m >= 0 ? m : null;
}

export function positiveInt(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null;
}

export function str(v: unknown): string | null {
  return typeof v === 'string' && v.length > 0 ? v : null;
}

export async function checkHealth(pool: Pool, timeoutMs: number): Promise<boolean> {
  try {
    const res = await pool.request({ path: '/health', method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}
