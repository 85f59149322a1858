import type { Policy } from './policy.ts';
import type { Worker } from '../worker.ts';

/**
 * Two random choices, the less loaded wins: near-least-loaded without herding. Load is what the
 * worker last reported (SGLang's /get_load, vLLM's /metrics), or the router's own count of
 * attempts in flight when that is higher (fresher) or unknown, as the gateway's `power_of_two`
 * (sgl-model-gateway/src/policies/power_of_two.rs) prefers the workers' own loads.
 */
export class PowerOfTwo implements Policy {
  readonly name = 'power_of_two';
  readonly usesReportedLoad = true;

  constructor(private readonly random: () => number = Math.random) {}

  select(candidates: readonly Worker[]): Worker {
    if (candidates.length === 1) return candidates[0]!;
    const i = Math.floor(this.random() * candidates.length);
    let j = Math.floor(this.random() * (candidates.length - 1));
    if (j >= i) j++;
    const a = candidates[i]!;
    const b = candidates[j]!;
    return b.load() < a.load() ? b : a;
  }
}
