// The pool's selector: which workers may take an attempt now (eligible, of the request's format,
// able to continue it exactly), and the policies that choose among them, with their caches of
// where prefixes went. One pass over the workers per pick, no copy of the registry.
import type { FormatName } from '../core/types.ts';
import { FORMATS, UNPROBED } from '../formats/registry.ts';
import type { Placement, Policy } from './policies/policy.ts';
import { PowerOfTwo } from './policies/power-of-two.ts';
import type { PageKeys } from './prefix-tree.ts';
import type { PrefixSink } from './prefix-share.ts';
import { speaks, type Worker } from './worker.ts';

export interface SelectorOptions {
  /** A continuation's placement sees its prompt + replayed tokens (false: placed by load alone). */
  continuationPlacement?: boolean;
  /**
   * Continuations are placed by two random choices over the workers' own load rather than by the
   * policy (but cache_aware's): replicas each continue their share of a dead worker's streams at
   * once, and each would send its burst to the survivor its own partial counts call least loaded
   * (docs/replicas.md "Herding"). The workers' load is then read even if the policy does not.
   */
  spreadContinuations?: boolean;
}

/**
 * What a continuation's worker must share with the attempts before it to continue exactly: the
 * model, the weights (RL clusters update weights while serving: tokens from two sets of weights
 * are not one answer), and token-only output (a worker that returns text cannot be stitched).
 */
export interface ContinuationPin {
  modelPath: string | null;
  weightVersion: string | null;
  /** The router writes the answer's text itself (it has the tokenizer): workers that return text are fine. */
  textOk?: boolean;
}

/** Why a worker cannot continue a request pinned to `pin`, or null when it can. */
export function pinMismatch(w: Worker, pin: ContinuationPin): string | null {
  if (w.tokenOnly === false && !pin.textOk) return `${w.url} returns text (not --skip-tokenizer-init) and the router has no tokenizer for it`;
  if (pin.modelPath !== null && w.modelPath !== null && w.modelPath !== pin.modelPath) return `${w.url} serves model ${w.modelPath}, not ${pin.modelPath}`;
  if (pin.weightVersion !== null && w.weightVersion !== null && w.weightVersion !== pin.weightVersion) {
    return `${w.url} serves weight_version ${w.weightVersion}, not ${pin.weightVersion}`;
  }
  return null;
}

/** The worker formats whose servers may be a P/D pair's prefill leg (WireFormat.prefillServers). */
const PREFILL_FORMATS: readonly FormatName[] = FORMATS.filter((f) => f.prefillServers === true).map((f) => f.workers);

export class WorkerSelector {
  private readonly spread = new PowerOfTwo();
  private readonly policy: Policy;
  private readonly makePolicy: (() => Policy) | null;
  private prefillPolicyOf: Policy | null = null;
  private prefixSink: PrefixSink | null = null;
  /** Given a prefill side's policy (P/D): its reading of the workers' load counts too. */
  private readonly pdSides: boolean;

  constructor(
    /** The registry's workers, read in place. */
    private readonly workers: ReadonlyMap<string, Worker>,
    private readonly opts: SelectorOptions,
    policy: Policy | (() => Policy),
    /** P/D: the prefill side's policy (`--prefill-policy`); null: another instance of `policy`'s factory. */
    prefillPolicy: (() => Policy) | null,
    /** Told at every pick that found a worker (spare upkeep wakes on traffic: spare-upkeep.ts). */
    private readonly traffic: { wake(): void },
  ) {
    // The prefill side has a policy of its own (P/D, docs/pd.md), as the gateway keeps a prefill
    // and a decode policy: one round-robin counter over both picks would pair the same two
    // workers every time, and one cache_aware tree would mix the two sides' prefixes.
    this.policy = typeof policy === 'function' ? policy() : policy;
    this.makePolicy = prefillPolicy ?? (typeof policy === 'function' ? policy : null);
    this.pdSides = prefillPolicy !== null;
  }

  /** The prefill side's policy: its own instance when the pool was given a factory. */
  private get prefillPolicy(): Policy {
    if (this.prefillPolicyOf === null) {
      this.prefillPolicyOf = this.makePolicy ? this.makePolicy() : this.policy;
      if (this.prefixSink !== null) this.prefillPolicyOf.share?.(this.prefixSink);
    }
    return this.prefillPolicyOf;
  }

  /** Whether placement reads the load workers report (the health part polls it only then). */
  get usesReportedLoad(): boolean {
    return !!(this.policy.usesReportedLoad || (this.pdSides && this.prefillPolicy.usesReportedLoad) || this.opts.spreadContinuations);
  }

  /**
   * Pick a worker for an attempt, never one in `exclude` nor one that may not take work now. A
   * continuation passes its `pin`: only workers that can continue it exactly qualify.
   */
  pick(exclude: ReadonlySet<string>, pin: ContinuationPin | null = null, format: FormatName = UNPROBED, placement: Placement | null = null): Worker | null {
    const now = Date.now();
    const candidates: Worker[] = [];
    for (const w of this.workers.values()) {
      // A prefill server never streams an answer: it is only ever a pair's first leg (pickPrefill).
      if (!exclude.has(w.id) && w.pdRole !== 'prefill' && speaks(w, format) && w.eligible(now) && (pin === null || pinMismatch(w, pin) === null)) candidates.push(w);
    }
    if (candidates.length === 0) return null;
    this.traffic.wake();
    // Without continuation placement a continuation is placed as a request with no tokens: by load.
    if (placement !== null && placement.replayed !== null && this.opts.continuationPlacement === false) {
      placement.prompt = [];
      placement.replayed = null;
    }
    if (this.opts.spreadContinuations && placement !== null && placement.replayed !== null && this.policy.name !== 'cache_aware') {
      placement.reason = 'spread';
      return this.spread.select(candidates);
    }
    return this.policy.select(candidates, placement);
  }

  /**
   * The prefill leg for a decode worker's attempt: an eligible prefill server of the same model
   * (and weights, once pinned), by the policy over the same placement (cache_aware places the
   * prompt where its prefix is cached: the prefill server is where the prompt is computed).
   */
  pickPrefill(exclude: ReadonlySet<string>, pin: ContinuationPin | null, placement: Placement | null): Worker | null {
    const now = Date.now();
    const candidates: Worker[] = [];
    for (const w of this.workers.values()) {
      if (!exclude.has(w.id) && w.pdRole === 'prefill' && PREFILL_FORMATS.includes(w.format ?? UNPROBED) && w.eligible(now) && (pin === null || pinMismatch(w, pin) === null)) candidates.push(w);
    }
    if (candidates.length === 0) return null;
    this.traffic.wake();
    return this.prefillPolicy.select(candidates, placement);
  }

  /** Whether pick() would find a worker, without asking the policy (which may count the pick). */
  canPick(exclude: ReadonlySet<string>, also: string, pin: ContinuationPin | null, format: FormatName = UNPROBED): boolean {
    const now = Date.now();
    for (const w of this.workers.values()) {
      if (w.id !== also && !exclude.has(w.id) && w.pdRole !== 'prefill' && speaks(w, format) && w.eligible(now) && (pin === null || pinMismatch(w, pin) === null)) return true;
    }
    return false;
  }

  /** Why no worker could take a continuation pinned to `pin` (for the client's error). */
  whyNoContinuation(exclude: ReadonlySet<string>, pin: ContinuationPin, format: FormatName = UNPROBED): string {
    const now = Date.now();
    const reasons: string[] = [];
    for (const w of this.workers.values()) {
      if (exclude.has(w.id) || !speaks(w, format) || w.pdRole === 'prefill') continue;
      if (!w.eligible(now)) {
        reasons.push(`${w.url} is ${w.health(now)}`);
        continue;
      }
      const m = pinMismatch(w, pin);
      if (m) reasons.push(m);
    }
    return reasons.length === 0 ? 'every worker already failed this request' : reasons.join('; ');
  }

  /** Every prefix the policies send to workers goes to `sink` too (replicas share them: prefix-share.ts). */
  sharePrefixes(sink: PrefixSink): void {
    this.prefixSink = sink;
    this.policy.share?.(sink);
    this.prefillPolicyOf?.share?.(sink);
  }

  /** Another replica sent `k`'s sequence to `w`: the policy that places on `w` (its side, under P/D) learns it. */
  learnPrefix(w: Worker, k: PageKeys): void {
    (w.pdRole === 'prefill' ? this.prefillPolicy : this.policy).learn?.(w, k);
  }

  /** A worker's cache is gone or unknown (flushed, dead, restarted): both sides forget it. `removed`: it left the pool, both sides drop it. */
  forgetCache(w: Worker, removed = false): void {
    const tell = (p: Policy) => (removed && p.remove ? p.remove(w) : p.forget?.(w));
    tell(this.policy);
    if (this.prefillPolicyOf !== null && this.prefillPolicyOf !== this.policy) tell(this.prefillPolicyOf);
  }
}
