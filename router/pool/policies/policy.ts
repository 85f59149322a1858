// A routing policy picks one worker among the eligible ones; the pool has already filtered out
// unhealthy, benched, circuit-open, draining and excluded workers (one place knows health).
import type { Worker } from '../worker.ts';
import type { PageKeys } from '../prefix-tree.ts';
import type { PrefixSink } from '../prefix-share.ts';

/**
 * What a request brings to placement, and what the policy says about its choice. Only
 * `cache_aware` reads the tokens and writes `prefix` / `reason`; the trace row carries both.
 */
export interface Placement {
  /** The prompt's token ids (empty when the router has none: a text prompt). */
  prompt: readonly number[];
  /** A continuation's replayed output tokens, placed as part of its prompt; null for attempt 0. */
  replayed: readonly number[] | null;
  /** Out: tokens of the chosen worker's cached prefix, as the policy believes it, when it decided on it. */
  prefix: number | null;
  /** Out: why this worker (e.g. `cache_hit 480/512`, `imbalanced`, `below_threshold`). */
  reason: string | null;
}

export interface Policy {
  readonly name: string;
  /** Whether the policy reads the load workers report (the pool polls it only then). */
  readonly usesReportedLoad?: boolean;
  /** `candidates` is never empty. */
  select(candidates: readonly Worker[], placement?: Placement | null): Worker;
  /** The worker's cache is gone or unknown (flushed, dead, restarted): forget what was sent to it. */
  forget?(w: Worker): void;
  /**
   * The worker left the pool: drop everything held for it. Its id never comes back (a re-added
   * URL, a replaced pod, gets a new one), so whatever is kept for it past this is kept for good.
   */
  remove?(w: Worker): void;
  /** What the policy sends to workers goes to `sink` too (replicas share it: prefix-share.ts). */
  share?(sink: PrefixSink | null): void;
  /** Another replica sent `k`'s sequence to `w`: remember it as if this policy had. */
  learn?(w: Worker, k: PageKeys): void;
}
