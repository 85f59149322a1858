import type { Policy } from './policy.ts';
import type { Worker } from '../worker.ts';

export class RoundRobin implements Policy {
  readonly name = 'round_robin';
  private next = 0;

  select(candidates: readonly Worker[]): Worker {
    const w = candidates[this.next % candidates.length]!;
    this.next = (this.next + 1) % 1_000_000_007;
    return w;
  }
}
