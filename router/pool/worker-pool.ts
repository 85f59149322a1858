// The worker pool: which workers exist, which may take an attempt now, and the periodic health
// checks and probes that keep that knowledge fresh. Policies only choose among the eligible.
import type { WorkerInfo } from '../events/types.ts';
import type { SpareStats } from '../metrics.ts';
import type { CircuitOptions } from './circuit-breaker.ts';
import type { Policy } from './policies/policy.ts';
import { checkHealth, probeWorker } from './probe.ts';
import { Worker } from './worker.ts';

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
}

/** How often spare connections are resized to the load and renewed. */
const SPARE_INTERVAL_MS = 100;

export class WorkerPool {
  private readonly workers = new Map<string, Worker>();
  private nextId = 0;
  private timer: NodeJS.Timeout | null = null;
  private spareTimer: NodeJS.Timeout | null = null;
  private checking = false;

  constructor(
    private readonly opts: PoolOptions,
    private readonly policy: Policy,
    private readonly onChange: (w: Worker) => void,
    private readonly onRemove: (id: string) => void,
  ) {}

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
    const w = new Worker(`w${this.nextId++}`, normalized, this.opts.circuit, this.opts.connectTimeoutMs, opts.simulated ?? false, opts.simIndex ?? null, this.opts.spareConnections);
    this.workers.set(w.id, w);
    await this.refresh(w);
    return w;
  }

  remove(id: string): boolean {
    const w = this.workers.get(id);
    if (!w) return false;
    this.workers.delete(id);
    // In-flight attempts keep their connections until they end; close() waits for them.
    void w.close().catch(() => undefined);
    this.onRemove(id);
    return true;
  }

  setDraining(id: string, draining: boolean): boolean {
    const w = this.workers.get(id);
    if (!w) return false;
    w.draining = draining;
    this.onChange(w);
    return true;
  }

  /** Pick a worker for an attempt, never one in `exclude` nor one that may not take work now. */
  pick(exclude: ReadonlySet<string>): Worker | null {
    const now = Date.now();
    const candidates: Worker[] = [];
    for (const w of this.workers.values()) if (!exclude.has(w.id) && w.eligible(now)) candidates.push(w);
    if (candidates.length === 0) return null;
    return this.policy.select(candidates);
  }

  /** The default budget every probed worker advertises alike; null if any differs or none says. */
  defaultMaxNewTokens(): number | null {
    let value: number | null = null;
    let seen = false;
    for (const w of this.workers.values()) {
      if (!w.probed) continue;
      if (w.defaultMaxNewTokens === null) return null;
      if (seen && w.defaultMaxNewTokens !== value) return null;
      value = w.defaultMaxNewTokens;
      seen = true;
    }
    return value;
  }

  /** An attempt on `w` failed in a way that blames the worker: bench it, feed its breaker. */
  blame(w: Worker, connectFailed: boolean): void {
    w.benchedUntil = Date.now() + this.opts.benchMs;
    w.circuit.recordFailure();
    // A refused connection is strong evidence: take the worker out until a health check answers.
    if (connectFailed) w.dead = true;
    this.onChange(w);
  }

  credit(w: Worker): void {
    const before = w.circuit.state();
    w.circuit.recordSuccess();
    if (w.circuit.state() !== before) this.onChange(w);
  }

  start(): void {
    if (this.opts.spareConnections > 0 && !this.spareTimer) {
      this.spareTimer = setInterval(() => this.maintainSpares(), SPARE_INTERVAL_MS);
      this.spareTimer.unref();
    }
    if (this.timer || this.opts.healthIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.checkAll(), this.opts.healthIntervalMs);
    this.timer.unref();
  }

  /**
   * Size each worker's spares for the burst it would take if the busiest other worker died now:
   * all of that worker's streams, plus one (the policy may send every continuation to the least
   * loaded survivor, often a worker that has just come back). No traffic, no spares.
   */
  maintainSpares(now = Date.now()): void {
    let busiest = 0;
    let second = 0;
    for (const w of this.workers.values()) {
      if (w.inFlight >= busiest) {
        second = busiest;
        busiest = w.inFlight;
      } else if (w.inFlight > second) second = w.inFlight;
    }
    for (const w of this.workers.values()) {
      if (!w.spares) continue;
      const other = w.inFlight === busiest ? second : busiest;
      w.spares.target = other === 0 || !w.eligible(now) ? 0 : Math.min(this.opts.spareConnections, other + 1);
      w.spares.maintain(now);
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.spareTimer) clearInterval(this.spareTimer);
    this.timer = null;
    this.spareTimer = null;
    await Promise.all(this.list().map((w) => w.destroy().catch(() => undefined)));
    this.workers.clear();
  }

  async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(this.list().map((w) => this.refresh(w)));
    } finally {
      this.checking = false;
    }
  }

  /** Health-check one worker, and (re)probe it when it is new or comes back. */
  private async refresh(w: Worker): Promise<void> {
    const before = w.info();
    const ok = await checkHealth(w.pool, this.opts.healthTimeoutMs);
    if (!this.workers.has(w.id)) return;
    if (ok) {
      w.healthFailures = 0;
      if (!w.healthy || w.dead || !w.probed) {
        const probe = await probeWorker(w.pool, this.opts.healthTimeoutMs);
        if (probe) {
          w.tokenOnly = probe.tokenOnly;
          w.incremental = probe.incremental;
          w.defaultMaxNewTokens = probe.defaultMaxNewTokens;
          w.probed = true;
        }
      }
      w.healthy = true;
      w.dead = false;
    } else if (++w.healthFailures >= this.opts.healthFailureThreshold || !w.probed) {
      w.healthy = false;
    }
    const after = w.info();
    // A worker back in service gets its spares now, not at the next tick: it is the least loaded,
    // so the next burst of continuations goes to it.
    if (after.health === 'healthy' && before.health !== 'healthy' && w.spares) this.maintainSpares();
    if (before.health !== after.health || before.circuit !== after.circuit || before.incremental !== after.incremental) this.onChange(w);
  }

  spareStats(): SpareStats[] {
    const out: SpareStats[] = [];
    for (const w of this.workers.values()) {
      if (w.spares) out.push({ worker: w.url, idle: w.spares.size, taken: w.spares.taken, missed: w.spares.missed });
    }
    return out;
  }

  infos(): WorkerInfo[] {
    return this.list().map((w) => w.info());
  }
}

export function normalizeWorkerUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new Error(`invalid worker URL '${raw}'`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`worker URL must be http(s): '${raw}'`);
  if (u.pathname !== '/' || u.search || u.hash) throw new Error(`worker URL must be an origin without a path: '${raw}'`);
  return u.origin;
}
