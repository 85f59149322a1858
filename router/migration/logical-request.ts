// The migration loop: one logical request, served by one attempt after another until one
// finishes, the client leaves, or migration may not go on. It knows no wire format: the format
// (router/formats/<name>/, through the seam in ../core/types.ts) reads each attempt's frames,
// forwards or rebases them for the client, and builds each attempt's body; the loop picks
// workers, counts budgets, classifies failures into migrate / stop, and reports to telemetry.
import type { Admission, AttemptHost, FormatAttempt, FormatRequest, FormatSession, WireFormat } from '../core/types.ts';
import type { ClientSink } from '../core/client-sink.ts';
import { upstreamRid } from './rid.ts';
import { remainingBudget, remainingMinTokens } from '../core/continuation.ts';
import { BLAMES_WORKER, MIGRATES, classifyTransportFact, needsEvidence, type Failure } from '../core/failure.ts';
import { frameSpacing } from '../upstream/stall-watch.ts';
import { UpstreamCall, type AttemptResult } from '../upstream/attempt.ts';
import type { StallWatch } from '../upstream/stall-watch.ts';
import type { ContinuationPin, WorkerPool } from '../pool/worker-pool.ts';
import type { Placement } from '../pool/policies/policy.ts';
import type { Worker } from '../pool/worker.ts';
import type { InboundTrace, Telemetry, ProgressSource } from '../telemetry.ts';
import type { AttemptOutcome, RequestOutcome } from '../trace/row.ts';
import type { RequestOutput } from '../trace/outputs.ts';
import { finishesBy, type Drainer } from './drain.ts';
import { PD_PEER_GRACE_MS, PrefillLeg, ROOMS, attributeLeg, blamesDecodePeer, bootstrapHost, deadlineFailure, judgeWaiting, prefillFailure, withBootstrap } from './pd.ts';

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

/** Per-attempt state of the loop: the connection, the worker, and what the trace row reports. */
class AttemptState implements AttemptHost {
  readonly startedAt = Date.now();
  firstFrameAt: number | null = null;
  call!: UpstreamCall;
  reader!: FormatAttempt;
  /** P/D: the prefill leg of this attempt (the attempt's `worker` is its decode leg); null: not P/D. */
  pd: PrefillLeg | null = null;
  /** P/D: the leg a failure was attributed to. */
  failedLeg: 'prefill' | 'decode' | null = null;
  pdTimer: NodeJS.Timeout | null = null;
  /**
   * P/D: frames of the decode leg kept until the prefill leg answers, for a format that needs its
   * answer (`FormatAttempt.awaitsPrefill`: SGLang's input logprobs); null: frames go straight on.
   */
  held: Buffer[] | null = null;

  constructor(
    private readonly loop: LogicalRequest,
    readonly index: number,
    readonly rid: string,
    readonly worker: Worker,
    readonly replayed: number,
    readonly budgetBefore: number | null,
    readonly promptSent: number,
    private readonly sink: ClientSink,
    readonly placement: Placement,
  ) {}

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
    return this.loop.acceptFirstFrame(this, weightVersion);
  }

  firstFrame(): void {
    this.loop.onFirstFrame(this);
  }

  finished(): void {
    this.call.end({ kind: 'finished' });
  }

  stopped(): void {
    this.call.abort({ kind: 'finished' });
    this.loop.sendAbort(this);
  }

  failed(failure: Failure): void {
    this.call.abort({ kind: 'failed', failure });
  }
}

interface LoopEnd {
  outcome: RequestOutcome;
  finishReason: string | null;
  lastFailure: Failure | null;
  exhausted: boolean;
}

export class LogicalRequest implements ProgressSource {
  private readonly startedAt = Date.now();
  private readonly out: FormatSession;
  private readonly admission: Admission;
  private readonly exclude = new Set<string>();
  /** P/D: prefill servers whose leg failed this request (its decode workers stay eligible). */
  private readonly prefillExclude = new Set<string>();
  private current: AttemptState | null = null;
  private attempts = 0;
  private cancelled = false;
  /** The client asked the router's abort endpoint to stop this request. */
  private aborted = false;
  /** What a continuation must share with the attempts before it (set by attempt 0's worker). */
  private pin: ContinuationPin | null = null;
  /** Attempt 0's constraint: the model the request names, if it names one (OpenAI's `model`). */
  private readonly firstPin: ContinuationPin | null;
  private firstFailureAt: number | null = null;
  /** The error the client got (its status, and `<type>: <message>`), for the request row; null: none yet. */
  private told: { status: number; text: string } | null = null;
  /** Attempts moved off a draining worker: not failures, not counted against the migration limit. */
  private drained = 0;
  private logicalFirstTokenSeen = false;
  /**
   * Failures before the request's first token that no evidence showed to be their worker's
   * (migration.md, "Blame needs evidence"): each worker's url and what was read. The second ends
   * the request: it fails the same way wherever it goes.
   */
  private readonly unproven: string[] = [];
  private readonly promptIds: number[];
  /** Where each ended attempt's tokens start in the logical output (for the dashboard). */
  private readonly segments: { attempt: number; worker: string; from_token: number; tokens: number }[] = [];

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
    const defaults = ctx.pool.samplingDefaults(format.workers);
    this.admission = format.admit(req, {
      migrationLimit: ctx.settings.migrationLimit,
      migrationMaxSeqLen: ctx.settings.migrationMaxSeqLen,
      workerDefaults: defaults.agreed,
      disputedDefaults: defaults.disputed,
      maxReqLen: ctx.pool.maxReqLen(format.workers),
    });
    this.promptIds = req.prompt.kind === 'input_ids' ? req.prompt.ids : [];
    this.out = format.session(req, { id, budget: this.admission.budget, startedAt: this.startedAt }, sink);
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
    if (!this.ctx.pool.canPick(this.exclude, a.worker.id, pin, this.format.workers)) return false;
    a.failed({ kind: 'drain', message: `${a.worker.url} is draining (${reason}): continued on another worker`, status: 503, evidence: `drain of ${a.worker.url} (${reason})` });
    this.sendAbort(a); // the worker frees the slot now, not when it notices the closed socket
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
    this.sendAbort(a);
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
    if (!a || this.sendAbort(a)) return;
    // The worker serves no abort endpoint (an older vLLM): closing the attempt's connection is its
    // abort, and the client gets the abort answer from the router (the loop's `aborted` branch).
    a.call.abort({ kind: 'failed', failure: { kind: 'client_cancel', message: 'aborted by the client: the worker serves no abort endpoint, so its connection was closed', status: 499, evidence: `abort requested; ${a.worker.url} serves no abort endpoint (probed)` } });
  }

  /**
   * The worker's abort call for one attempt, best effort (the worker may be gone). False when the
   * worker serves none: only closing the attempt's connection aborts it there.
   */
  sendAbort(a: AttemptState, worker: Worker = a.worker): boolean {
    const call = this.format.abortRequest(a.rid, worker.abortPath);
    if (call === null) return false;
    const { path, body } = call;
    void worker.pool
      .request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(2000) })
      .then((r) => r.body.dump(), () => undefined);
    return true;
  }

  private countHeaders(): Record<string, string> {
    return { 'x-baton-attempts': String(this.attempts), 'x-baton-migrations': String(Math.max(0, this.attempts - 1)) };
  }

  async run(): Promise<void> {
    const { telemetry } = this.ctx;
    telemetry.requestAdmitted(this, {
      request_id: this.id,
      admitted: this.admission.admitted,
      reason: this.admission.reason,
      stream: this.req.stream,
      prompt_tokens: this.req.promptLength ?? 0,
      max_new_tokens: this.out.budget,
      format: this.format.name,
      ...(this.front ? { front: this.front } : {}),
    });
    let end: LoopEnd;
    this.ctx.drainer?.live.add(this);
    try {
      end = await this.attemptLoop();
    } catch (err) {
      // A bug must still end the request once: the client gets an error, the row is written.
      this.current?.call.abort({ kind: 'failed', failure: { kind: 'protocol', message: 'internal error', status: 500 } });
      if (this.current?.pd) this.endPrefillLeg(this.current, this.current.pd);
      const lastFailure: Failure = { kind: 'protocol', message: `internal error: ${(err as Error).message}`, status: 500 };
      this.failSink(500, lastFailure.message, 'internal_error');
      end = { outcome: 'failed', finishReason: null, lastFailure, exhausted: false };
    }
    this.ctx.drainer?.live.delete(this);
    const { outcome, finishReason, lastFailure, exhausted } = end;

    const ended = Date.now();
    const cached = this.out.cachedTokens;
    telemetry.requestFinished(this, {
      kind: 'request',
      request_id: this.id,
      attempts: this.attempts,
      migrations: Math.max(0, this.attempts - 1),
      admitted: this.admission.admitted,
      admission_reason: this.admission.reason,
      prompt_tokens: this.req.promptLength ?? 0,
      completion_tokens: this.out.ids.length,
      cached_tokens: cached === null ? null : Math.min(cached, this.req.promptLength ?? 0),
      finish_reason: outcome === 'finished' ? finishReason : null,
      outcome,
      duration_ms: ended - this.startedAt,
      started_at: this.startedAt,
      ended_at: ended,
      stream: this.req.stream,
      max_new_tokens: this.out.budget,
      error: outcome === 'failed' && lastFailure ? lastFailure.message : outcome === 'cancelled' ? (this.sink.cut?.message ?? null) : null,
      client_error: outcome === 'failed' ? (this.told?.text ?? null) : null,
      client_status: outcome === 'failed' ? (this.told?.status ?? null) : null,
      // Filled in by telemetry when the request is traced.
      trace_id: null,
      format: this.format.name,
    }, this.firstFailureAt, exhausted, this.keptOutput());
  }

  /**
   * What the outputs ring keeps of this request, in arrays of its own. Handing the ring the
   * request's own arrays (`out.ids`, `segments`) made the whole object graph of every W1 request
   * outlive its scavenges: a promotion rate of ~75 % against ~20 %, 3x the mark-compacts, 72 MiB
   * of survivors against 11 MiB (docs/benchmarks.md, "The outputs ring keeps copies").
   * Measured, not traced through V8; the likely path is allocation-site pretenuring:
   * arrays that outlive their request teach V8 to allocate that initializer's objects (folded
   * with the request's others) in the old generation, where a dead object keeps the young ones it
   * points to alive until the next mark-compact. The copies are allocated here, apart from the
   * request's own objects (the OpenAI session's token texts are its own array too).
   */
  private keptOutput(): RequestOutput {
    const kept: RequestOutput = { request_id: this.id, output_ids: this.out.ids.slice(), attempts: this.segments.map((s) => ({ ...s })) };
    const texts = this.out.tokenTexts?.() ?? null;
    if (texts !== null) kept.token_text = texts.slice();
    const chat = this.out.chatView?.() ?? null;
    if (chat !== null) kept.chat = chat;
    return kept;
  }

  /** Attempts until one finishes, the client leaves, or migration may not go on. */
  private async attemptLoop(): Promise<LoopEnd> {
    const { telemetry } = this.ctx;
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
      const worker = this.ctx.pool.pick(this.exclude, pin, this.format.workers, placement);
      if (!worker) {
        const message = lastFailure
          ? `no worker left that can continue this request exactly after: ${lastFailure.message} (${this.ctx.pool.whyNoContinuation(this.exclude, pin ?? { modelPath: null, weightVersion: null }, this.format.workers)})`
          : `no healthy worker serves format ${this.format.workers}`;
        if (lastFailure) exhausted = true;
        this.failSink(503, message, lastFailure ? 'migration_exhausted' : 'no_worker');
        break;
      }
      let prefill: Worker | null = null;
      if (worker.pdRole === 'decode') {
        // A decode worker's attempt is a pair: its prefill leg by the policy, on the same placement.
        prefill = this.ctx.pool.pickPrefill(this.prefillExclude, pin, placement);
        if (!prefill) {
          if (lastFailure) exhausted = true;
          this.sink.fail(503, `no prefill server available for a pair with decode ${worker.url}${lastFailure ? ` after: ${lastFailure.message}` : ''}`, lastFailure ? 'migration_exhausted' : 'no_worker');
          break;
        }
      }
      if (pending) {
        const replayed = this.out.ids.length;
        telemetry.migrated(this.id, pending.from, worker.url, replayed, this.attempts, pending.kind, pending.ongoing, replayed);
        pending = null;
      }
      const a = this.startAttempt(worker, placement, prefill);
      let result = await a.call.result;
      // A finish the format held for the frame after it (vLLM's usage chunk) is the answer, whatever
      // ended the call before that frame came: the answer is whole.
      if ((result.kind === 'failed' || result.kind === 'transport') && a.reader.finishHeld?.() === true) result = FINISHED;
      this.current = null;
      worker.inFlight--;
      if (a.pd !== null) this.endPrefillLeg(a, a.pd);
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

      // What the transport saw is classified here, by the loop's table (failure.ts).
      let failure = result.kind === 'transport' ? classifyTransportFact(result.fact) : result.failure;
      if (a.pd !== null && a.failedLeg === null) {
        // Which leg failed (pd.ts attributeLeg): a decode waiting on a dead prefill is innocent.
        const att = attributeLeg(failure, a.pd, a.firstFrameAt !== null);
        failure = att.failure;
        a.failedLeg = att.leg;
      }
      lastFailure = failure;
      if (this.aborted && failure.kind !== 'worker_abort') {
        // The worker failed before its abort frame came: the client still gets its abort.
        this.endAttempt(a, 'failed', failure);
        continue;
      }
      if (!MIGRATES[failure.kind]) {
        // The request's own fault (4xx, a refusal): the client gets it as the worker wrote it.
        this.endAttempt(a, 'failed', failure);
        this.told = { status: failure.status, text: `${failure.kind}: ${failure.message}` };
        this.out.passThrough(reader, failure);
        break;
      }
      if (BLAMES_WORKER[failure.kind]) await this.judgeBlame(a, failure);
      if (a.pd !== null && a.failedLeg === 'prefill') {
        // The prefill leg's: that server is left out of this request's pairs, and benched when it
        // failed (a slow leg moved by a timeout is not); the decode worker is neither benched nor
        // excluded.
        if (failure.kind === 'prefill_failed') this.ctx.pool.blame(a.pd.worker, a.pd.failure?.kind === 'connect', 'prefill_failed', 0);
        this.prefillExclude.add(a.pd.worker.id);
      } else this.exclude.add(worker.id);
      if (failure.kind === 'drain') this.drained++;
      else this.firstFailureAt ??= Date.now();

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

      const refusal = this.migrationRefusal();
      if (refusal !== null) {
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

  /**
   * A failure that blames its worker. Before the request's first token, a broken stream or a 500
   * is the worker's only with evidence (failure.ts needsEvidence; the pool's evidenceAgainst):
   * without it the worker is neither benched nor counted in its breaker, and the attempt's row
   * says what was read.
   */
  private async judgeBlame(a: AttemptState, failure: Failure): Promise<void> {
    const tokens = this.out.ids.length;
    if (!needsEvidence(failure, tokens)) {
      this.ctx.pool.blame(a.worker, failure.kind === 'connect', failure.kind, tokens);
      return;
    }
    const verdict = await this.ctx.pool.evidenceAgainst(a.worker, a.startedAt);
    failure.evidence = `${failure.evidence ?? failure.kind}; before any token, ${verdict.evidence}`;
    if (verdict.blame) this.ctx.pool.blame(a.worker, verdict.dead, failure.kind, 0);
    else this.unproven.push(`${a.worker.url}: ${failure.message} (${verdict.evidence})`);
  }

  /** Why the request may not continue after a migratable failure, or null when it may. */
  private migrationRefusal(): { message: string; type: string; exhausted: boolean; status?: number } | null {
    if (!this.admission.admitted) {
      return { message: `worker failed and the request is not migratable (${this.admission.reason})`, type: 'not_migratable', exhausted: false };
    }
    if (this.unproven.length >= 2) {
      // Two workers that showed no fault failed this request alike, before any token: the
      // failure follows the request. 500, as SGLang itself answers a unary request whose
      // handler raised (Starlette's ServerErrorMiddleware); no worker is benched.
      return {
        message: `the request failed the same way on ${this.unproven.length} workers before any token, and none of them showed a fault, so no worker was benched: ${this.unproven.join('; ')}`,
        type: 'request_failed_on_healthy_workers',
        exhausted: false,
        status: 500,
      };
    }
    if (this.attempts - this.drained > this.ctx.settings.migrationLimit) {
      return { message: `migration exhausted after ${this.attempts} attempts (limit ${this.ctx.settings.migrationLimit})`, type: 'migration_exhausted', exhausted: true };
    }
    const maxSeq = this.ctx.settings.migrationMaxSeqLen;
    if (maxSeq !== null && this.promptIds.length + this.out.ids.length > maxSeq) {
      this.ctx.telemetry.maxSeqLenExceeded();
      return { message: `migration stopped: prompt + replayed tokens exceed --migration-max-seq-len ${maxSeq}`, type: 'migration_max_seq_len', exhausted: false };
    }
    if (this.out.sawText && this.out.ids.length > 0) {
      return { message: 'migration stopped: the worker returned text, which cannot be continued token-exactly', type: 'not_migratable', exhausted: false };
    }
    return null;
  }

  /** The router's own error, in band if the stream has started, and what the request row says the client got. */
  private failSink(status: number, message: string, type: string): void {
    this.told = { status, text: `${type}: ${message}` };
    this.sink.fail(status, message, type);
  }

  /** The router's own error: in band on a stream (the format's error frame), else a JSON error with `status`. */
  private failClient(status: number, message: string, type: string): void {
    this.told = { status, text: `${type}: ${message}` };
    if (this.sink.streaming) this.sink.endStreamWithError(this.format.errors.frame(status, message, type));
    else this.sink.fail(status, message, type);
  }

  /**
   * The attempt ended: its prefill leg ends too (aborted at the prefill server if it still waits),
   * and its room is no longer in flight (pd.ts RoomIssuer keeps it a while longer).
   */
  private endPrefillLeg(a: AttemptState, leg: PrefillLeg): void {
    if (a.pdTimer !== null) clearTimeout(a.pdTimer);
    a.pdTimer = null;
    const waiting = leg.state === 'waiting';
    leg.stop();
    if (waiting) this.sendAbort(a, leg.worker);
    ROOMS.release(leg.room);
  }

  /**
   * The prefill leg ended. Failed before the decode's first token: the attempt is the prefill leg's
   * failure, unless the prefill server says its decode peer is gone (`graceOver`: that was waited on).
   */
  onPrefillEnd(a: AttemptState, leg: PrefillLeg, graceOver = false): void {
    if (leg.state === 'done' && a.held !== null) {
      // Its answer first, then the decode frames that waited for it, then the decode's end if it came.
      const frames = a.held;
      a.held = null;
      a.reader.prefillAnswered?.(leg.answerMeta);
      for (const f of frames) if (!a.call.ended) a.reader.onFrame(f, 0, f.length);
      a.call.release();
      return;
    }
    if (leg.state !== 'failed' || leg.failure === null || a.call.ended || a.firstFrameAt !== null) return;
    if (!graceOver && blamesDecodePeer(leg.failure)) {
      // The decode leg's own connection tells whether the decode is gone: reset or refused, it is
      // the decode's failure (attributeLeg); its in-band "Decode transfer failed" leaves it to the
      // prefill, as does silence past the grace. The first-token deadline gives way to the grace.
      if (a.pdTimer !== null) clearTimeout(a.pdTimer);
      a.pdTimer = setTimeout(onPeerGraceOver, PD_PEER_GRACE_MS, this, a, leg);
      return;
    }
    a.failedLeg = 'prefill';
    // A request's own refusal (a 4xx) is passed on as the prefill server wrote it.
    a.failed(MIGRATES[leg.failure.kind] ? prefillFailure(leg) : leg.failure);
    this.sendAbort(a); // the stranded decode attempt: freed at the decode worker now
  }

  /**
   * The P/D first-token deadline passed (docs/pd.md). A decode waiting after its prefill leg
   * answered moves on, blaming nobody. A prefill leg still unanswered is judged by evidence about
   * its server, never by the wait alone (pd.ts judgeWaiting): a faulty server's leg failed (a new
   * pair); a server working through its queue keeps the attempt, judged again a deadline later.
   */
  onPdDeadline(a: AttemptState): void {
    a.pdTimer = null;
    const leg = a.pd;
    if (leg === null || a.call.ended || a.firstFrameAt !== null) return;
    const ms = this.ctx.settings.pdFirstTokenTimeoutMs ?? 0;
    if (leg.state === 'done') {
      a.failedLeg = 'decode';
      a.failed(deadlineFailure(leg, ms));
      this.sendAbort(a);
      return;
    }
    if (leg.state !== 'waiting') return; // its failure is onPrefillEnd's
    void this.ctx.pool.waitingEvidence(leg.worker).then((evidence) => {
      // The attempt may have moved on while the server was read (its token came, a leg failed).
      if (a.call.ended || a.firstFrameAt !== null || leg.state !== 'waiting' || a.pdTimer !== null) return;
      const verdict = judgeWaiting(evidence);
      if (!verdict.blame) {
        a.pdTimer = setTimeout(onPdDeadline, ms, this, a);
        return;
      }
      a.failedLeg = 'prefill';
      a.failed(deadlineFailure(leg, ms, verdict));
      this.sendAbort(a);
    });
  }

  private startAttempt(worker: Worker, placement: Placement, prefill: Worker | null = null): AttemptState {
    const index = this.attempts++;
    const replayedIds = this.out.ids;
    const replayed = replayedIds.length;
    const rid = upstreamRid(this.id, index);
    const budget = this.out.budget;
    const budgetBefore = budget === null ? null : remainingBudget(budget, replayed);
    const continues = index > 0 && this.admission.admitted && budget !== null;
    const remaining = continues ? remainingBudget(budget, replayed) : null;
    const spec = {
      index,
      rid,
      replayed: index > 0 ? replayedIds.slice() : [],
      remaining,
      minTokens: remaining === null ? 0 : remainingMinTokens(this.admission.minNewTokens, replayed, remaining),
      prefillLeg: prefill !== null,
    };
    let body = this.format.attemptBody(this.req, this.promptIds, spec, this.admission.minNewTokens);
    const promptSent = (this.req.promptLength ?? 0) + replayed;
    const a = new AttemptState(this, index, rid, worker, replayed, budgetBefore, promptSent, this.sink, placement);
    if (prefill !== null) {
      // The same body to both legs, with a room no attempt used before (pd.ts ROOMS).
      const room = ROOMS.issue();
      try {
        body = withBootstrap(body, bootstrapHost(prefill), prefill.bootstrapPort, room);
      } catch (err) {
        ROOMS.release(room);
        throw err;
      }
      a.pd = new PrefillLeg(prefill, this.format.generatePath, body, room, onPrefillEnd.bind(null, this, a));
    }
    // Attempt 0's frames may go to a streaming client untouched; a continuation's are rebased.
    // The counts travel only with a unary answer (a stream's headers are long gone by its end).
    a.reader = this.out.attempt(spec, worker, a, index === 0 && this.sink.streaming, this.sink.streaming ? NO_HEADERS : this.countHeaders());
    if (a.pd !== null && a.reader.awaitsPrefill === true) {
      // The gateway too reads the prefill's answer before the decode's stream when it merges
      // logprobs (pd_router.rs execute_dual_dispatch_internal). The check costs the held path only.
      a.held = [];
      a.call = new UpstreamCall(worker, this.format.generatePath, body, (buf, start, end) => {
        if (a.held !== null) a.held.push(Buffer.from(buf.subarray(start, end)));
        else a.reader.onFrame(buf, start, end);
      }, this.ctx.stalls);
      a.call.hold();
    } else {
      a.call = new UpstreamCall(worker, this.format.generatePath, body, (buf, start, end) => a.reader.onFrame(buf, start, end), this.ctx.stalls);
    }
    // Whatever writes to the client now (the format through `write`, or a front rendering its own
    // chunks), a full socket pauses this attempt's worker.
    this.sink.feeder = a;
    // Decided once per attempt: how far apart this worker may send this request's frames.
    a.call.spacing = frameSpacing(this.req.framing, worker.streamInterval, budgetBefore);
    this.current = a;
    worker.inFlight++;
    const headers = this.ctx.telemetry.attemptStarted({ request_id: this.id, attempt: index, rid, worker: worker.url, replayed_tokens: replayed, budget_before: budgetBefore, ...(prefill !== null ? { prefill_worker: prefill.url } : {}) });
    if (a.pd !== null) {
      a.pd.start(index > 0, headers);
      const ms = this.ctx.settings.pdFirstTokenTimeoutMs ?? 0;
      if (ms > 0) a.pdTimer = setTimeout(onPdDeadline, ms, this, a);
    }
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
    if (a.pdTimer !== null) {
      clearTimeout(a.pdTimer);
      a.pdTimer = null;
    }
    const logical = this.logicalFirstTokenSeen ? null : now - this.startedAt;
    this.logicalFirstTokenSeen = true;
    this.ctx.telemetry.firstToken(this.id, a.index, now - a.startedAt, logical);
  }

  private endAttempt(a: AttemptState, outcome: AttemptOutcome, failure: Failure | null): void {
    const tokens = a.reader.tokens;
    this.ctx.pool.noteCached(a.worker, a.promptSent, a.reader.cachedTokens);
    this.segments.push({ attempt: a.index, worker: a.worker.url, from_token: a.replayed, tokens });
    this.ctx.telemetry.attemptEnded({
      kind: 'attempt',
      request_id: this.id,
      attempt: a.index,
      rid: a.rid,
      worker: a.worker.url,
      started_at: a.startedAt,
      ended_at: Date.now(),
      ttft_ms: a.firstFrameAt === null ? null : a.firstFrameAt - a.startedAt,
      prompt_tokens_sent: a.promptSent,
      replayed_tokens: a.replayed,
      tokens,
      budget_before: a.budgetBefore,
      budget_after: a.budgetBefore === null ? null : Math.max(0, a.budgetBefore - tokens),
      cached_tokens: a.reader.cachedTokens,
      placement_prefix: a.placement.prefix,
      placement_reason: a.placement.reason,
      outcome,
      error_kind: failure?.kind ?? null,
      error: failure?.message ?? null,
      error_evidence: failure?.evidence ?? null,
      finish_reason: outcome === 'finished' ? a.reader.finishReason() : null,
      trace_id: null,
      format: this.format.name,
      ...(a.pd !== null ? { prefill_worker: a.pd.worker.url, decode_worker: a.worker.url, bootstrap_room: a.pd.room.toString(), prefill_ended_at: a.pd.ownEnd, ...(a.failedLeg !== null ? { failed_leg: a.failedLeg } : {}) } : {}),
    });
  }
}

function onPrefillEnd(loop: LogicalRequest, a: AttemptState, leg: PrefillLeg): void {
  loop.onPrefillEnd(a, leg);
}

function onPeerGraceOver(loop: LogicalRequest, a: AttemptState, leg: PrefillLeg): void {
  a.pdTimer = null;
  loop.onPrefillEnd(a, leg, true);
}

function onPdDeadline(loop: LogicalRequest, a: AttemptState): void {
  loop.onPdDeadline(a);
}

export type { AttemptResult };
