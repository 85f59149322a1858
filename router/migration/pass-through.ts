// A request the loop serves whole: batches, n > 1 and bodies the router cannot parse. One attempt,
// the body forwarded as the client wrote it, the answer passed back as the worker wrote it
// (upstream/passthrough.ts); placed by dispatch.ts placeWhole, reported by the loop's report
// (report.ts), never migrated, never blamed on the worker (its refusal of a bad value is the
// request's fault). The edge writes what the front says when no worker takes it.
import type { ServerResponse } from 'node:http';
import type { FormatRequest, WireFormat } from '../core/types.ts';
import { classifyTransportError } from '../core/failure.ts';
import { passThrough } from '../upstream/passthrough.ts';
import type { Worker } from '../pool/worker.ts';
import type { InboundTrace, ProgressSource } from '../telemetry.ts';
import { LoopReport } from './report.ts';
import { placeWhole } from './dispatch.ts';
import type { LoopContext } from './logical-request.ts';

const NO_PROGRESS = Object.freeze({ tokens: 0, completion: 0 });

export class PassThroughRequest implements ProgressSource {
  /** Why it is not migrated (the request row's admission_reason). */
  readonly reason: 'batch' | 'n_gt_1' | 'unparsed_field';
  private readonly report: LoopReport;

  constructor(
    private readonly ctx: LoopContext,
    private readonly format: WireFormat,
    private readonly req: FormatRequest,
    readonly id: string,
    readonly trace: InboundTrace | null,
  ) {
    this.reason = req.prompt.kind === 'batch' ? 'batch' : typeof req.sampling.n === 'number' && req.sampling.n > 1 ? 'n_gt_1' : 'unparsed_field';
    this.report = new LoopReport(ctx.telemetry, this, format.name);
  }

  attemptIndex(): number {
    return 0;
  }

  progress(): { tokens: number; completion: number } {
    return NO_PROGRESS;
  }

  /**
   * The worker that serves it, or null: none now. `refusal`: P/D cannot serve it at all (the pool
   * has decode servers and no aggregated worker), the request's error for the client.
   */
  place(): { worker: Worker | null; refusal: string | null } {
    const { worker, pdOnly } = placeWhole(this.ctx.pool, this.format.workers);
    if (!pdOnly) return { worker, refusal: null };
    const what = this.reason === 'batch' ? 'a batch' : this.reason === 'n_gt_1' ? 'n > 1' : 'a body Baton cannot parse';
    return { worker, refusal: `${what} is not served in P/D mode without an aggregated worker: a decode server needs one bootstrap room per request, which Baton gives only to the single requests it pairs with a prefill server (add --worker URL to serve it)` };
  }

  /** Admitted (not for migration) at the front `front`: from here on it is in flight until it ends. */
  admit(front: string): void {
    this.report.admitted(false, this.reason, this.req.stream, this.req.promptLength ?? 0, typeof this.req.maxNewTokens === 'number' ? this.req.maxNewTokens : null, front);
  }

  /** No worker took it (the edge answered the front's no-worker error): still one request row. */
  noWorker(): void {
    this.report.told(503, 'no_worker: no healthy worker available');
    this.report.wholeRequestEnded(this.reason, this.req, 0, 'failed', Date.now(), null);
  }

  /** Serve it on `worker`: the client's body as written, the worker's answer to `res` as written. */
  async serve(worker: Worker, body: string, res: ServerResponse, headers: Record<string, string>, writeTimeoutMs: number): Promise<void> {
    const report = this.report;
    const upstreamHeaders = report.attemptStarted(0, this.id, worker, 0, null, null);
    const ac = new AbortController();
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    worker.inFlight++;
    const failure = await passThrough(worker, body, res, headers, ac.signal, classifyTransportError, this.format.generatePath, upstreamHeaders, writeTimeoutMs);
    worker.inFlight--;
    const ended = Date.now();
    const outcome = failure === null ? 'finished' : failure.kind === 'client_cancel' ? 'cancelled' : 'failed';
    report.wholeAttemptEnded(worker, this.req.promptLength ?? 0, report.startedAt, ended, outcome, failure);
    if (outcome === 'failed' && failure) report.told(failure.status, `${failure.kind}: ${failure.message}`);
    report.wholeRequestEnded(this.reason, this.req, 1, outcome, ended, failure?.message ?? null);
  }
}
