// /metrics over every live replica, merged by prom-client's AggregatorRegistry (docs/metrics.md,
// "Replicas"): each replica sends its registry's JSON form when the primary collects it.
import { AggregatorRegistry } from 'prom-client';
import { BY_REPLICA_METRICS } from '../metrics.ts';
import type { Slot, Supervisor } from './supervisor.ts';

const ASK_TIMEOUT_MS = 3_000;

export class MetricsAggregator {
  private readonly pending = new Map<number, (m: unknown[] | null) => void>();
  private n = 0;

  constructor(private readonly sup: Supervisor) {}

  /** Every live replica's metrics, merged; a replica that does not answer within ASK_TIMEOUT_MS is left out. */
  async aggregate(): Promise<string> {
    const live = this.sup.slots.filter((s) => s.state === 'up' && s.child);
    const all = await Promise.all(live.map(async (s) => {
      const metrics = await this.collect(s);
      if (metrics === null) return null;
      return (metrics as { name: string; values: { labels: Record<string, string> }[] }[]).map((m) => (
        BY_REPLICA_METRICS.has(m.name) ? { ...m, values: m.values.map((v) => ({ ...v, labels: { ...v.labels, replica: s.id } })) } : m));
    }));
    const got = all.filter((m) => m !== null);
    if (got.length === 0) throw new Error('no replica answered');
    const registry = AggregatorRegistry.aggregate(got as Parameters<typeof AggregatorRegistry.aggregate>[0]);
    return (await registry.metrics()).replace(/ Nan$/gm, ' NaN');
  }

  /** A process's answer to `collect` (from one a reload has just replaced too: the collection asked it). */
  onMetrics(n: number, metrics: unknown[]): void {
    this.pending.get(n)?.(metrics);
  }

  private collect(s: Slot): Promise<unknown[] | null> {
    const k = ++this.n;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(null), ASK_TIMEOUT_MS);
      const done = (m: unknown[] | null) => {
        clearTimeout(timer);
        this.pending.delete(k);
        resolve(m);
      };
      this.pending.set(k, done);
      s.child!.send({ t: 'collect', n: k });
    });
  }
}
