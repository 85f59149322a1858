import type { Policy } from './policy.ts';
import type { Worker } from '../worker.ts';

/** The worker with the fewest attempts in flight; ties rotate so equal workers share load. */
export class LeastInflight implements Policy {
  readonly name = 'least_inflight';
  private turn = 0;

  select(candidates: readonly Worker[]): Worker {
    const n = candidates.length;
    const offset = this.turn++ % n;
    let best = candidates[offset]!;
    for (let k = 1; k < n; k++) {
      const w = candidates[(offset + k) % n]!;
      if (w.inFlight < best.inFlight) best = w;
    }
    return best;
  }
}
