// The worker writes made on the shared port of `--replicas`, as the primary keeps them for the
// replica processes that start later (a restart after a crash, a reload): docs/replicas.md,
// "Worker writes".
import type { WorkerWrite } from '../http/worker-writes.ts';

/**
 * Per worker URL: whether it was added or removed, and its latest drain. The URLs go in the order
 * their workers were added (an add moves its URL last), so that a replica that starts later meets
 * the added workers in the order the others did and gives them the same ids (w3, w4, ...) when
 * the others had no other source of workers between them. A cache flush is not kept: a new
 * process's picture of the caches starts empty.
 */
export class WriteJournal {
  private readonly byUrl = new Map<string, { member: 'add' | 'remove' | null; drain: WorkerWrite | null }>();

  add(op: WorkerWrite): void {
    if (op.op === 'flushed') return;
    const prev = this.byUrl.get(op.url);
    if (op.op === 'remove') {
      this.byUrl.set(op.url, { member: 'remove', drain: null });
    } else if (op.op === 'add') {
      if (prev?.member === 'add') return; // the worker is there: an add changes nothing
      this.byUrl.delete(op.url);
      // A removed worker comes back undrained; one that was there (a configured worker) keeps its drain.
      this.byUrl.set(op.url, { member: 'add', drain: prev?.member === 'remove' ? null : prev?.drain ?? null });
    } else {
      // An undrain leaves nothing to replay: a new process's workers start undrained.
      const drain = op.op === 'draining' && !op.draining ? null : op;
      this.byUrl.set(op.url, { member: prev?.member ?? null, drain });
    }
  }

  /** What a process that starts now applies, in order. */
  ops(): WorkerWrite[] {
    const out: WorkerWrite[] = [];
    for (const [url, e] of this.byUrl) {
      if (e.member !== null) out.push({ op: e.member, url });
      if (e.drain !== null) out.push(e.drain);
    }
    return out;
  }
}
