// The load a vLLM worker reports itself (pool/load.ts reads it for the policies that balance on
// it): `GET /metrics` (Prometheus text), `vllm:num_requests_running` + `vllm:num_requests_waiting`
// summed over their label sets (vllm/v1/metrics/loggers.py).
import type { LoadReport } from '../../core/types.ts';

const RUNNING = 'vllm:num_requests_running';
const WAITING = 'vllm:num_requests_waiting';

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

export const VLLM_LOAD: LoadReport = { path: '/metrics', read: vllmLoad };
