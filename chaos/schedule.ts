// The fault schedule of a campaign: a pure function of the seed and the campaign's shape, so that
// `--seed X` replays the same faults at the same offsets against the same workers. What a fault
// hits still depends on the traffic in flight at that moment; the plan itself does not.

import { Rng } from './rng.ts';
import type { WireFormat } from './formats.ts';

/**
 * `error` is vLLM's own engine failure (a retryable request-level error: `finish_reason: "error"`,
 * an in-band error frame or a unary 500); only simulated vLLM workers serve it, so it is planned
 * only for them. Every other kind applies to workers of both formats.
 */
export type FaultKind = 'kill' | 'crash' | 'hang' | 'reset' | 'reject' | 'slow' | 'abort' | 'error';

export const FAULT_KINDS: readonly FaultKind[] = ['kill', 'crash', 'hang', 'reset', 'reject', 'slow', 'abort', 'error'];

export interface PlannedFault {
  /** Offset from the start of traffic, ms. */
  at: number;
  worker: number;
  kind: FaultKind;
  /**
   * kill / crash: how long the worker stays dead before it is restarted.
   * hang / reject / slow: how long the fault lasts before it is cleared.
   * reset / abort / crash: also how long a fault armed with afterTokens may wait for its tokens.
   */
  holdMs: number;
  /** Arm the fault to fire after this many more tokens of the worker (0: at once). */
  afterTokens: number;
  /** slow: the new pause between tokens. */
  intervalMs?: number;
}

export interface ScheduleOptions {
  seed: number;
  durationMs: number;
  workers: number;
  /** Mean faults per second over the faulting part of the campaign. */
  faultRate: number;
  /**
   * The router's inter-token timeout: a hang must outlast it (else nothing is detected), and
   * a slow worker must stay under it (slowness is not a stall, and must not be treated as one).
   */
  interTokenTimeoutMs: number;
  /**
   * The format of each worker (index as `worker`); absent: all SGLang, and the schedule is the one
   * SGLang campaigns always had. With vLLM workers, `error` joins the mix (planned on an SGLang
   * worker it becomes `abort`, that worker's in-band engine failure); with both formats, fewer
   * than all workers of each format are faulted at once (at most all but one, or the one).
   */
  formats?: readonly WireFormat[];
}

/** Mix of kinds: kills are what migration exists for, so they come most often. */
const WEIGHTS: Record<Exclude<FaultKind, 'error'>, number> = { kill: 3, crash: 2, hang: 2, reset: 2, reject: 1, slow: 1, abort: 1 };
const WEIGHTS_VLLM: Record<FaultKind, number> = { ...WEIGHTS, error: 1 };

/** Time a killed worker needs to come back and be seen healthy again, beyond its hold. */
const RECOVERY_MS = 3000;

export function planFaults(o: ScheduleOptions): PlannedFault[] {
  const rng = new Rng(o.seed, 0x5eed);
  const out: PlannedFault[] = [];
  if (o.faultRate <= 0 || o.workers < 1) return out;
  // A quiet start (the pool probes its workers) and a quiet end (every fault cleared and every
  // worker back before the final in-flight and memory checks).
  const first = Math.min(3000, o.durationMs * 0.1);
  const last = o.durationMs - Math.max(3000, o.durationMs * 0.1);
  // At most workers - 1 faulted at once, so a request can always find somewhere to go unless
  // the router itself gives up too early; with one worker, one fault at a time.
  const maxFaulted = Math.max(1, o.workers - 1);
  const busyUntil: number[] = new Array(o.workers).fill(0);
  const meanGapMs = 1000 / o.faultRate;
  const formats = o.formats;
  const withError = formats?.includes('vllm') ?? false;
  const groups = formats !== undefined && new Set(formats).size > 1;
  const sizeOf = (f: WireFormat) => formats!.filter((g) => g === f).length;
  for (let t = first + rng.exponential(meanGapMs); t < last; t += rng.exponential(meanGapMs)) {
    const at = Math.round(t);
    let free = busyUntil.map((until, i) => (until <= at ? i : -1)).filter((i) => i >= 0);
    if (o.workers - free.length >= maxFaulted || free.length === 0) continue;
    if (groups) {
      // Keep a worker of each format free, as the global rule keeps one worker free.
      free = free.filter((i) => {
        const f = formats[i]!;
        const busy = busyUntil.filter((until, j) => formats[j] === f && until > at).length;
        return busy < Math.max(1, sizeOf(f) - 1);
      });
      if (free.length === 0) continue;
    }
    const worker = rng.pick(free);
    let kind: FaultKind = withError ? rng.weighted(WEIGHTS_VLLM) : rng.weighted(WEIGHTS);
    if (kind === 'error' && formats?.[worker] !== 'vllm') kind = 'abort';
    const f = shape(rng, kind, o.interTokenTimeoutMs);
    out.push({ at, worker, ...f });
    busyUntil[worker] = at + f.holdMs + RECOVERY_MS;
  }
  return out;
}

function shape(rng: Rng, kind: FaultKind, stallMs: number): Omit<PlannedFault, 'at' | 'worker'> {
  switch (kind) {
    case 'kill':
      return { kind, holdMs: rng.int(300, 2000), afterTokens: 0 };
    case 'crash':
      // The worker kills itself right after the frame carrying its N-th token has gone out.
      return { kind, holdMs: rng.int(300, 1500), afterTokens: rng.int(1, 40) };
    case 'hang':
      return { kind, holdMs: rng.int(Math.round(stallMs * 1.5), Math.round(stallMs * 4)), afterTokens: rng.int(0, 30) };
    case 'reset':
    case 'abort':
    case 'error':
      return { kind, holdMs: 1500, afterTokens: rng.int(0, 30) };
    case 'reject':
      return { kind, holdMs: rng.int(500, 3000), afterTokens: 0 };
    case 'slow':
      return { kind, holdMs: rng.int(1000, 4000), afterTokens: 0, intervalMs: rng.int(20, Math.max(21, Math.round(stallMs * 0.3))) };
  }
}
