// The worker pool: which workers exist, which may take an attempt now, and the periodic health
// checks and probes that keep that knowledge fresh. Policies only choose among the eligible.
import type { WorkerInfo } from '../events/types.ts';
import type { SpareStats } from '../metrics.ts';
import type { CircuitOptions } from './circuit-breaker.ts';
import type { Placement, Policy } from './policies/policy.ts';
import { readLoad } from './load.ts';
import { checkHealth } from '../core/probe.ts';
import { TokenedFailures, probeHealth, probeLoad } from './evidence.ts';
import type { WaitingEvidence } from './evidence.ts';
import { judge, type Verdict } from '../core/failure.ts';
import type { ErrorKind } from '../trace/row.ts';
import type { FormatName, ProbeResult } from '../core/types.ts';
import { FORMATS } from '../formats/registry.ts';
import { Worker } from './worker.ts';
import { PowerOfTwo } from './policies/power-of-two.ts';
import { normalizeWorkerUrl } from '../worker-url.ts';
import type { PageKeys } from './prefix-tree.ts';
import type { PrefixSink } from './prefix-share.ts';

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
  /**
   * Continuations are placed by two random choices over the workers' own load rather than by the
   * policy (but cache_aware's): replicas each continue their share of a dead worker's streams at
   * once, and each would send its burst to the survivor its own partial counts call least loaded
   * (docs/replicas.md "Herding"). The workers' load is then read even if the policy does not.
   */
  spreadContinuations?: boolean;
}

/**
 * How often spare connections are resized to the load and renewed, while there is traffic or a
 * spare to age out (WorkerPool.wakeSpares).
 */
const SPARE_INTERVAL_MS = 100;

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

/** Worker-advertised sampling defaults, as admission sees them (see samplingDefaults). */
export interface SamplingDefaults {
  /** Keys every probed worker advertises with the same value. */
  agreed: Readonly<Record<string, unknown>>;
  /** Keys some probed worker advertises and others advertise differently or not at all. */
  disputed: ReadonlySet<string>;
}

const NO_DEFAULTS: SamplingDefaults = Object.freeze({ agreed: Object.freeze({}), disputed: new Set<string>() });

export class WorkerPool {
  private readonly workers = new Map<string, Worker>();
  private nextId = 0;
  private timer: NodeJS.Timeout | null = null;
  private spareTimer: NodeJS.Timeout | null = null;
  /** Between start() and close(): spare upkeep may run. */
  private sparesOn = false;
  private loadTimer: NodeJS.Timeout | null = null;
  private readingLoads = false;
  private checking = false;
  /** samplingDefaults() per format, recomputed only when a probe changed what workers advertise. */
  private defaultsCache = new Map<FormatName, SamplingDefaults>();
  /** Failures of requests that had tokens: evidence for failures that need it. */
  private readonly tokenedFailures = new TokenedFailures();
  private readonly spread = new PowerOfTwo();

  constructor(
    private readonly opts: PoolOptions,
    policy: Policy | (() => Policy),
    private readonly onChange: (w: Worker) => void,
    /** `last`: the worker as it was when removed (its discovery tag says why it went). */
    private readonly onRemove: (id: string, last: WorkerInfo) => void,
    /** P/D: the prefill side's policy (`--prefill-policy`); null: another instance of `policy`'s factory. */
    prefillPolicy: (() => Policy) | null = null,
  ) {
    // The prefill side has a policy of its own (P/D, docs/pd.md), as the gateway keeps a prefill
    // and a decode policy: one round-robin counter over both picks would pair the same two
    // workers every time, and one cache_aware tree would mix the two sides' prefixes.
    this.policy = typeof policy === 'function' ? policy() : policy;
    this.makePolicy = prefillPolicy ?? (typeof policy === 'function' ? policy : null);
    this.pdSides = prefillPolicy !== null;
  }

  /** Given a prefill side's policy (P/D): its reading of the workers' load counts too. */
  private readonly pdSides: boolean;

  private readonly policy: Policy;
  private readonly makePolicy: (() => Policy) | null;
  private prefillPolicyOf: Policy | null = null;
  private prefixSink: PrefixSink | null = null;

  /** The prefill side's policy: its own instance when the pool was given a factory. */
  private get prefillPolicy(): Policy {
    if (this.prefillPolicyOf === null) {
      this.prefillPolicyOf = this.makePolicy ? this.makePolicy() : this.policy;
      if (this.prefixSink !== null) this.prefillPolicyOf.share?.(this.prefixSink);
    }
    return this.prefillPolicyOf;
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

  /** A worker's cache is gone or unknown: both sides forget it. `removed`: it left the pool, both sides drop it. */
  private forgetCache(w: Worker, removed = false): void {
    const tell = (p: Policy) => (removed && p.remove ? p.remove(w) : p.forget?.(w));
    tell(this.policy);
    if (this.prefillPolicyOf !== null && this.prefillPolicyOf !== this.policy) tell(this.prefillPolicyOf);
  }

  list(): Worker[] {
    return [...this.workers.values()];
  }

  get(id: string): Worker | undefined {
    return this.workers.get(id);
  }

  byUrl(url: string): Worker | undefined {
    for (const w of this.workers.values()) if (w.url === url) return w;
    return undefined;
  }

  async add(url: string, opts: { simulated?: boolean; simIndex?: number } = {}): Promise<Worker> {
    const normalized = normalizeWorkerUrl(url);
    const existing = this.byUrl(normalized);
    if (existing) return existing;
    const w = this.insert(normalized, opts);
    await this.refresh(w);
    return w;
  }

  /**
   * Add a worker now and check it in the background (discovery adds workers from a source's
   * callbacks, which do not wait). The existing worker when one has the URL: the caller decides
   * whether it is its own (router/discovery/reconciler.ts never touches one added by hand).
   */
  adopt(url: string, prepare?: (w: Worker) => void): { worker: Worker; added: boolean } {
    const normalized = normalizeWorkerUrl(url);
    const existing = this.byUrl(normalized);
    if (existing) return { worker: existing, added: false };
    const w = this.insert(normalized, {});
    prepare?.(w);
    this.onChange(w);
    void this.refresh(w).catch(() => undefined);
    return { worker: w, added: true };
  }

  private insert(normalized: string, opts: { simulated?: boolean; simIndex?: number }): Worker {
    const w = new Worker(`w${this.nextId++}`, normalized, this.opts.circuit, this.opts.connectTimeoutMs, opts.simulated ?? false, opts.simIndex ?? null, this.opts.spareConnections);
    this.workers.set(w.id, w);
    this.defaultsCache.clear();
    return w;
  }

  remove(id: string): boolean {
    const w = this.workers.get(id);
    if (!w) return false;
    this.workers.delete(id);
    this.defaultsCache.clear();
    this.tokenedFailures.forget(id);
    this.forgetCache(w, true);
    // In-flight attempts keep their connections until they end; close() waits for them.
    void w.close().catch(() => undefined);
    this.onRemove(id, w.info());
    return true;
  }

  setDraining(id: string, draining: boolean): boolean {
    const w = this.workers.get(id);
    if (!w) return false;
    w.draining = draining;
    this.onChange(w);
    return true;
  }

  /**
   * Pick a worker for an attempt, never one in `exclude` nor one that may not take work now. A
   * continuation passes its `pin`: only workers that can continue it exactly qualify.
   */
  pick(exclude: ReadonlySet<string>, pin: ContinuationPin | null = null, format: FormatName = 'sglang', placement: Placement | null = null): Worker | null {
    const now = Date.now();
    const candidates: Worker[] = [];
    for (const w of this.workers.values()) {
      // A prefill server never streams an answer: it is only ever a pair's first leg (pickPrefill).
      if (!exclude.has(w.id) && w.pdRole !== 'prefill' && speaks(w, format) && w.eligible(now) && (pin === null || pinMismatch(w, pin) === null)) candidates.push(w);
    }
    if (candidates.length === 0) return null;
    if (this.spareTimer === null) this.wakeSpares();
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
      if (!exclude.has(w.id) && w.pdRole === 'prefill' && speaks(w, 'sglang') && w.eligible(now) && (pin === null || pinMismatch(w, pin) === null)) candidates.push(w);
    }
    if (candidates.length === 0) return null;
    if (this.spareTimer === null) this.wakeSpares();
    return this.prefillPolicy.select(candidates, placement);
  }

  /** The workers of the command line: aggregated, prefill (`URL [PORT]`), decode. */
  async addConfigured(workers: readonly string[], prefill: readonly string[], decode: readonly string[]): Promise<void> {
    for (const w of workers) await this.add(w);
    for (const p of prefill) await this.addWithRole(p, 'prefill');
    for (const d of decode) await this.addWithRole(d, 'decode');
  }

  /** Add a worker with a declared P/D role (--prefill URL [PORT], --decode URL). */
  async addWithRole(spec: string, role: 'prefill' | 'decode'): Promise<Worker> {
    const [url, port] = spec.trim().split(/\s+/);
    const bootstrapPort = port === undefined ? null : Number(port);
    if (bootstrapPort !== null && !(Number.isInteger(bootstrapPort) && bootstrapPort >= 1 && bootstrapPort <= 65535)) throw new Error(`--prefill ${spec}: the bootstrap port must be 1-65535`);
    const normalized = normalizeWorkerUrl(url!);
    const w = this.byUrl(normalized) ?? this.insert(normalized, {});
    w.declaredRole = role;
    w.pdRole = role;
    w.declaredBootstrapPort = bootstrapPort;
    w.bootstrapPort = bootstrapPort ?? w.bootstrapPort;
    await this.refresh(w);
    return w;
  }

  /** The worker answered /flush_cache: its prefix cache is empty. */
  cacheFlushed(w: Worker): void {
    this.forgetCache(w);
  }

  /** An attempt on `w` ended: count its prompt and cached tokens (the Workers view's hit rate). */
  noteCached(w: Worker, promptTokens: number, cachedTokens: number | null): void {
    if (cachedTokens === null || promptTokens <= 0) return;
    w.promptTokens += promptTokens;
    w.cachedTokens += Math.min(cachedTokens, promptTokens);
  }

  /** Read every worker's own load (SGLang /get_load, vLLM /metrics); one round at a time. */
  async readLoads(): Promise<void> {
    if (this.readingLoads) return;
    this.readingLoads = true;
    try {
      const timeout = Math.min(this.opts.healthTimeoutMs, 1000);
      await Promise.all(this.list().map(async (w) => {
        if (!w.probed || w.dead || !w.healthy) return;
        w.reportedLoad = await readLoad(w.pool, w.format ?? 'sglang', timeout);
      }));
    } finally {
      this.readingLoads = false;
    }
  }

  /** Whether pick() would find a worker, without asking the policy (which may count the pick). */
  canPick(exclude: ReadonlySet<string>, also: string, pin: ContinuationPin | null, format: FormatName = 'sglang'): boolean {
    const now = Date.now();
    for (const w of this.workers.values()) {
      if (w.id !== also && !exclude.has(w.id) && w.pdRole !== 'prefill' && speaks(w, format) && w.eligible(now) && (pin === null || pinMismatch(w, pin) === null)) return true;
    }
    return false;
  }

  /** Why no worker could take a continuation pinned to `pin` (for the client's error). */
  whyNoContinuation(exclude: ReadonlySet<string>, pin: ContinuationPin, format: FormatName = 'sglang'): string {
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

  /**
   * The sampling defaults workers advertise (preferred_sampling_params), which SGLang merges under
   * each request's own. Admission treats an agreed default as if the client had sent it; a
   * default the workers disagree on makes whatever it governs unresolved.
   */
  samplingDefaults(format: FormatName = 'sglang'): SamplingDefaults {
    const cached = this.defaultsCache.get(format);
    if (cached) return cached;
    const probed = this.list().filter((w) => w.probed && speaks(w, format));
    let result = NO_DEFAULTS;
    if (probed.some((w) => w.preferred !== null)) {
      const keys = new Set<string>();
      for (const w of probed) for (const k of Object.keys(w.preferred ?? {})) keys.add(k);
      const agreed: Record<string, unknown> = {};
      const disputed = new Set<string>();
      for (const k of keys) {
        const values = probed.map((w) => (w.preferred && k in w.preferred ? JSON.stringify(w.preferred[k]) : undefined));
        if (values.every((v) => v !== undefined && v === values[0])) agreed[k] = probed[0]!.preferred![k];
        else disputed.add(k);
      }
      result = { agreed, disputed };
    }
    this.defaultsCache.set(format, result);
    return result;
  }

  /** The smallest scheduler bound on prompt + output among probed workers (null: none advertised). */
  maxReqLen(format: FormatName = 'sglang'): number | null {
    let min: number | null = null;
    for (const w of this.workers.values()) {
      const m = w.probed && speaks(w, format) ? w.maxReqLen() : null;
      if (m !== null && (min === null || m < min)) min = m;
    }
    return min;
  }

  /** An attempt's meta_info named the weights it ran on: the worker now serves those. */
  noteWeightVersion(w: Worker, version: string): void {
    if (w.weightVersion === version) return;
    w.weightVersion = version;
    this.onChange(w);
  }

  /**
   * An attempt on `w` failed in a way that blames the worker: bench it, feed its breaker.
   * `requestTokens`: output tokens the request had; a failure with tokens is evidence for others
   * (evidenceAgainst).
   */
  blame(w: Worker, connectFailed: boolean, kind: ErrorKind | null = null, requestTokens = 0): void {
    if (kind !== null) this.tokenedFailures.note(w.id, kind, requestTokens);
    w.benchedUntil = Date.now() + this.opts.benchMs;
    w.circuit.recordFailure();
    // A refused connection is strong evidence: take the worker out until a health check answers.
    // Its process is likely gone, and its prefix cache with it.
    if (connectFailed) {
      w.dead = true;
      w.reportedLoad = null;
      this.forgetCache(w);
    }
    this.onChange(w);
  }

  /**
   * Whether a failure on `w` that needs evidence (core/failure.ts needsEvidence) is the
   * worker's: a stream with tokens that failed on it since the attempt started, else a health
   * probe run now on a connection of its own. Only the router's own probe and failures of
   * requests that had tokens count, never what requests without tokens did.
   */
  async evidenceAgainst(w: Worker, attemptStartedAt: number): Promise<Verdict> {
    const seen = this.tokenedFailures.since(w.id, attemptStartedAt);
    if (seen) return judge({ probe: null, corroboration: seen });
    const probe = await probeHealth(w.url, Math.min(this.opts.healthTimeoutMs, 2000));
    // The streams of a dying worker may break while the probe runs.
    return judge({ probe, corroboration: this.tokenedFailures.since(w.id, attemptStartedAt) });
  }

  /**
   * What tells a prefill server working through a queue from a faulty one, for a P/D leg still
   * waiting at its deadline (migration/pd.ts judgeWaiting): the router's own health checks, else
   * a health probe and a load report read now, each on a connection of its own and bounded by the
   * health timeout, as the health checks are.
   */
  async waitingEvidence(w: Worker): Promise<WaitingEvidence> {
    if (w.dead || !w.healthy) return { outOfService: w.dead ? 'dead' : 'unhealthy', probe: null, load: null };
    // The legs queued on one server pass their deadlines together: one reading serves them all.
    let reading = this.waitingReads.get(w.id);
    if (reading === undefined) {
      const t = this.opts.healthTimeoutMs;
      reading = Promise.all([probeHealth(w.url, t), probeLoad(w.url, t)]).then(([probe, load]) => ({ outOfService: null, probe, load }));
      this.waitingReads.set(w.id, reading);
      void reading.finally(() => this.waitingReads.delete(w.id));
    }
    return reading;
  }

  /** waitingEvidence readings under way, by worker. */
  private readonly waitingReads = new Map<string, Promise<WaitingEvidence>>();

  credit(w: Worker): void {
    const before = w.circuit.state();
    w.circuit.recordSuccess();
    if (w.circuit.state() !== before) this.onChange(w);
  }

  start(): void {
    this.sparesOn = this.opts.spareConnections > 0;
    this.wakeSpares();
    const loadMs = this.opts.loadIntervalMs ?? 0;
    if ((this.policy.usesReportedLoad || (this.pdSides && this.prefillPolicy.usesReportedLoad) || this.opts.spreadContinuations) && loadMs > 0 && !this.loadTimer) {
      this.loadTimer = setInterval(() => void this.readLoads(), loadMs);
      this.loadTimer.unref();
    }
    if (this.timer || this.opts.healthIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.checkAll(), this.opts.healthIntervalMs);
    this.timer.unref();
  }

  /**
   * Spare upkeep ticks while there is traffic or a spare left to age out. On an idle router a
   * tick finds neither and does nothing, yet wakes the process 10 times a second, in every
   * replica: the tick that finds nothing stops the timer, and the next pick (a request about to
   * start an attempt, before its worker's in-flight count moves) starts it again, so the first
   * tick of a burst comes within SPARE_INTERVAL_MS of it, as it did from a timer that never stopped.
   */
  private wakeSpares(): void {
    if (!this.sparesOn || this.spareTimer !== null) return;
    this.spareTimer = setInterval(() => {
      if (!this.maintainSpares() && this.spareTimer !== null) {
        clearInterval(this.spareTimer);
        this.spareTimer = null;
      }
    }, SPARE_INTERVAL_MS);
    this.spareTimer.unref();
  }

  /** Whether spare upkeep is ticking (false on an idle router: wakeSpares). */
  get sparesTicking(): boolean {
    return this.spareTimer !== null;
  }

  /**
   * Size each worker's spares for the burst it would take if the busiest other worker died now:
   * all of that worker's streams, plus one (the policy may send every continuation to the least
   * loaded survivor, often a worker that has just come back). No traffic, no new spares.
   * Returns whether a later tick has anything to do: a stream in flight, or a spare kept.
   */
  maintainSpares(now = Date.now()): boolean {
    let busiest = 0;
    let second = 0;
    let kept = false;
    for (const w of this.workers.values()) {
      if (w.inFlight >= busiest) {
        second = busiest;
        busiest = w.inFlight;
      } else if (w.inFlight > second) second = w.inFlight;
    }
    for (const w of this.workers.values()) {
      if (!w.spares) continue;
      const other = w.inFlight === busiest ? second : busiest;
      const eligible = w.eligible(now);
      w.spares.target = other === 0 || !eligible ? 0 : Math.min(this.opts.spareConnections, other + 1);
      // A worker out of service loses its spares now; without traffic they age out (spares.ts).
      w.spares.maintain(now, !eligible);
      if (w.spares.size > 0) kept = true;
    }
    return busiest > 0 || kept;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.sparesOn = false;
    if (this.spareTimer) clearInterval(this.spareTimer);
    if (this.loadTimer) clearInterval(this.loadTimer);
    this.loadTimer = null;
    this.timer = null;
    this.spareTimer = null;
    await Promise.all(this.list().map((w) => w.destroy().catch(() => undefined)));
    this.workers.clear();
  }

  /** Told after each health round, when every worker has been checked (and probed if it answered). */
  afterCheck: (() => void) | null = null;

  async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(this.list().map((w) => this.refresh(w)));
    } finally {
      this.checking = false;
    }
    this.afterCheck?.();
  }

  /** Health-check one worker, and (re)probe it when it is new or comes back. */
  private async refresh(w: Worker): Promise<void> {
    const before = w.info();
    const ok = await checkHealth(w.pool, this.opts.healthTimeoutMs);
    if (!this.workers.has(w.id)) return;
    if (ok) {
      w.healthFailures = 0;
      // Re-probed at every check, not only when new: weights are updated while serving.
      const found = await probeFormats(w, this.opts.healthTimeoutMs);
      if (found && this.workers.has(w.id)) {
        const probe = found.probe;
        if (JSON.stringify(probe.preferred) !== JSON.stringify(w.preferred) || !w.probed || w.format !== found.format) this.defaultsCache.clear();
        // A probe that could not tell the abort path keeps what an earlier one of the format found.
        if (probe.abortPath !== undefined || w.format !== found.format) w.abortPath = probe.abortPath;
        w.format = found.format;
        w.tokenOnly = probe.tokenOnly;
        w.incremental = probe.incremental;
        w.defaultMaxNewTokens = probe.defaultMaxNewTokens;
        w.preferred = probe.preferred;
        w.modelPath = probe.modelPath;
        w.weightVersion = probe.weightVersion;
        w.contextLength = probe.contextLength;
        w.maxTotalTokens = probe.maxTotalTokens;
        w.pageSize = probe.pageSize ?? null;
        w.streamInterval = probe.streamInterval ?? null;
        w.pdRole = w.declaredRole ?? probe.disaggregationMode ?? null;
        w.bootstrapPort = w.declaredBootstrapPort ?? probe.bootstrapPort ?? null;
        w.probed = true;
      }
      w.healthy = true;
      w.dead = false;
    } else if (++w.healthFailures >= this.opts.healthFailureThreshold || !w.probed) {
      w.healthy = false;
    }
    // A worker that was out (dead, unhealthy) and answers again may be a restarted process with
    // an empty cache: what was sent to it before no longer tells where prefixes are cached.
    if (!w.healthy || (w.healthy && before.health !== 'healthy' && (before.health === 'dead' || before.health === 'unhealthy'))) this.forgetCache(w);
    const after = w.info();
    // A worker back in service gets its spares now, not at the next tick: it is the least loaded,
    // so the next burst of continuations goes to it.
    if (after.health === 'healthy' && before.health !== 'healthy' && w.spares) {
      w.spares.recovered();
      this.maintainSpares();
    }
    if (before.health !== after.health || before.circuit !== after.circuit || before.incremental !== after.incremental
      || before.weight_version !== after.weight_version || before.model_path !== after.model_path || before.token_only !== after.token_only
      || before.format !== after.format || before.abort_path !== after.abort_path) this.onChange(w);
  }

  spareStats(): SpareStats[] {
    const out: SpareStats[] = [];
    for (const w of this.workers.values()) {
      if (w.spares) out.push({ worker: w.url, idle: w.spares.size, taken: w.spares.taken, reused: w.spares.reused, missed: w.spares.missed });
    }
    return out;
  }

  infos(): WorkerInfo[] {
    return this.list().map((w) => w.info());
  }
}

/** A worker serves a format's requests once probed as that format (an unprobed one: SGLang). */
function speaks(w: Worker, format: FormatName): boolean {
  return (w.format ?? 'sglang') === format;
}

/** Which format a worker speaks: the one it was last probed as first, then the others in order. */
async function probeFormats(w: Worker, timeoutMs: number): Promise<{ format: FormatName; probe: ProbeResult } | null> {
  const order = w.format ? [...FORMATS.filter((f) => f.name === w.format), ...FORMATS.filter((f) => f.name !== w.format)] : FORMATS;
  for (const f of order) {
    const probe = await f.probe(w.pool, timeoutMs);
    if (probe) return { format: f.workers, probe };
  }
  return null;
}

/** The model names the probed workers report. */
export function reportedModels(pool: WorkerPool): string[] {
  const out = new Set<string>();
  for (const w of pool.list()) if (w.modelPath !== null && w.probed) out.add(w.modelPath);
  return [...out];
}
