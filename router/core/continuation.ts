// The arithmetic of a continuation, the same for every format: the remaining budget and the
// reduced minimum. The continuation's body is the format's (formats/<name>/continuation.ts).
import type { AttemptSpec } from './types.ts';

/** Remaining budget: original − replayed, never below 0. */
export function remainingBudget(original: number, replayed: number): number {
  return Math.max(0, original - replayed);
}

/** The minimum shrinks with the replayed tokens, never below 0 nor above the remaining budget. */
export function remainingMinTokens(originalMin: number, replayed: number, remaining: number): number {
  return Math.min(remaining, Math.max(0, originalMin - replayed));
}

/**
 * Attempt `index`'s spec after `replayedIds`: a continuation of an admitted request with a budget
 * asks for the remaining budget and the reduced minimum explicitly; attempt 0, and a request not
 * admitted or without a budget, send the client's budget fields as they are.
 */
export function attemptSpec(index: number, rid: string, replayedIds: readonly number[], budget: number | null, admitted: boolean, minNewTokens: number, prefillLeg: boolean): AttemptSpec {
  const replayed = replayedIds.length;
  const remaining = index > 0 && admitted && budget !== null ? remainingBudget(budget, replayed) : null;
  return {
    index,
    rid,
    replayed: index > 0 ? replayedIds.slice() : [],
    remaining,
    minTokens: remaining === null ? 0 : remainingMinTokens(minNewTokens, replayed, remaining),
    prefillLeg,
  };
}
