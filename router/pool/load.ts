// The load a worker reports itself, for policies that balance on it (cache_aware, power_of_two):
// it counts every router's requests, where the router's own in-flight count sees only its own.
//
// - SGLang: `GET /get_load` (http_server.py get_load → TokenizerManager.get_load), one entry per
//   data-parallel rank: `{dp_rank, num_reqs, num_waiting_reqs, num_tokens, ...}`, where num_reqs
//   is running + waiting. The load is the sum of num_reqs over the ranks.
// - vLLM: `GET /metrics` (Prometheus text), `vllm:num_requests_running` + `vllm:num_requests_waiting`
//   summed over their label sets (vllm/v1/metrics/loggers.py).
import type { Pool } from 'undici';
import type { FormatName } from '../core/types.ts';

const RUNNING = 'vllm:num_requests_running';
const WAITING = 'vllm:num_requests_waiting';

/** Requests running + waiting on the worker, as it reports them, or null (no answer, unknown shape). */
export async function readLoad(pool: Pool, format: FormatName, timeoutMs: number): Promise<number | null> {
  try {
    const res = await pool.request({ path: format === 'vllm' ? '/metrics' : '/get_load', method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return null;
    }
    const text = await res.body.text();
    return format === 'vllm' ? vllmLoad(text) : sglangLoad(text);
  } catch {
    return null;
  }
}

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

export function vllmLoad(text: string): number | null {
  let sum = 0;
  let seen = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(RUNNING) && !line.startsWith(WAITING)) continue;
    const rest = line.charCodeAt(RUNNING.length) === 0x20 || line.charCodeAt(RUNNING.length) === 0x7b || line.charCodeAt(WAITING.length) === 0x20 || line.charCodeAt(WAITING.length) === 0x7b;
    if (!rest) continue;
    const n = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(n) && n >= 0) {
      sum += n;
      seen = true;
    }
  }
  return seen ? sum : null;
}
