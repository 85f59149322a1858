// The dashboard's fault buttons, mapped onto the simulated cluster (sim/cluster.ts). The cluster
// is held through the small structural interface below so the host stays testable with a fake.
import type { SimAction, SimWorkerState } from './contract.ts';

export type SimFaultKind = 'crash' | 'hang' | 'reset' | 'reject' | 'slow' | 'clear';

export interface SimClusterLike {
  workers(): { index: number; url: string; port: number; pid?: number | null; alive: boolean; exit?: { code: number | null; signal: string | null } | null }[];
  kill(index: number): unknown;
  restart(index: number): unknown;
  fault(index: number, fault: { kind: SimFaultKind; afterTokens?: number; intervalMs?: number }): unknown;
  onChange(listener: () => void): () => void;
  stop(): Promise<void> | void;
}

export const SIM_ACTIONS: readonly SimAction[] = ['kill', 'hang', 'reset', 'reject', 'slow', 'clear', 'restart'];

export function isSimAction(value: string): value is SimAction {
  return (SIM_ACTIONS as readonly string[]).includes(value);
}

export class SimActionError extends Error {}

/** Slow tokens: one every 250 ms, slow enough to see and to trip nothing but patience. */
const SLOW_INTERVAL_MS = 250;

export class SimControl {
  private readonly faults = new Map<number, SimWorkerState['fault']>();

  constructor(private readonly cluster: SimClusterLike) {}

  workers(): SimWorkerState[] {
    return this.cluster.workers().map((w) => ({
      index: w.index,
      url: w.url,
      port: w.port,
      pid: w.pid ?? null,
      alive: w.alive,
      fault: w.alive ? this.faults.get(w.index) ?? null : 'kill',
      exit: w.alive ? null : w.exit ?? null,
    }));
  }

  async apply(index: number, action: SimAction): Promise<SimWorkerState[]> {
    if (!this.cluster.workers().some((w) => w.index === index)) {
      throw new SimActionError(`no simulated worker with index ${index}`);
    }
    switch (action) {
      case 'kill':
        await this.cluster.kill(index);
        this.faults.set(index, 'kill');
        break;
      case 'restart':
        await this.cluster.restart(index);
        this.faults.delete(index);
        break;
      case 'clear':
        await this.cluster.fault(index, { kind: 'clear' });
        this.faults.delete(index);
        break;
      case 'slow':
        await this.cluster.fault(index, { kind: 'slow', intervalMs: SLOW_INTERVAL_MS });
        this.faults.set(index, 'slow');
        break;
      default:
        await this.cluster.fault(index, { kind: action });
        this.faults.set(index, action);
    }
    return this.workers();
  }
}
