// The arithmetic of a continuation, the same for every format: the remaining budget and the
// reduced minimum. The continuation's body is the format's (formats/<name>/continuation.ts).

/** Remaining budget: original − replayed, never below 0. */
export function remainingBudget(original: number, replayed: number): number {
  return Math.max(0, original - replayed);
}

/** The minimum shrinks with the replayed tokens, never below 0 nor above the remaining budget. */
export function remainingMinTokens(originalMin: number, replayed: number, remaining: number): number {
  return Math.min(remaining, Math.max(0, originalMin - replayed));
}
