// The plain dispatch: an attempt is one upstream call to one worker, whose frames go straight to
// the format's reader. Nothing else to start, hold or let go of.
import type { Failure } from '../core/failure.ts';
import { UpstreamCall } from '../upstream/attempt.ts';
import type { StallWatch } from '../upstream/stall-watch.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { Worker } from '../pool/worker.ts';
import type { AttemptState } from './attempt-state.ts';
import type { Dispatch, LeftOut, PairRowFacts } from './dispatch.ts';

export class SingleDispatch implements Dispatch {
  readonly kind = 'single';
  readonly prefill = null;
  private a!: AttemptState;

  constructor(readonly worker: Worker) {}

  bind(a: AttemptState, body: string | Buffer): string | Buffer {
    this.a = a;
    return body;
  }

  open(path: string, body: string | Buffer, stalls: StallWatch): UpstreamCall {
    const a = this.a;
    return new UpstreamCall(this.worker, path, body, (buf, start, end) => a.reader.onFrame(buf, start, end), stalls);
  }

  started(): void {}

  firstFrame(): void {}

  end(): void {}

  attribute(failure: Failure): Failure {
    return failure;
  }

  leaveOut(_failure: Failure, out: LeftOut, _pool: WorkerPool): void {
    out.workers.add(this.worker.id);
  }

  rowFacts(): PairRowFacts | null {
    return null;
  }
}
