// The load an SGLang worker reports itself (pool/load.ts reads it for the policies that balance on
// it): `GET /get_load` (http_server.py get_load → TokenizerManager.get_load), one entry per
// data-parallel rank: `{dp_rank, num_reqs, num_waiting_reqs, num_tokens, ...}`, where num_reqs is
// running + waiting. The load is the sum of num_reqs over the ranks.
import type { LoadReport } from '../../core/types.ts';

export function sglangLoad(text: string): number | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  const ranks = Array.isArray(v) ? v : [v];
  let sum = 0;
  let seen = false;
  for (const r of ranks) {
    const n = typeof r === 'object' && r !== null ? (r as Record<string, unknown>).num_reqs : undefined;
    if (typeof n === 'number' && Number.isFinite(n) && n >= 0) {
      sum += n;
      seen = true;
    }
  }
  return seen ? sum : null;
}

export const SGLANG_LOAD: LoadReport = { path: '/get_load', read: sglangLoad };
