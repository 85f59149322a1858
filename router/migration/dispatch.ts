// How one attempt reaches its workers. The loop asks for an attempt at a placement and gets a
// `Dispatch`: one worker (dispatch-single.ts), or a prefill/decode pair (dispatch-pd.ts: the room,
// both legs, the prefill's answer before the decode's frames, which leg a failure was). The loop
// sees only the worker whose stream the client reads; whatever else an attempt needs to reach it
// (and to be let go of) lives behind this seam, which is where holding an attempt while the fleet
// pauses, or a planned move, plugs in too.
import type { FormatName } from '../core/types.ts';
import type { UpstreamCall } from '../upstream/attempt.ts';
import type { StallWatch } from '../upstream/stall-watch.ts';
import type { ContinuationPin, WorkerPool } from '../pool/worker-pool.ts';
import type { Placement } from '../pool/policies/policy.ts';
import type { Worker } from '../pool/worker.ts';
import type { Failure } from '../core/failure.ts';
import type { AttemptRowIn } from '../telemetry.ts';
import type { AttemptState } from './attempt-state.ts';
import { SingleDispatch } from './dispatch-single.ts';
import { PdDispatch } from './dispatch-pd.ts';

/** The workers a request's failures left out of its next placements. */
export interface LeftOut {
  /** Workers that stream answers (aggregated ones, decode workers). */
  readonly workers: Set<string>;
  /** P/D: prefill servers whose leg failed this request (their decode partners stay eligible). */
  readonly prefill: Set<string>;
}

/** The P/D fields of an attempt row. */
export type PairRowFacts = Pick<AttemptRowIn, 'prefill_worker' | 'decode_worker' | 'bootstrap_room' | 'prefill_ended_at' | 'failed_leg'>;

/** One attempt's way to its workers, made for one attempt, bound to it once and ended once. */
export interface Dispatch {
  readonly kind: 'single' | 'pd';
  /** The worker whose stream the client reads (a pair's decode worker). */
  readonly worker: Worker;
  /** A pair's prefill server (the attempt's body asks for its leg); null: none. */
  readonly prefill: Worker | null;
  /**
   * The attempt it serves and the body its worker gets, returned as every worker of the dispatch
   * gets it (a pair: with the bootstrap fields of a fresh room).
   */
  bind(a: AttemptState, body: string | Buffer, path: string): string | Buffer;
  /** The upstream call to `worker` (a pair may hold its frames until the prefill leg answers). */
  open(path: string, body: string | Buffer, stalls: StallWatch): UpstreamCall;
  /** The attempt goes out now (`headers`: its trace context): so does whatever else it needs. */
  started(continuation: boolean, headers: Record<string, string> | null): void;
  /** The attempt's first frame came. */
  firstFrame(): void;
  /** The attempt's call ended (or the loop gave up on it): let go of whatever else it held. */
  end(): void;
  /** An attempt's failure as the loop judges it (a pair: attributed to a leg first). */
  attribute(failure: Failure, hadFrame: boolean): Failure;
  /**
   * Leave what failed out of the request's next placements: the worker, or a pair's prefill
   * server when its leg failed (benched here too when it failed, not when it was only slow; the
   * decode worker then stays eligible). The loop has judged the worker's blame before.
   */
  leaveOut(failure: Failure, out: LeftOut, pool: WorkerPool): void;
  /** The P/D fields of its attempt row; null: none. */
  rowFacts(): PairRowFacts | null;
}

/** No attempt can be placed now. `pairFor`: a decode worker no prefill server could join; null: no worker at all. */
export interface Unplaced {
  readonly kind: 'unplaced';
  readonly pairFor: Worker | null;
}

const NO_WORKER: Unplaced = Object.freeze({ kind: 'unplaced', pairFor: null });

export interface DispatchSettings {
  /** P/D: the decode leg's first token must come within this long (docs/pd.md); 0 or absent: off. */
  pdFirstTokenTimeoutMs?: number;
}

/**
 * An attempt at `placement`: a worker of the format by the policy, and for a decode worker its
 * prefill leg by the prefill policy, on the same placement.
 */
export function placeAttempt(pool: WorkerPool, out: LeftOut, pin: ContinuationPin | null, format: FormatName, placement: Placement, settings: DispatchSettings): Dispatch | Unplaced {
  const worker = pool.pick(out.workers, pin, format, placement);
  if (worker === null) return NO_WORKER;
  if (worker.pdRole !== 'decode') return new SingleDispatch(worker);
  const prefill = pool.pickPrefill(out.prefill, pin, placement);
  if (prefill === null) return { kind: 'unplaced', pairFor: worker };
  return new PdDispatch(worker, prefill, pool, settings.pdFirstTokenTimeoutMs ?? 0);
}

/** Why no attempt could be placed, for the client; `lastFailure`: the failure it would have continued after. */
export function unplacedMessage(u: Unplaced, lastFailure: Failure | null, pool: WorkerPool, out: LeftOut, pin: ContinuationPin | null, format: FormatName): string {
  if (u.pairFor !== null) return `no prefill server available for a pair with decode ${u.pairFor.url}${lastFailure ? ` after: ${lastFailure.message}` : ''}`;
  if (lastFailure === null) return `no healthy worker serves format ${format}`;
  return `no worker left that can continue this request exactly after: ${lastFailure.message} (${pool.whyNoContinuation(out.workers, pin ?? { modelPath: null, weightVersion: null }, format)})`;
}

/**
 * The worker for a request served whole (batches, n > 1, unparsed bodies: pass-through.ts). A
 * decode server serves only a request with its bootstrap room, which Baton gives to the single
 * requests it pairs: these go to an aggregated worker or nowhere. `pdOnly`: none was found and
 * the pool has decode servers (the request is refused as one P/D cannot serve).
 */
export function placeWhole(pool: WorkerPool, format: FormatName): { worker: Worker | null; pdOnly: boolean } {
  const decodes = new Set(pool.list().filter((w) => w.pdRole === 'decode').map((w) => w.id));
  const worker = pool.pick(decodes, null, format);
  return { worker, pdOnly: worker === null && decodes.size > 0 };
}
