// Applying the planned faults to a live cluster: each fault is armed, held, then cleared (or the
// worker restarted), and its real start and end are recorded, so the verifier can tell a failure
// that had a reason from one that did not.

import type { SimCluster } from '../sim/cluster.ts';
import type { FaultKind, PlannedFault } from './schedule.ts';
import type { WireFormat } from './formats.ts';

export interface WorkerRef {
  cluster: SimCluster;
  /** Index inside its cluster. */
  local: number;
  url: string;
  incremental: boolean;
  /** The wire format the worker speaks (absent: SGLang). */
  format?: WireFormat;
}

export interface FaultWindow {
  kind: FaultKind;
  worker: number;
  start: number;
  end: number;
}

export class FaultInjector {
  readonly windows: FaultWindow[] = [];
  readonly injected: Record<FaultKind, number> = { kill: 0, crash: 0, hang: 0, reset: 0, reject: 0, slow: 0, abort: 0, error: 0 };
  /** Armed with afterTokens but cleared before enough tokens came. */
  notFired = 0;
  /** Planned but not applied: the worker was still busy with an earlier fault or restart. */
  skipped = 0;
  readonly errors: string[] = [];
  private readonly busy = new Set<number>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<Promise<void>>();
  private stopped = false;
  /** Hears each fault as it is applied and as it ends (for verbose progress). */
  onApply: ((f: PlannedFault, phase: 'applied' | 'ended') => void) | null = null;

  constructor(private readonly workers: readonly WorkerRef[]) {}

  /**
   * Takes a worker out of the plan's reach while another schedule (chaos/k8s.ts: a pod deleted or
   * evicted) has it; false when a fault has it now. `busyCount` is how many are out either way.
   */
  hold(worker: number): boolean {
    if (this.busy.has(worker)) return false;
    this.busy.add(worker);
    return true;
  }

  release(worker: number): void {
    this.busy.delete(worker);
  }

  busyWorkers(): ReadonlySet<number> {
    return this.busy;
  }

    /** Arm every planned fault relative to `t0`. */
  start(plan: readonly PlannedFault[], t0: number): void {
    for (const f of plan) {
      const timer = setTimeout(() => this.launch(f), Math.max(0, t0 + f.at - Date.now()));
      this.timers.push(timer);
    }
  }

  private launch(f: PlannedFault): void {
    if (this.stopped) return;
    if (this.busy.has(f.worker)) {
      this.skipped++;
      return;
    }
    this.busy.add(f.worker);
    const p = this.apply(f)
      .catch((err: Error) => {
        this.errors.push(`${f.kind} on worker ${f.worker}: ${err.message}`);
      })
      .finally(() => {
        this.busy.delete(f.worker);
        this.running.delete(p);
      });
    this.running.add(p);
  }

  private async apply(f: PlannedFault): Promise<void> {
    const w = this.workers[f.worker]!;
    const c = w.cluster;
    const start = Date.now();
    const alive = () => c.workers()[w.local]?.alive === true;
    if (!alive()) {
      this.skipped++;
      return;
    }
    this.injected[f.kind]++;
    this.onApply?.(f, 'applied');
    switch (f.kind) {
      case 'kill':
        await c.kill(w.local);
        await sleep(f.holdMs);
        await c.restart(w.local);
        break;
      case 'crash': {
        await c.fault(w.local, { kind: 'crash', afterTokens: f.afterTokens });
        // Wait for the worker to kill itself after its N-th token; without traffic it may not.
        const deadline = Date.now() + 3000;
        while (alive() && Date.now() < deadline) await sleep(25);
        if (alive()) {
          this.notFired++;
          await c.fault(w.local, { kind: 'clear' });
          break;
        }
        await sleep(f.holdMs);
        await c.restart(w.local);
        break;
      }
      case 'hang':
      case 'reset':
      case 'abort':
      case 'error':
      case 'reject': {
        await c.fault(w.local, { kind: f.kind, afterTokens: f.afterTokens });
        await sleep(f.holdMs);
        if (alive()) {
          const stats = await c.stats(w.local);
          if (stats.pendingFaults > 0) this.notFired++;
          await c.fault(w.local, { kind: 'clear' });
        }
        break;
      }
      case 'slow':
        await c.fault(w.local, { kind: 'slow', intervalMs: f.intervalMs });
        await sleep(f.holdMs);
        await c.fault(w.local, { kind: 'clear' });
        break;
    }
    this.windows.push({ kind: f.kind, worker: f.worker, start, end: Date.now() });
    this.onApply?.(f, 'ended');
  }

  /** Cancel what has not started, wait for what has, and leave every worker alive and clear. */
  async finish(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    while (this.running.size > 0) await Promise.all([...this.running]);
    for (const w of this.workers) {
      if (!w.cluster.workers()[w.local]?.alive) await w.cluster.restart(w.local);
      else await w.cluster.fault(w.local, { kind: 'clear' });
    }
  }

  get total(): number {
    return Object.values(this.injected).reduce((a, b) => a + b, 0);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
