// Whether a request may go on after a failure that migrates: a decision over plain data (what was
// admitted, the failures that showed no fault, the attempts, the sequence so far), tested and
// read apart from the loop that asks it (logical-request.ts).
import type { Admission } from '../core/types.ts';

export interface ContinueFacts {
  admission: Admission;
  /** Failures before the first token that no evidence showed to be their worker's. */
  unproven: readonly string[];
  attempts: number;
  /** Attempts moved off a draining worker: not counted against the limit. */
  drained: number;
  settings: { migrationLimit: number; migrationMaxSeqLen: number | null };
  /** Prompt + the tokens the client has. */
  sequence: number;
  /** The tokens the client has. */
  tokens: number;
  /** The worker returned text (no token-exact continuation). */
  sawText: boolean;
}

/** Why the request may not go on: the client's error (`status`: the router's own, else from the failure). */
export interface Refusal {
  message: string;
  type: string;
  exhausted: boolean;
  status?: number;
}

/** Why the request may not continue after a migratable failure, or null when it may. */
export function migrationRefusal(f: ContinueFacts): Refusal | null {
  if (!f.admission.admitted) {
    return { message: `worker failed and the request is not migratable (${f.admission.reason})`, type: 'not_migratable', exhausted: false };
  }
  if (f.unproven.length >= 2) {
    // Two workers that showed no fault failed this request alike, before any token: the
    // failure follows the request. 500, as SGLang itself answers a unary request whose
    // handler raised (Starlette's ServerErrorMiddleware); no worker is benched.
    return {
      message: `the request failed the same way on ${f.unproven.length} workers before any token, and none of them showed a fault, so no worker was benched: ${f.unproven.join('; ')}`,
      type: 'request_failed_on_healthy_workers',
      exhausted: false,
      status: 500,
    };
  }
  const limit = f.settings.migrationLimit;
  if (f.attempts - f.drained > limit) {
    return { message: `migration exhausted after ${f.attempts} attempts (limit ${limit})`, type: 'migration_exhausted', exhausted: true };
  }
  const maxSeq = f.settings.migrationMaxSeqLen;
  if (maxSeq !== null && f.sequence > maxSeq) {
    return { message: `migration stopped: prompt + replayed tokens exceed --migration-max-seq-len ${maxSeq}`, type: 'migration_max_seq_len', exhausted: false };
  }
  if (f.sawText && f.tokens > 0) {
    return { message: 'migration stopped: the worker returned text, which cannot be continued token-exactly', type: 'not_migratable', exhausted: false };
  }
  return null;
}
