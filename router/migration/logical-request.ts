// The migration loop: one logical request, served by one attempt after another until one
// finishes, the client leaves, or migration may not go on. It knows no wire format: the format
// (router/formats/<name>/, through the seam in ../core/types.ts) reads each attempt's frames,
// forwards or rebases them for the client, and builds each attempt's body; the loop places each
// attempt (dispatch.ts: one worker or a P/D pair), counts budgets, classifies failures into
// migrate / stop, and reports through its report (report.ts).
import type { Admission, FormatRequest, FormatSession, WireFormat } from '../core/types.ts';
import type { ClientSink } from '../core/client-sink.ts';
import { upstreamRid } from './rid.ts';
import { attemptSpec, remainingBudget } from '../core/continuation.ts';
import { BLAMES_WORKER, MIGRATES, classifyTransportFact, type Failure } from '../core/failure.ts';
import { frameSpacing } from '../upstream/stall-watch.ts';
import type { AttemptResult } from '../upstream/attempt.ts';
import type { StallWatch } from '../upstream/stall-watch.ts';
import type { ContinuationPin, WorkerPool } from '../pool/worker-pool.ts';
import type { Placement } from '../pool/policies/policy.ts';
import type { InboundTrace, Telemetry, ProgressSource } from '../telemetry.ts';
import type { AttemptOutcome, RequestOutcome } from '../trace/row.ts';
import { finishesBy, type Drainer } from './drain.ts';
import { AttemptState, type AttemptOwner } from './attempt-state.ts';
import { placeAttempt, unplacedMessage, type Dispatch, type LeftOut } from './dispatch.ts';
import { LoopReport, type LoopEnd } from './report.ts';
import { migrationRefusal } from './refusal.ts';
import { judgeBlame } from './blame.ts';

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;
const FINISHED: AttemptResult = { kind: 'finished' };

export interface MigrationSettings {
  migrationLimit: number;
  migrationMaxSeqLen: number | null;
  /** P/D: the decode leg's first token must come within this long (docs/pd.md); 0 or absent: off. */
  pdFirstTokenTimeoutMs?: number;
}

export interface LoopContext {
  settings: MigrationSettings;
  pool: WorkerPool;
  telemetry: Telemetry;
  stalls: StallWatch;
  /** Drains with a deadline move streams off their worker (drain.ts); absent: no drains. */
  drainer?: Drainer;
}

export class LogicalRequest implements ProgressSource, AttemptOwner {
  private readonly out: FormatSession;
  private readonly admission: Admission;
  /** The request's rows and events (report.ts). */
  private readonly report: LoopReport;
  /** What its failures left out of its next placements (dispatch.ts). */
  private readonly leftOut: LeftOut = { workers: new Set<string>(), prefill: new Set<string>() };
  private current: AttemptState | null = null;
  private attempts = 0;
  private cancelled = false;
  /** The client asked the router's abort endpoint to stop this request. */
  private aborted = false;
  /** What a continuation must share with the attempts before it (set by attempt 0's worker). */
  private pin: ContinuationPin | null = null;
  /** Attempt 0's constraint: the model the request names, if it names one (OpenAI's `model`). */
  private readonly firstPin: ContinuationPin | null;
  /** Attempts moved off a draining worker: not failures, not counted against the migration limit. */
  private drained = 0;
  /**
   * Failures before the request's first token that no evidence showed to be their worker's
   * (migration.md, "Blame needs evidence"): each worker's url and what was read. The second ends
   * the request: it fails the same way wherever it goes.
   */
  private readonly unproven: string[] = [];
  private readonly promptIds: number[];

  /** The client path it came on (/generate, /v1/chat/completions, ...), for its first event; set by the edge. */
  front: string | null = null;

  constructor(
    private readonly ctx: LoopContext,
    private readonly format: WireFormat,
    private readonly req: FormatRequest,
    readonly id: string,
    private readonly sink: ClientSink,
    readonly trace: InboundTrace | null = null,
  ) {
    this.report = new LoopReport(ctx.telemetry, this, format.name);
    const defaults = ctx.pool.samplingDefaults(format.workers);
    this.admission = format.admit(req, {
      migrationLimit: ctx.settings.migrationLimit,
      migrationMaxSeqLen: ctx.settings.migrationMaxSeqLen,
      workerDefaults: defaults.agreed,
      disputedDefaults: defaults.disputed,
      maxReqLen: ctx.pool.maxReqLen(format.workers),
    });
    this.promptIds = req.prompt.kind === 'input_ids' ? req.prompt.ids : [];
    this.out = format.session(req, { id, budget: this.admission.budget, startedAt: this.report.startedAt }, sink);
    this.firstPin = req.model ? { modelPath: req.model, weightVersion: null, textOk: this.out.rendersOwnText === true } : null;
  }

  attemptIndex(): number {
    return Math.max(0, this.attempts - 1);
  }

  progress(): { tokens: number; completion: number } {
    const a = this.current;
    if (!a) return { tokens: 0, completion: this.out.ids.length };
    const tokens = a.reader.progressTokens();
    return { tokens, completion: a.replayed + tokens };
  }

  /** The worker of the attempt in flight, if any (drain.ts finds a draining worker's streams). */
  currentWorkerId(): string | null {
    return this.current?.worker.id ?? null;
  }

  /**
   * Whether the attempt in flight will have finished by `cutoff`: its remaining budget times the
   * inter-token time it has shown. No budget, or fewer than two tokens seen: not known, so no.
   */
  finishesBy(cutoff: number, now: number): boolean {
    const a = this.current;
    if (!a) return false;
    const budget = this.out.budget;
    const tokens = a.reader.progressTokens();
    return finishesBy(cutoff, now, a.firstFrameAt, tokens, budget === null ? null : budget - a.replayed - tokens);
  }

  /**
   * Move the attempt in flight off its draining worker: abort it (error_kind `drain`) and let the
   * loop continue it elsewhere at once from the tokens the client has (drain.ts). False when the
   * request may not be continued (not admitted, text, the sequence limit, the client gone): it
   * stays and ends with its worker; so does one no other worker could continue now.
   */
  drainMove(reason: string): boolean {
    const a = this.current;
    if (!a || a.call.ended || this.cancelled || this.aborted || !this.admission.admitted || this.unproven.length >= 2) return false;
    if (this.out.sawText && this.out.ids.length + a.reader.progressTokens() > 0) return false;
    const maxSeq = this.ctx.settings.migrationMaxSeqLen;
    if (maxSeq !== null && this.promptIds.length + this.out.ids.length + a.reader.progressTokens() > maxSeq) return false;
    // No other worker could continue it: moving would fail it, staying may let it finish.
    const pin = this.pin ?? { modelPath: a.worker.modelPath, weightVersion: a.worker.weightVersion, textOk: this.out.rendersOwnText === true };
    if (!this.ctx.pool.canPick(this.leftOut.workers, a.worker.id, pin, this.format.workers)) return false;
    a.failed({ kind: 'drain', message: `${a.worker.url} is draining (${reason}): continued on another worker`, status: 503, evidence: `drain of ${a.worker.url} (${reason})` });
    a.sendAbort(); // the worker frees the slot now, not when it notices the closed socket
    return true;
  }

  /** The client went away: abort the upstream attempt at once; never migrate. */
  cancel(): void {
    this.cancelled = true;
    const a = this.current;
    if (!a) return;
    a.call.abort({ kind: 'cancelled' });
    // Closing the connection makes the worker abort the request; say it explicitly too, so the
    // worker frees the slot even if it has not yet noticed the closed socket.
    a.sendAbort();
  }

  /**
   * The client called the router's abort endpoint for this request: the worker's own abort, sent
   * to the worker that holds the current attempt (by its upstream rid, which no other request's
   * rid starts with). The worker ends the stream with its abort finish, which reaches the client
   * as the worker wrote it (rebased); an abort is never undone by a migration.
   */
  abort(): void {
    if (this.aborted || this.cancelled) return;
    this.aborted = true;
    const a = this.current;
    if (!a || a.sendAbort()) return;
    // The worker serves no abort endpoint (an older vLLM): closing the attempt's connection is its
    // abort, and the client gets the abort answer from the router (the loop's `aborted` branch).
    a.call.abort({ kind: 'failed', failure: { kind: 'client_cancel', message: 'aborted by the client: the worker serves no abort endpoint, so its connection was closed', status: 499, evidence: `abort requested; ${a.worker.url} serves no abort endpoint (probed)` } });
  }

  private countHeaders(): Record<string, string> {
    return { 'x-baton-attempts': String(this.attempts), 'x-baton-migrations': String(Math.max(0, this.attempts - 1)) };
  }

  async run(): Promise<void> {
    this.report.admitted(this.admission.admitted, this.admission.reason, this.req.stream, this.req.promptLength ?? 0, this.out.budget, this.front);
    let end: LoopEnd;
    this.ctx.drainer?.live.add(this);
    try {
      end = await this.attemptLoop();
    } catch (err) {
      // A bug must still end the request once: the client gets an error, the row is written.
      this.current?.call.abort({ kind: 'failed', failure: { kind: 'protocol', message: 'internal error', status: 500 } });
      this.current?.dispatch.end();
      const lastFailure: Failure = { kind: 'protocol', message: `internal error: ${(err as Error).message}`, status: 500 };
      this.failSink(500, lastFailure.message, 'internal_error');
      end = { outcome: 'failed', finishReason: null, lastFailure, exhausted: false };
    }
    this.ctx.drainer?.live.delete(this);
    this.report.requestEnded(end, this.attempts, this.admission, this.req, this.out, this.sink.cut);
  }

  /** Attempts until one finishes, the client leaves, or migration may not go on. */
  private async attemptLoop(): Promise<LoopEnd> {
    let lastFailure: Failure | null = null;
    let outcome: RequestOutcome = 'failed';
    let finishReason: string | null = null;
    let exhausted = false;
    let pending: { from: string; kind: Failure['kind']; ongoing: boolean } | null = null;

    for (;;) {
      if (this.cancelled) {
        outcome = 'cancelled';
        break;
      }
      if (this.aborted) {
        // Aborted between attempts (or the worker died before its abort frame): end as the
        // worker's abort ends a request, without another worker call.
        this.out.finishAborted(this.countHeaders());
        outcome = 'finished';
        finishReason = 'abort';
        break;
      }
      const pin = this.attempts > 0 ? this.pin : this.firstPin;
      // A continuation is placed by prompt + replayed tokens: where the longest prefix is cached.
      const placement: Placement = { prompt: this.promptIds, replayed: this.attempts > 0 ? this.out.ids : null, prefix: null, reason: null };
      const d = placeAttempt(this.ctx.pool, this.leftOut, pin, this.format.workers, placement, this.ctx.settings);
      if (d.kind === 'unplaced') {
        if (lastFailure) exhausted = true;
        const message = unplacedMessage(d, lastFailure, this.ctx.pool, this.leftOut, pin, this.format.workers);
        const type = lastFailure ? 'migration_exhausted' : 'no_worker';
        // A decode worker left without a prefill server is told to the client only, not in the request row.
        if (d.pairFor !== null) this.sink.fail(503, message, type);
        else this.failSink(503, message, type);
        break;
      }
      const worker = d.worker;
      if (pending) {
        const replayed = this.out.ids.length;
        this.report.migrated(pending.from, worker.url, replayed, this.attempts, pending.kind, pending.ongoing);
        pending = null;
      }
      const a = this.startAttempt(d, placement);
      let result = await a.call.result;
      // A finish the format held for the frame after it (vLLM's usage chunk) is the answer, whatever
      // ended the call before that frame came: the answer is whole.
      if ((result.kind === 'failed' || result.kind === 'transport') && a.reader.finishHeld?.() === true) result = FINISHED;
      this.current = null;
      worker.inFlight--;
      d.end();
      const reader = a.reader;
      reader.settle();
      if (reader.weightVersion !== null) this.ctx.pool.noteWeightVersion(worker, reader.weightVersion);
      // The model every continuation must share is attempt 0's; the weights are those of the first
      // attempt that produced tokens (as the worker named them, else as probed): tokens of two
      // sets of weights are not one answer, while a failure before any token binds nothing.
      this.pin ??= { modelPath: worker.modelPath, weightVersion: null, textOk: this.out.rendersOwnText === true };
      if (this.pin.weightVersion === null && reader.tokens > 0) this.pin.weightVersion = reader.weightVersion ?? worker.weightVersion;
      this.out.commit(reader);

      if (result.kind === 'finished') {
        this.ctx.pool.credit(worker);
        finishReason = reader.finishReason();
        this.endAttempt(a, 'finished', null);
        outcome = 'finished';
        break;
      }
      if (result.kind === 'cancelled') {
        // sink.cut: the router cut off a client that read nothing (--client-write-timeout-ms).
        this.endAttempt(a, 'cancelled', this.sink.cut ?? { kind: 'client_cancel', message: 'client disconnected', status: 499 });
        outcome = 'cancelled';
        break;
      }

      // What the transport saw is classified here, by the loop's table (failure.ts); the dispatch
      // says whose failure it is (a pair: which leg).
      const failure = d.attribute(result.kind === 'transport' ? classifyTransportFact(result.fact) : result.failure, a.firstFrameAt !== null);
      lastFailure = failure;
      if (this.aborted && failure.kind !== 'worker_abort') {
        // The worker failed before its abort frame came: the client still gets its abort.
        this.endAttempt(a, 'failed', failure);
        continue;
      }
      if (!MIGRATES[failure.kind]) {
        // The request's own fault (4xx, a refusal): the client gets it as the worker wrote it.
        this.endAttempt(a, 'failed', failure);
        this.report.told(failure.status, `${failure.kind}: ${failure.message}`);
        this.out.passThrough(reader, failure);
        break;
      }
      if (BLAMES_WORKER[failure.kind]) await judgeBlame(this.ctx.pool, a, failure, this.out.ids.length, this.unproven);
      d.leaveOut(failure, this.leftOut, this.ctx.pool);
      if (failure.kind === 'drain') this.drained++;
      else this.report.failed();

      const budget = this.out.budget;
      if (this.admission.admitted && budget !== null && remainingBudget(budget, this.out.ids.length) === 0
        && this.out.canFinishLocally && (this.out.ids.length > 0 || !this.req.returnLogprob)) {
        // Every token of the budget was delivered before the failure: finish here, no worker call,
        // in the shape of the last chunk a worker sent. (A zero-token request that no worker has
        // answered yet goes on to another worker: only a worker can say what its answer carries;
        // nor can the router compute prompt logprobs that a zero-token request asked for.)
        this.endAttempt(a, 'budget_exhausted', failure);
        this.out.finishLocally(this.countHeaders());
        finishReason = 'length';
        outcome = 'finished';
        break;
      }
      this.endAttempt(a, failure.kind === 'drain' ? 'drained' : 'failed', failure);

      const refusal = migrationRefusal({
        admission: this.admission, unproven: this.unproven, attempts: this.attempts, drained: this.drained, settings: this.ctx.settings,
        sequence: this.promptIds.length + this.out.ids.length, tokens: this.out.ids.length, sawText: this.out.sawText,
      });
      if (refusal !== null) {
        if (refusal.type === 'migration_max_seq_len') this.report.maxSeqLenExceeded();
        exhausted = refusal.exhausted;
        if (refusal.status !== undefined) this.failClient(refusal.status, refusal.message, refusal.type);
        else this.failSink(failure.status >= 500 ? failure.status : 502, `${refusal.message}: ${failure.message}`, refusal.type);
        break;
      }
      // Counted when the continuation starts, so the event can name where it went.
      pending = { from: worker.url, kind: failure.kind, ongoing: this.out.ids.length > 0 };
    }
    return { outcome, finishReason, lastFailure, exhausted };
  }

  /** The router's own error, in band if the stream has started, and what the request row says the client got. */
  private failSink(status: number, message: string, type: string): void {
    this.report.told(status, `${type}: ${message}`);
    this.sink.fail(status, message, type);
  }

  /** The router's own error: in band on a stream (the format's error frame), else a JSON error with `status`. */
  private failClient(status: number, message: string, type: string): void {
    this.report.told(status, `${type}: ${message}`);
    if (this.sink.streaming) this.sink.endStreamWithError(this.format.errors.frame(status, message, type));
    else this.sink.fail(status, message, type);
  }

  /** Attempt `attempts` on the dispatch's worker(s): its body, its reader, its call, sent. */
  private startAttempt(d: Dispatch, placement: Placement): AttemptState {
    const index = this.attempts++;
    const replayed = this.out.ids.length;
    const rid = upstreamRid(this.id, index);
    const budget = this.out.budget;
    const budgetBefore = budget === null ? null : remainingBudget(budget, replayed);
    const spec = attemptSpec(index, rid, this.out.ids, budget, this.admission.admitted, this.admission.minNewTokens, d.prefill !== null);
    const path = this.format.generatePath;
    const body = this.format.attemptBody(this.req, this.promptIds, spec, this.admission.minNewTokens);
    const promptSent = (this.req.promptLength ?? 0) + replayed;
    const a = new AttemptState(this, this.format, index, rid, d, replayed, budgetBefore, promptSent, this.sink, placement);
    // What every worker of the dispatch gets (a pair: with its room).
    const sent = d.bind(a, body, path);
    const worker = d.worker;
    // Attempt 0's frames may go to a streaming client untouched; a continuation's are rebased.
    // The counts travel only with a unary answer (a stream's headers are long gone by its end).
    a.reader = this.out.attempt(spec, worker, a, index === 0 && this.sink.streaming, this.sink.streaming ? NO_HEADERS : this.countHeaders());
    a.call = d.open(path, sent, this.ctx.stalls);
    // Whatever writes to the client now (the format through `write`, or a front rendering its own
    // chunks), a full socket pauses this attempt's worker.
    this.sink.feeder = a;
    // Decided once per attempt: how far apart this worker may send this request's frames.
    a.call.spacing = frameSpacing(this.req.framing, worker.streamInterval, budgetBefore);
    this.current = a;
    worker.inFlight++;
    const headers = this.report.attemptStarted(index, rid, worker, replayed, budgetBefore, d.prefill);
    d.started(index > 0, headers);
    a.call.start(index > 0, headers);
    return a;
  }

  /**
   * A continuation's first frame names the weights it runs on; tokens of other weights than the
   * request started on would not be one answer. Nothing of the frame has reached the client.
   */
  acceptFirstFrame(a: AttemptState, weightVersion: string | null): boolean {
    const pinned = this.pin?.weightVersion;
    if (a.index === 0 || weightVersion === null || !pinned || weightVersion === pinned) return true;
    this.ctx.pool.noteWeightVersion(a.worker, weightVersion);
    a.failed({ kind: 'weights_changed', message: `${a.worker.url} now serves weight_version ${weightVersion}, not ${pinned}`, status: 503, evidence: `first chunk of a continuation: weight_version ${weightVersion}` });
    return false;
  }

  onFirstFrame(a: AttemptState): void {
    // The client's head, not yet out, carries the worker's own content type.
    this.sink.offerContentType(a.call.contentType);
    const now = Date.now();
    a.firstFrameAt = now;
    a.dispatch.firstFrame();
    this.report.firstToken(a, now);
  }

  private endAttempt(a: AttemptState, outcome: AttemptOutcome, failure: Failure | null): void {
    this.ctx.pool.noteCached(a.worker, a.promptSent, a.reader.cachedTokens);
    this.report.attemptEnded(a, outcome, failure);
  }
}

export type { AttemptResult };
