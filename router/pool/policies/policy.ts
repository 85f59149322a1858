// A routing policy picks one worker among the eligible ones; the pool has already filtered out
// unhealthy, benched, circuit-open, draining and excluded workers (one place knows health).
import type { Worker } from '../worker.ts';

export interface Policy {
  readonly name: string;
  /** `candidates` is never empty. */
  select(candidates: readonly Worker[]): Worker;
}
