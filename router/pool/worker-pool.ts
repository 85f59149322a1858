// The worker pool: its parts composed, and every caller's one handle on them. The parts are
//   registry.ts      which workers exist (add, adopt, remove, list)
//   health.ts        health checks, probes, load reports, blame, circuit breakers, evidence
//   selector.ts      which eligible worker takes an attempt (the policies and their caches)
//   facts.ts         what the workers advertise and enforce (sampling defaults, limits, weights)
//   spare-upkeep.ts  spare connections for continuations, sized to the load
// None imports another: they reach each other only through the hooks wired here. A caller that
// needs one part may take it (`pool.selector`, `pool.health`, ...); the methods below keep the
// pool's own API.
import type { WorkerInfo } from '../events/types.ts';
import type { FormatName } from '../core/types.ts';
import type { Verdict } from '../core/failure.ts';
import type { ErrorKind } from '../trace/row.ts';
import type { CircuitOptions } from './circuit-breaker.ts';
import type { WaitingEvidence } from './evidence.ts';
import type { Placement, Policy } from './policies/policy.ts';
import type { PageKeys } from './prefix-tree.ts';
import type { Worker } from './worker.ts';
import { WorkerRegistry } from './registry.ts';
import { PoolHealth } from './health.ts';
import { WorkerSelector, type ContinuationPin } from './selector.ts';
import { WorkerFacts, type SamplingDefaults } from './facts.ts';
import { SpareUpkeep } from './spare-upkeep.ts';

export { normalizeWorkerUrl, reportedModels } from './registry.ts';
export { pinMismatch, type ContinuationPin } from './selector.ts';
export type { SamplingDefaults } from './facts.ts';

export interface PoolOptions {
  circuit: CircuitOptions;
  connectTimeoutMs: number;
  healthIntervalMs: number;
  healthTimeoutMs: number;
  /** Consecutive failed health checks before a worker is taken out. */
  healthFailureThreshold: number;
  benchMs: number;
  /** Most spare connections per worker for continuations (spares.ts); 0 = off. */
  spareConnections: number;
  /** How often the workers' own load is read, when the policy uses it; 0 = off. */
  loadIntervalMs?: number;
  /** A continuation's placement sees its prompt + replayed tokens (false: placed by load alone). */
  continuationPlacement?: boolean;
  /** Continuations are spread by the workers' own load (replicas: selector.ts SelectorOptions). */
  spreadContinuations?: boolean;
}

export class WorkerPool {
  readonly registry: WorkerRegistry;
  readonly health: PoolHealth;
  readonly selector: WorkerSelector;
  readonly facts: WorkerFacts;
  readonly spareUpkeep: SpareUpkeep;

  constructor(
    opts: PoolOptions,
    policy: Policy | (() => Policy),
    onChange: (w: Worker) => void,
    /** `last`: the worker as it was when removed (its discovery tag says why it went). */
    onRemove: (id: string, last: WorkerInfo) => void,
    /** P/D: the prefill side's policy (`--prefill-policy`); null: another instance of `policy`'s factory. */
    prefillPolicy: (() => Policy) | null = null,
  ) {
    this.registry = new WorkerRegistry(opts, {
      changed: onChange,
      removed: onRemove,
      check: (w) => this.health.refresh(w),
      membershipChanged: (left) => {
        this.facts.stale();
        if (left === null) return;
        this.health.forget(left.id);
        this.selector.forgetCache(left, true);
      },
    });
    const workers = this.registry.workers;
    this.facts = new WorkerFacts(workers, onChange);
    this.spareUpkeep = new SpareUpkeep(workers, opts.spareConnections);
    this.selector = new WorkerSelector(workers, opts, policy, prefillPolicy, this.spareUpkeep);
    this.health = new PoolHealth(opts, workers, {
      changed: onChange,
      probed: (w, format, probe) => this.facts.probed(w, format, probe),
      cacheLost: (w) => this.selector.forgetCache(w),
      recovered: (w) => this.spareUpkeep.recovered(w),
    });
  }

  start(): void {
    this.spareUpkeep.start();
    this.health.start(this.selector.usesReportedLoad);
  }

  async close(): Promise<void> {
    this.health.stop();
    this.spareUpkeep.stop();
    await this.registry.close();
  }

  // The registry (registry.ts).
  list(): Worker[] {
    return this.registry.list();
  }

  get(id: string): Worker | undefined {
    return this.registry.get(id);
  }

  byUrl(url: string): Worker | undefined {
    return this.registry.byUrl(url);
  }

  infos(): WorkerInfo[] {
    return this.registry.infos();
  }

  add(url: string, opts: { simulated?: boolean; simIndex?: number } = {}): Promise<Worker> {
    return this.registry.add(url, opts);
  }

  adopt(url: string, prepare?: (w: Worker) => void): { worker: Worker; added: boolean } {
    return this.registry.adopt(url, prepare);
  }

  addConfigured(workers: readonly string[], prefill: readonly string[], decode: readonly string[]): Promise<void> {
    return this.registry.addConfigured(workers, prefill, decode);
  }

  addWithRole(spec: string, role: 'prefill' | 'decode'): Promise<Worker> {
    return this.registry.addWithRole(spec, role);
  }

  remove(id: string): boolean {
    return this.registry.remove(id);
  }

  setDraining(id: string, draining: boolean): boolean {
    return this.registry.setDraining(id, draining);
  }

  // The selector (selector.ts): the per-request path.
  pick(exclude: ReadonlySet<string>, pin: ContinuationPin | null = null, format?: FormatName, placement: Placement | null = null): Worker | null {
    return this.selector.pick(exclude, pin, format, placement);
  }

  pickPrefill(exclude: ReadonlySet<string>, pin: ContinuationPin | null, placement: Placement | null): Worker | null {
    return this.selector.pickPrefill(exclude, pin, placement);
  }

  canPick(exclude: ReadonlySet<string>, also: string, pin: ContinuationPin | null, format?: FormatName): boolean {
    return this.selector.canPick(exclude, also, pin, format);
  }

  whyNoContinuation(exclude: ReadonlySet<string>, pin: ContinuationPin, format?: FormatName): string {
    return this.selector.whyNoContinuation(exclude, pin, format);
  }

  learnPrefix(w: Worker, k: PageKeys): void {
    this.selector.learnPrefix(w, k);
  }

  /** The worker answered /flush_cache: its prefix cache is empty. */
  cacheFlushed(w: Worker): void {
    this.selector.forgetCache(w);
  }

  // Health (health.ts).
  blame(w: Worker, connectFailed: boolean, kind: ErrorKind | null = null, requestTokens = 0): void {
    this.health.blame(w, connectFailed, kind, requestTokens);
  }

  credit(w: Worker): void {
    this.health.credit(w);
  }

  evidenceAgainst(w: Worker, attemptStartedAt: number): Promise<Verdict> {
    return this.health.evidenceAgainst(w, attemptStartedAt);
  }

  waitingEvidence(w: Worker): Promise<WaitingEvidence> {
    return this.health.waitingEvidence(w);
  }

  // Facts (facts.ts).
  samplingDefaults(format?: FormatName): SamplingDefaults {
    return this.facts.samplingDefaults(format);
  }

  maxReqLen(format?: FormatName): number | null {
    return this.facts.maxReqLen(format);
  }

  noteWeightVersion(w: Worker, version: string): void {
    this.facts.noteWeightVersion(w, version);
  }

  noteCached(w: Worker, promptTokens: number, cachedTokens: number | null): void {
    this.facts.noteCached(w, promptTokens, cachedTokens);
  }

  // Spare connections (spare-upkeep.ts).
  maintainSpares(now = Date.now()): boolean {
    return this.spareUpkeep.maintain(now);
  }

  /** Whether spare upkeep is ticking (false on an idle router). */
  get sparesTicking(): boolean {
    return this.spareUpkeep.ticking;
  }
}
