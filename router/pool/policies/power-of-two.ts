import type { Policy } from './policy.ts';
import type { Worker } from '../worker.ts';

/** Two random choices, the less loaded wins: near-least-loaded without herding. */
export class PowerOfTwo implements Policy {
  readonly name = 'power_of_two';

  constructor(private readonly random: () => number = Math.random) {}

  select(candidates: readonly Worker[]): Worker {
    if (candidates.length === 1) return candidates[0]!;
    const i = Math.floor(this.random() * candidates.length);
    let j = Math.floor(this.random() * (candidates.length - 1));
    if (j >= i) j++;
    const a = candidates[i]!;
    const b = candidates[j]!;
    return b.inFlight < a.inFlight ? b : a;
  }
}
