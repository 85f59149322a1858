// Whose fault a failure is. Before the request's first token, a broken stream or a 500 is the
// worker's only with evidence (migration.md, "Blame needs evidence"; core/failure.ts
// needsEvidence; the pool's evidenceAgainst): without it the worker is neither benched nor
// counted in its breaker, and the attempt's row says what was read.
import { needsEvidence, type Failure } from '../core/failure.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { AttemptState } from './attempt-state.ts';

/**
 * Judge a failure that blames the attempt's worker, after `tokens` of the request's output.
 * Unproven, it joins `unproven` (the worker's url and what was read): the second such failure
 * ends the request, which fails the same way wherever it goes.
 */
export async function judgeBlame(pool: WorkerPool, a: AttemptState, failure: Failure, tokens: number, unproven: string[]): Promise<void> {
  if (!needsEvidence(failure, tokens)) {
    pool.blame(a.worker, failure.kind === 'connect', failure.kind, tokens);
    return;
  }
  const verdict = await pool.evidenceAgainst(a.worker, a.startedAt);
  failure.evidence = `${failure.evidence ?? failure.kind}; before any token, ${verdict.evidence}`;
  if (verdict.blame) pool.blame(a.worker, verdict.dead, failure.kind, 0);
  else unproven.push(`${a.worker.url}: ${failure.message} (${verdict.evidence})`);
}
