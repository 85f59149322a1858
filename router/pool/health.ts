// The pool's health: periodic health checks and probes, the workers' own load reports, what a
// failed attempt says about its worker (bench, circuit breaker, taken out), and the evidence a
// failure that needs it is judged on. Which format a worker speaks is found here too (probing).
import type { ErrorKind } from '../trace/row.ts';
import type { FormatName, ProbeResult } from '../core/types.ts';
import { checkHealth } from '../core/probe.ts';
import { judge, type Verdict } from '../core/failure.ts';
import { FORMATS, UNPROBED, formatNamed } from '../formats/registry.ts';
import { TokenedFailures, probeHealth, probeLoad, type WaitingEvidence } from './evidence.ts';
import { readLoad } from './load.ts';
import type { Worker } from './worker.ts';

export interface HealthOptions {
  healthIntervalMs: number;
  healthTimeoutMs: number;
  /** Consecutive failed health checks before a worker is taken out. */
  healthFailureThreshold: number;
  benchMs: number;
  /** How often the workers' own load is read, when placement uses it; 0 = off. */
  loadIntervalMs?: number;
}

/** What the health part tells the parts that hold knowledge about a worker. */
export interface HealthHooks {
  /** A worker's state the dashboard shows changed. */
  changed(w: Worker): void;
  /** A probe found `w` speaking `format` (facts.ts records it). */
  probed(w: Worker, format: FormatName, probe: ProbeResult): void;
  /** The worker's prefix cache is gone or unknown (selector.ts: the policies forget it). */
  cacheLost(w: Worker): void;
  /** The worker is back in service (spare-upkeep.ts gives it spares now). */
  recovered(w: Worker): void;
}

export class PoolHealth {
  private timer: NodeJS.Timeout | null = null;
  private loadTimer: NodeJS.Timeout | null = null;
  private checking = false;
  private readingLoads = false;
  /** Failures of requests that had tokens: evidence for failures that need it. */
  private readonly tokenedFailures = new TokenedFailures();
  /** waitingEvidence readings under way, by worker. */
  private readonly waitingReads = new Map<string, Promise<WaitingEvidence>>();
  /** Told after each health round, when every worker has been checked (and probed if it answered). */
  afterCheck: (() => void) | null = null;

  constructor(
    private readonly opts: HealthOptions,
    /** The registry's workers, read in place. */
    private readonly workers: ReadonlyMap<string, Worker>,
    private readonly hooks: HealthHooks,
  ) {}

  /** Start the health rounds, and the load readings when placement reads the load (`readLoads`). */
  start(readLoads: boolean): void {
    const loadMs = this.opts.loadIntervalMs ?? 0;
    if (readLoads && loadMs > 0 && !this.loadTimer) {
      this.loadTimer = setInterval(() => void this.readLoads(), loadMs);
      this.loadTimer.unref();
    }
    if (this.timer || this.opts.healthIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.checkAll(), this.opts.healthIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.loadTimer) clearInterval(this.loadTimer);
    this.loadTimer = null;
    this.timer = null;
  }

  /** The worker left the pool: its evidence goes with it. */
  forget(id: string): void {
    this.tokenedFailures.forget(id);
  }

  async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all([...this.workers.values()].map((w) => this.refresh(w)));
    } finally {
      this.checking = false;
    }
    this.afterCheck?.();
  }

  /** Health-check one worker, and (re)probe it when it is new or comes back. */
  async refresh(w: Worker): Promise<void> {
    const before = w.info();
    const ok = await checkHealth(w.pool, this.opts.healthTimeoutMs);
    if (!this.workers.has(w.id)) return;
    if (ok) {
      w.healthFailures = 0;
      // Re-probed at every check, not only when new: weights are updated while serving.
      const found = await probeFormats(w, this.opts.healthTimeoutMs);
      if (found && this.workers.has(w.id)) this.hooks.probed(w, found.format, found.probe);
      w.healthy = true;
      w.dead = false;
    } else if (++w.healthFailures >= this.opts.healthFailureThreshold || !w.probed) {
      w.healthy = false;
    }
    // A worker that was out (dead, unhealthy) and answers again may be a restarted process with
    // an empty cache: what was sent to it before no longer tells where prefixes are cached.
    if (!w.healthy || (w.healthy && before.health !== 'healthy' && (before.health === 'dead' || before.health === 'unhealthy'))) this.hooks.cacheLost(w);
    const after = w.info();
    if (after.health === 'healthy' && before.health !== 'healthy') this.hooks.recovered(w);
    if (before.health !== after.health || before.circuit !== after.circuit || before.incremental !== after.incremental
      || before.weight_version !== after.weight_version || before.model_path !== after.model_path || before.token_only !== after.token_only
      || before.format !== after.format || before.abort_path !== after.abort_path) this.hooks.changed(w);
  }

  /** Read every worker's own load (where its format reports it: WireFormat.load); one round at a time. */
  async readLoads(): Promise<void> {
    if (this.readingLoads) return;
    this.readingLoads = true;
    try {
      const timeout = Math.min(this.opts.healthTimeoutMs, 1000);
      await Promise.all([...this.workers.values()].map(async (w) => {
        if (!w.probed || w.dead || !w.healthy) return;
        w.reportedLoad = await readLoad(w.pool, w.format ?? UNPROBED, timeout);
      }));
    } finally {
      this.readingLoads = false;
    }
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
      this.hooks.cacheLost(w);
    }
    this.hooks.changed(w);
  }

  credit(w: Worker): void {
    const before = w.circuit.state();
    w.circuit.recordSuccess();
    if (w.circuit.state() !== before) this.hooks.changed(w);
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
      const path = formatNamed(w.format ?? UNPROBED).load?.path;
      reading = Promise.all([probeHealth(w.url, t), path === undefined ? null : probeLoad(w.url, path, t)]).then(([probe, load]) => ({ outOfService: null, probe, load }));
      this.waitingReads.set(w.id, reading);
      void reading.finally(() => this.waitingReads.delete(w.id));
    }
    return reading;
  }
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
