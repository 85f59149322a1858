// The pool's registry: which workers exist. Adding one checks it (the health part, through
// `Membership.check`), removing one tells the other parts to drop what they hold for it; the
// registry itself knows no health, policy or format.
import type { WorkerInfo } from '../events/types.ts';
import type { CircuitOptions } from './circuit-breaker.ts';
import { Worker } from './worker.ts';
import { normalizeWorkerUrl } from '../worker-url.ts';

export { normalizeWorkerUrl };

export interface RegistryOptions {
  circuit: CircuitOptions;
  connectTimeoutMs: number;
  /** Most spare connections per worker for continuations (spares.ts); 0 = off. */
  spareConnections: number;
}

/** What the registry tells, and asks of, the parts that keep knowledge about its workers. */
export interface Membership {
  /** A worker's state the dashboard shows changed. */
  changed(w: Worker): void;
  /** `last`: the worker as it was when removed (its discovery tag says why it went). */
  removed(id: string, last: WorkerInfo): void;
  /** Health-check (and probe) a worker that joined. */
  check(w: Worker): Promise<void>;
  /** The set of workers changed: `left` is the worker that left, if one did. */
  membershipChanged(left: Worker | null): void;
}

export class WorkerRegistry {
  /** By id. Read in place by the selector on every pick: no copy. */
  readonly workers = new Map<string, Worker>();
  private nextId = 0;

  constructor(private readonly opts: RegistryOptions, private readonly members: Membership) {}

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

  infos(): WorkerInfo[] {
    return this.list().map((w) => w.info());
  }

  async add(url: string, opts: { simulated?: boolean; simIndex?: number } = {}): Promise<Worker> {
    const normalized = normalizeWorkerUrl(url);
    const existing = this.byUrl(normalized);
    if (existing) return existing;
    const w = this.insert(normalized, opts);
    await this.members.check(w);
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
    this.members.changed(w);
    void this.members.check(w).catch(() => undefined);
    return { worker: w, added: true };
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
    await this.members.check(w);
    return w;
  }

  private insert(normalized: string, opts: { simulated?: boolean; simIndex?: number }): Worker {
    const w = new Worker(`w${this.nextId++}`, normalized, this.opts.circuit, this.opts.connectTimeoutMs, opts.simulated ?? false, opts.simIndex ?? null, this.opts.spareConnections);
    this.workers.set(w.id, w);
    this.members.membershipChanged(null);
    return w;
  }

  remove(id: string): boolean {
    const w = this.workers.get(id);
    if (!w) return false;
    this.workers.delete(id);
    this.members.membershipChanged(w);
    // In-flight attempts keep their connections until they end; close() waits for them.
    void w.close().catch(() => undefined);
    this.members.removed(id, w.info());
    return true;
  }

  setDraining(id: string, draining: boolean): boolean {
    const w = this.workers.get(id);
    if (!w) return false;
    w.draining = draining;
    this.members.changed(w);
    return true;
  }

  /** Close every worker's connections and forget them all. */
  async close(): Promise<void> {
    await Promise.all(this.list().map((w) => w.destroy().catch(() => undefined)));
    this.workers.clear();
  }
}

/** The model names the probed workers report. */
export function reportedModels(pool: { list(): Worker[] }): string[] {
  const out = new Set<string>();
  for (const w of pool.list()) if (w.modelPath !== null && w.probed) out.add(w.modelPath);
  return [...out];
}
