// One attempt of a logical request as the loop holds it: the upstream call, the format's reader
// of its frames, the dispatch that placed it, and what its trace row reports. It is the reader's
// `AttemptHost`: what the format asks of the loop on the per-frame path goes through here.
import type { AttemptHost, FormatAttempt, WireFormat } from '../core/types.ts';
import type { ClientSink } from '../core/client-sink.ts';
import type { Failure } from '../core/failure.ts';
import type { UpstreamCall } from '../upstream/attempt.ts';
import type { Placement } from '../pool/policies/policy.ts';
import type { Worker } from '../pool/worker.ts';
import type { Dispatch } from './dispatch.ts';

/** What an attempt asks of its logical request. */
export interface AttemptOwner {
  acceptFirstFrame(a: AttemptState, weightVersion: string | null): boolean;
  onFirstFrame(a: AttemptState): void;
}

export class AttemptState implements AttemptHost {
  readonly startedAt = Date.now();
  firstFrameAt: number | null = null;
  call!: UpstreamCall;
  reader!: FormatAttempt;
  /** The worker whose stream the client reads (the dispatch's). */
  readonly worker: Worker;

  constructor(
    private readonly owner: AttemptOwner,
    /** The request's format: its workers' abort call. */
    private readonly format: WireFormat,
    readonly index: number,
    readonly rid: string,
    readonly dispatch: Dispatch,
    readonly replayed: number,
    readonly budgetBefore: number | null,
    readonly promptSent: number,
    private readonly sink: ClientSink,
    readonly placement: Placement,
  ) {
    this.worker = dispatch.worker;
  }

  /**
   * The worker's abort call for this attempt (by default at its streaming worker), best effort
   * (the worker may be gone). False when the worker serves none: only closing the attempt's
   * connection aborts it there.
   */
  sendAbort(worker: Worker = this.worker): boolean {
    const call = this.format.abortRequest(this.rid, worker.abortPath);
    if (call === null) return false;
    const { path, body } = call;
    void worker.pool
      .request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(2000) })
      .then((r) => r.body.dump(), () => undefined);
    return true;
  }

  // --- AttemptHost: what the format's reader asks of the loop, on the per-frame path ---

  write(data: Buffer | string): void {
    this.sink.writeRaw(data); // a full socket calls clientFull (this attempt is the sink's feeder)
  }

  /** A full client socket pauses the upstream call, so a slow client costs bounded memory. */
  clientFull(): void {
    this.call.pause();
    this.sink.onDrain(() => this.call.resume());
  }

  accept(weightVersion: string | null): boolean {
    return this.owner.acceptFirstFrame(this, weightVersion);
  }

  firstFrame(): void {
    this.owner.onFirstFrame(this);
  }

  finished(): void {
    this.call.end({ kind: 'finished' });
  }

  stopped(): void {
    this.call.abort({ kind: 'finished' });
    this.sendAbort();
  }

  failed(failure: Failure): void {
    this.call.abort({ kind: 'failed', failure });
  }
}
