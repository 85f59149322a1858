// What the replicas share through the primary (docs/replicas.md, "What replicas share"): each
// one's cache_aware prefixes, relayed to the others as they come, and the worker writes made on
// the shared port, applied on the others and kept (the latest per worker URL, write-journal.ts)
// for every process that starts later.
import type { ReplicaOutcome, WorkerWrite } from '../http/worker-writes.ts';
import type { Child } from './spawner.ts';
import type { Supervisor } from './supervisor.ts';
import { WriteJournal } from './write-journal.ts';

const ASK_TIMEOUT_MS = 3_000;
/**
 * Prefix batches relayed to one replica and not yet written to its channel: past this, the next
 * are dropped for it (a replica that cannot keep up is not queued for without bound).
 */
const MAX_UNSENT_PREFIXES = 8;

export class ReplicaShare {
  private readonly writes = new WriteJournal();
  private readonly applied = new Map<number, (error: string | null) => void>();
  private n = 0;

  constructor(private readonly sup: Supervisor) {}

  /** `child` has its configured workers: the writes so far, then (in the channel's order) each new one as `apply`. */
  sync(child: Child): void {
    child.synced = true;
    child.send({ t: 'writes', ops: this.writes.ops() });
  }

  /** One replica's prefixes to every other process that serves (one that cannot keep up misses some). */
  relayPrefixes(from: Child, batch: unknown): void {
    for (const c of this.sup.processes(from)) {
      if (c.unsentPrefixes >= MAX_UNSENT_PREFIXES) continue;
      c.unsentPrefixes++;
      c.send({ t: 'prefixes', batch }, () => c.unsentPrefixes--);
    }
  }

  /**
   * A worker write `from` has applied: kept for the processes that start later, applied on every
   * other synced process (one still starting gets it with the others when it syncs). Each slot's
   * outcome: its running replica's answer within ASK_TIMEOUT_MS, applied by `from` itself, or
   * pending (not running: it applies the write when it starts).
   */
  async fanOut(from: Child, op: WorkerWrite): Promise<ReplicaOutcome[]> {
    this.writes.add(op);
    const answers = new Map<Child, Promise<string | null>>();
    for (const c of this.sup.processes(from)) answers.set(c, this.applyOn(c, op));
    return Promise.all(this.sup.slots.map(async (s): Promise<ReplicaOutcome> => {
      const o = { id: s.id, index: s.index };
      if (s.child === from) return { ...o, state: 'applied' };
      const answer = s.state === 'up' && s.child ? answers.get(s.child) : undefined;
      if (answer === undefined) return { ...o, state: 'pending' };
      const error = await answer;
      return error === null ? { ...o, state: 'applied' } : { ...o, state: 'failed', error };
    }));
  }

  /** A process's answer to `apply`. */
  onApplied(n: number, error: string | null): void {
    this.applied.get(n)?.(error);
  }

  private applyOn(c: Child, op: WorkerWrite): Promise<string | null> {
    const k = ++this.n;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(`did not answer within ${ASK_TIMEOUT_MS} ms; it applies the write when it reads it`), ASK_TIMEOUT_MS);
      const done = (error: string | null) => {
        clearTimeout(timer);
        this.applied.delete(k);
        resolve(error);
      };
      this.applied.set(k, done);
      void c.exited.then(() => done('exited before it answered'));
      c.send({ t: 'apply', n: k, op });
    });
  }
}
