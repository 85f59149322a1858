// The migration loop: one logical request, served by one attempt after another until one
// finishes, the client leaves, or migration may not go on. Data flows one way: frames from the
// current attempt are absorbed, rendered for the client (untouched bytes where nothing needs
// rebasing) and, on a failure, the output so far becomes the replay of the next attempt.
import type { GenerateRequest, JsonObject } from '../format/sglang/request.ts';
import { admit, type Admission } from './admission.ts';
import { upstreamRid } from './rid.ts';
import { VALUE_ERROR_TYPE } from '../sglang-api/errors.ts';
import { buildContinuation, buildFirstAttempt, remainingBudget } from './continuation.ts';
import { BLAMES_WORKER, MIGRATES, classifyAbort, classifyInBandError, type Failure } from './failure.ts';
import { AttemptOutput, LogicalOutput, finishReasonOf } from '../format/sglang/stitch.ts';
import { FrameKind, classifyFrame, frameBytes, framePayload, scanCompletionTokens, scanOutputIds } from '../format/sglang/sse.ts';
import type { ClientSink } from '../format/sglang/client-sink.ts';
import { UpstreamCall, type AttemptResult } from '../upstream/attempt.ts';
import type { StallWatch } from '../upstream/stall-watch.ts';
import type { ContinuationPin, WorkerPool } from '../pool/worker-pool.ts';
import type { Worker } from '../pool/worker.ts';
import type { InboundTrace, Telemetry, ProgressSource } from '../telemetry.ts';
import type { AttemptOutcome, RequestOutcome } from '../trace/row.ts';

export interface MigrationSettings {
  migrationLimit: number;
  migrationMaxSeqLen: number | null;
}

export interface LoopContext {
  settings: MigrationSettings;
  pool: WorkerPool;
  telemetry: Telemetry;
  stalls: StallWatch;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Per-attempt state beyond the connection: what the loop needs to stitch and to report. */
class AttemptState {
  readonly output: AttemptOutput;
  readonly startedAt = Date.now();
  firstFrameAt: number | null = null;
  frames = 0;
  /** Cumulative worker, attempt 0: frames are not parsed until needed; the last is kept raw. */
  lastRaw: Buffer | null = null;
  lastChunk: JsonObject | null = null;
  /** A failure found in-band, with the raw frame to pass through when it is the client's. */
  passThroughFrame: Buffer | null = null;
  /** The parsed chunk of that frame (an abort finish), to rebase on a continuation. */
  passThroughChunk: JsonObject | null = null;
  /**
   * Incremental worker, frames forwarded untouched: running frames after the first need only their
   * new ids, read by a byte scan (sse.ts scanOutputIds). Off once a frame carries anything else
   * the attempt must keep (text, logprob lists).
   */
  scanIds = false;
  call!: UpstreamCall;
  /** `"<upstream rid>"` as the worker writes it in meta_info.id (rid.ts: plain ASCII). */
  readonly ridJson: Buffer;

  constructor(
    readonly index: number,
    readonly rid: string,
    readonly worker: Worker,
    readonly replayed: number,
    readonly budgetBefore: number | null,
    readonly promptSent: number,
    /** Frames may be sent to a streaming client as the worker wrote them. */
    readonly forwardRaw: boolean,
    /** Running frames need not be parsed (cumulative worker): parse the last one when needed. */
    readonly lazy: boolean,
    /** `"<logical id>"`: what the client must see in meta_info.id. */
    readonly idJson: Buffer,
  ) {
    this.output = new AttemptOutput(worker.incremental, replayed);
    this.ridJson = Buffer.from(JSON.stringify(rid));
  }

  /**
   * A frame forwarded as the worker wrote it, with the upstream rid in meta_info.id replaced by
   * the client's id: the one rewrite an untouched frame needs. The rid's bytes are unique (a
   * 16-hex nonce), and meta_info.id is written before finish_reason, early in the frame.
   */
  swapId(frame: Buffer): Buffer {
    const k = frame.indexOf(this.ridJson);
    if (k < 0) return frame;
    return Buffer.concat([frame.subarray(0, k), this.idJson, frame.subarray(k + this.ridJson.length)]);
  }

  /** Bring `output` up to date with the last raw frame (lazy mode). */
  materialize(): void {
    if (this.lastRaw === null) return;
    const raw = this.lastRaw;
    this.lastRaw = null;
    const chunk = JSON.parse(framePayload(raw, 0, raw.length)) as JsonObject;
    this.output.absorb(chunk);
    this.lastChunk = chunk;
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
  private readonly out: LogicalOutput;
  private readonly admission: Admission;
  private readonly exclude = new Set<string>();
  private current: AttemptState | null = null;
  private attempts = 0;
  private cancelled = false;
  /** The client asked the router's /abort_request to stop this request. */
  private aborted = false;
  /** The last chunk any attempt sent: the shape of an answer the router finishes itself. */
  private template: JsonObject | null = null;
  /** What a continuation must share with the attempts before it (set by attempt 0's worker). */
  private pin: ContinuationPin | null = null;
  private firstFailureAt: number | null = null;
  private logicalFirstTokenSeen = false;
  private readonly promptIds: number[];
  private readonly idJson: Buffer;
  /** Where each ended attempt's tokens start in the logical output (for the dashboard). */
  private readonly segments: { attempt: number; worker: string; from_token: number; tokens: number }[] = [];

  constructor(
    private readonly ctx: LoopContext,
    private readonly req: GenerateRequest,
    readonly id: string,
    private readonly sink: ClientSink,
    readonly trace: InboundTrace | null = null,
  ) {
    const defaults = ctx.pool.samplingDefaults();
    this.admission = admit(req, {
      migrationLimit: ctx.settings.migrationLimit,
      migrationMaxSeqLen: ctx.settings.migrationMaxSeqLen,
      workerDefaults: defaults.agreed,
      disputedDefaults: defaults.disputed,
      maxReqLen: ctx.pool.maxReqLen(),
    });
    this.promptIds = req.prompt.kind === 'input_ids' ? req.prompt.ids : [];
    this.idJson = Buffer.from(JSON.stringify(id));
    const budget = this.admission.budget;
    this.out = new LogicalOutput({ id, promptTokens: req.promptLength, budget, startedAt: this.startedAt, clientIncremental: false });
  }

  attemptIndex(): number {
    return Math.max(0, this.attempts - 1);
  }

  progress(): { tokens: number; completion: number } {
    const a = this.current;
    if (!a) return { tokens: 0, completion: this.out.ids.length };
    // A scanned attempt's counter is stale until its last frame; its ids are not.
    let tokens = Math.max(a.output.completionTokens, a.scanIds ? a.output.ids.length : 0);
    if (a.lazy && a.lastRaw) tokens = Math.max(tokens, scanCompletionTokens(a.lastRaw, 0, a.lastRaw.length));
    return { tokens, completion: a.replayed + tokens };
  }

  /** The client went away: abort the upstream attempt at once; never migrate. */
  cancel(): void {
    this.cancelled = true;
    const a = this.current;
    if (!a) return;
    a.call.abort({ kind: 'cancelled' });
    // Closing the connection makes SGLang abort the request; say it explicitly too, so the
    // worker frees the slot even if it has not yet noticed the closed socket.
    sendAbort(a);
  }

  /**
   * The client called the router's /abort_request for this request: SGLang's own abort, sent to
   * the worker that holds the current attempt (by its upstream rid, which no other request's rid
   * starts with). The worker ends the stream with its abort finish, which reaches the client as
   * SGLang wrote it (rebased); an abort is never undone by a migration.
   */
  abort(): void {
    if (this.aborted || this.cancelled) return;
    this.aborted = true;
    const a = this.current;
    if (a) sendAbort(a);
  }

  async run(): Promise<void> {
    const { telemetry } = this.ctx;
    telemetry.requestAdmitted(this, {
      request_id: this.id,
      admitted: this.admission.admitted,
      reason: this.admission.reason,
      stream: this.req.stream,
      prompt_tokens: this.req.promptLength ?? 0,
      max_new_tokens: this.out.info.budget,
    });
    let end: LoopEnd;
    try {
      end = await this.attemptLoop();
    } catch (err) {
      // A bug must still end the request once: the client gets an error, the row is written.
      this.current?.call.abort({ kind: 'failed', failure: { kind: 'protocol', message: 'internal error', status: 500 } });
      const lastFailure: Failure = { kind: 'protocol', message: `internal error: ${(err as Error).message}`, status: 500 };
      this.sink.fail(500, lastFailure.message, 'internal_error');
      end = { outcome: 'failed', finishReason: null, lastFailure, exhausted: false };
    }
    const { outcome, finishReason, lastFailure, exhausted } = end;

    const ended = Date.now();
    telemetry.requestFinished(this, {
      kind: 'request',
      request_id: this.id,
      attempts: this.attempts,
      migrations: Math.max(0, this.attempts - 1),
      admitted: this.admission.admitted,
      admission_reason: this.admission.reason,
      prompt_tokens: this.req.promptLength ?? 0,
      completion_tokens: this.out.ids.length,
      cached_tokens: this.out.cachedTokens === null ? null : Math.min(this.out.cachedTokens, this.req.promptLength ?? 0),
      finish_reason: outcome === 'finished' ? finishReason : null,
      outcome,
      duration_ms: ended - this.startedAt,
      started_at: this.startedAt,
      ended_at: ended,
      stream: this.req.stream,
      max_new_tokens: this.out.info.budget,
      error: outcome === 'failed' && lastFailure ? lastFailure.message : null,
    }, this.firstFailureAt, exhausted, { request_id: this.id, output_ids: this.out.ids, attempts: this.segments });
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
        // Aborted between attempts (or the worker died before its abort frame): end as SGLang's
        // /abort_request ends a request, without another worker call.
        this.finishAborted();
        outcome = 'finished';
        finishReason = 'abort';
        break;
      }
      const pin = this.attempts > 0 ? this.pin : null;
      const worker = this.ctx.pool.pick(this.exclude, pin);
      if (!worker) {
        const message = lastFailure
          ? `no worker left that can continue this request exactly after: ${lastFailure.message} (${this.ctx.pool.whyNoContinuation(this.exclude, pin ?? { modelPath: null, weightVersion: null })})`
          : 'no healthy worker available';
        if (lastFailure) exhausted = true;
        this.sink.fail(503, message, lastFailure ? 'migration_exhausted' : 'no_worker');
        break;
      }
      if (pending) {
        const replayed = this.out.ids.length;
        telemetry.migrated(this.id, pending.from, worker.url, replayed, this.attempts, pending.kind, pending.ongoing, replayed);
        pending = null;
      }
      const a = this.startAttempt(worker);
      const result = await a.call.result;
      this.current = null;
      worker.inFlight--;
      if (a.index === 0 && worker.incremental === null) this.out.info.clientIncremental = a.output.incremental === true;
      if (a.lazy) {
        try {
          a.materialize();
        } catch {
          // A whole frame that is not JSON: its tokens were never forwarded as understood.
        }
      }
      if (a.output.weightVersion !== null) this.ctx.pool.noteWeightVersion(worker, a.output.weightVersion);
      // The model every continuation must share is attempt 0's; the weights are those of the first
      // attempt that produced tokens (as its meta_info named them, else as probed): tokens of two
      // sets of weights are not one answer, while a failure before any token binds nothing.
      this.pin ??= { modelPath: worker.modelPath, weightVersion: null };
      if (this.pin.weightVersion === null && a.output.ids.length > 0) this.pin.weightVersion = a.output.weightVersion ?? worker.weightVersion;

      if (result.kind === 'finished') {
        this.ctx.pool.credit(worker);
        this.out.commit(a.output);
        finishReason = finishReasonType(a.lastChunk);
        this.endAttempt(a, 'finished', null);
        outcome = 'finished';
        break;
      }
      if (result.kind === 'cancelled') {
        this.out.commit(a.output);
        this.endAttempt(a, 'cancelled', { kind: 'client_cancel', message: 'client disconnected', status: 499 });
        outcome = 'cancelled';
        break;
      }

      const failure = result.failure;
      lastFailure = failure;
      this.out.commit(a.output);
      if (this.aborted && failure.kind !== 'worker_abort') {
        // The worker failed before its abort frame came: the client still gets its abort.
        this.endAttempt(a, 'failed', failure);
        continue;
      }
      if (!MIGRATES[failure.kind]) {
        // The request's own fault (4xx, validation): the client gets it as the worker wrote it.
        this.endAttempt(a, 'failed', failure);
        this.passThrough(a, failure);
        break;
      }
      if (BLAMES_WORKER[failure.kind]) this.ctx.pool.blame(worker, failure.kind === 'connect');
      this.exclude.add(worker.id);
      this.firstFailureAt ??= Date.now();

      const budget = this.out.info.budget;
      if (a.lastChunk !== null) this.template = a.lastChunk;
      if (this.admission.admitted && budget !== null && remainingBudget(budget, this.out.ids.length) === 0
        && this.template !== null && (this.out.ids.length > 0 || !this.req.returnLogprob)) {
        // Every token of the budget was delivered before the failure: finish here, no worker call,
        // in the shape of the last chunk a worker sent. (A zero-token request that no worker has
        // answered yet goes on to another worker: only a worker can say what its answer carries;
        // nor can the router compute prompt logprobs that a zero-token request asked for.)
        this.endAttempt(a, 'budget_exhausted', failure);
        this.finishLocally(a);
        finishReason = 'length';
        outcome = 'finished';
        break;
      }
      this.endAttempt(a, 'failed', failure);

      const refusal = this.migrationRefusal();
      if (refusal !== null) {
        exhausted = refusal.exhausted;
        this.sink.fail(failure.status >= 500 ? failure.status : 502, `${refusal.message}: ${failure.message}`, refusal.type);
        break;
      }
      // Counted when the continuation starts, so the event can name where it went.
      pending = { from: worker.url, kind: failure.kind, ongoing: this.out.ids.length > 0 };
    }
    return { outcome, finishReason, lastFailure, exhausted };
  }

  /** Why the request may not continue after a migratable failure, or null when it may. */
  private migrationRefusal(): { message: string; type: string; exhausted: boolean } | null {
    if (!this.admission.admitted) {
      return { message: `worker failed and the request is not migratable (${this.admission.reason})`, type: 'not_migratable', exhausted: false };
    }
    if (this.attempts > this.ctx.settings.migrationLimit) {
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

  private startAttempt(worker: Worker): AttemptState {
    const index = this.attempts++;
    const replayed = this.out.ids.length;
    const rid = upstreamRid(this.id, index);
    const budget = this.out.info.budget;
    const budgetBefore = budget === null ? null : remainingBudget(budget, replayed);
    const body = index === 0 || !this.admission.admitted || budget === null
      ? buildFirstAttempt(this.req, rid)
      : buildContinuation(this.req, this.promptIds, this.out.ids, budget, rid, this.admission.minNewTokens);
    const promptSent = (this.req.promptLength ?? 0) + replayed;
    if (index === 0) this.out.info.clientIncremental = worker.incremental === true;
    const forwardRaw = index === 0 && this.sink.streaming;
    const lazy = index === 0 && worker.incremental === false;
    const a = new AttemptState(index, rid, worker, replayed, budgetBefore, promptSent, forwardRaw, lazy, this.idJson);
    a.scanIds = forwardRaw && worker.incremental === true && !this.req.returnLogprob;
    a.call = new UpstreamCall(worker, JSON.stringify(body), (buf, start, end) => this.onFrame(a, buf, start, end), this.ctx.stalls);
    this.current = a;
    worker.inFlight++;
    const headers = this.ctx.telemetry.attemptStarted({ request_id: this.id, attempt: index, rid, worker: worker.url, replayed_tokens: replayed, budget_before: budgetBefore });
    a.call.start(index > 0, headers);
    return a;
  }

  // --- the per-frame path ---------------------------------------------------------------

  private onFrame(a: AttemptState, buf: Buffer, start: number, end: number): void {
    try {
      this.handleFrame(a, buf, start, end);
    } catch (err) {
      // A frame the router cannot handle must neither crash the process nor hang the request.
      a.call.abort({ kind: 'failed', failure: { kind: 'protocol', message: `router could not handle a frame: ${(err as Error).message}`, status: 502 } });
    }
  }

  private handleFrame(a: AttemptState, buf: Buffer, start: number, end: number): void {
    if (a.call.ended) return;
    const kind = classifyFrame(buf, start, end);
    if (kind === FrameKind.Ignored) return;
    if (kind === FrameKind.Done) {
      a.call.end({ kind: 'failed', failure: { kind: 'stream_broken', message: 'stream ended ([DONE]) without a finished chunk', status: 502 } });
      return;
    }
    if (kind === FrameKind.Running && a.lazy) {
      if (a.frames++ === 0) this.onFirstFrame(a);
      // One view of the frame serves both: kept as the last raw frame and forwarded.
      const raw = frameBytes(buf, start, end);
      a.lastRaw = raw;
      if (a.forwardRaw) this.forward(a, raw);
      return;
    }
    if (kind === FrameKind.Running && a.scanIds && a.frames > 0 && scanOutputIds(buf, start, end, a.output.ids)) {
      a.frames++;
      this.forward(a, frameBytes(buf, start, end));
      return;
    }
    this.onParsedFrame(a, buf, start, end);
  }

  private onParsedFrame(a: AttemptState, buf: Buffer, start: number, end: number): void {
    let chunk: unknown;
    try {
      chunk = JSON.parse(framePayload(buf, start, end));
    } catch {
      a.call.abort({ kind: 'failed', failure: { kind: 'protocol', message: 'worker sent a frame that is not JSON', status: 502 } });
      return;
    }
    if (!isObject(chunk)) {
      a.call.abort({ kind: 'failed', failure: { kind: 'protocol', message: 'worker sent a frame that is not a JSON object', status: 502 } });
      return;
    }
    if (chunk.error !== undefined) {
      const failure = classifyInBandError(chunk.error);
      a.passThroughFrame = buf.subarray(start, end);
      a.call.abort({ kind: 'failed', failure });
      return;
    }
    const finish = finishReasonOf(chunk);
    if (finish && finish.type === 'abort') {
      const failure = classifyAbort(finish);
      // A deliberate abort at the worker (no status) ends the answer as SGLang wrote it: it
      // falls through to the finish path below, like any other finish reason.
      if (failure.kind !== 'worker_abort') {
        a.passThroughFrame = buf.subarray(start, end);
        a.passThroughChunk = chunk;
        a.call.abort({ kind: 'failed', failure });
        return;
      }
    }
    if (a.index > 0 && a.frames === 0 && this.pin?.weightVersion) {
      // A continuation's first chunk names the weights it runs on; tokens of other weights than
      // the request started on would not be one answer. Nothing of it has reached the client.
      const wv = metaWeightVersion(chunk);
      if (wv !== null && wv !== this.pin.weightVersion) {
        this.ctx.pool.noteWeightVersion(a.worker, wv);
        a.call.abort({ kind: 'failed', failure: { kind: 'weights_changed', message: `${a.worker.url} now serves weight_version ${wv}, not ${this.pin.weightVersion}`, status: 503, evidence: `first chunk of a continuation: meta_info.weight_version ${wv}` } });
        return;
      }
    }
    // Everything before this frame is superseded (cumulative) or already absorbed (incremental).
    a.lastRaw = null;
    a.output.absorb(chunk);
    a.lastChunk = chunk;
    if (a.scanIds && (a.output.sawText || Object.keys(a.output.lists).length > 0)) a.scanIds = false;
    if (a.frames++ === 0) this.onFirstFrame(a);
    if (finish) {
      this.deliverFinal(a, chunk, frameBytes(buf, start, end));
      a.call.end({ kind: 'finished' });
      return;
    }
    if (!this.sink.streaming) return;
    if (a.forwardRaw) this.forward(a, frameBytes(buf, start, end));
    else this.writeChunk(a, this.out.render(chunk, a.output, false));
  }

  private write(a: AttemptState, data: Buffer): void {
    if (!this.sink.writeRaw(data)) this.backpressure(a);
  }

  /**
   * Forward a frame as the worker wrote it, but for meta_info.id (the upstream rid → the client's
   * id). A small frame is spliced into one buffer; a large one (cumulative chunks grow with the
   * output) goes out as three corked writes, one writev, so its bytes are not copied once more.
   */
  private forward(a: AttemptState, frame: Buffer): void {
    const k = frame.indexOf(a.ridJson);
    if (k < 0) return this.write(a, frame);
    const tail = k + a.ridJson.length;
    const ok = frame.length < 2048
      ? this.sink.writeRaw(Buffer.concat([frame.subarray(0, k), a.idJson, frame.subarray(tail)]))
      : this.sink.writeParts(frame.subarray(0, k), a.idJson, frame.subarray(tail));
    if (!ok) this.backpressure(a);
  }

  private writeChunk(a: AttemptState, chunk: JsonObject): void {
    if (!this.sink.writeChunk(chunk)) this.backpressure(a);
  }

  private backpressure(a: AttemptState): void {
    a.call.pause();
    this.sink.onDrain(() => a.call.resume());
  }

  private onFirstFrame(a: AttemptState): void {
    const now = Date.now();
    a.firstFrameAt = now;
    const logical = this.logicalFirstTokenSeen ? null : now - this.startedAt;
    this.logicalFirstTokenSeen = true;
    this.ctx.telemetry.firstToken(this.id, a.index, now - a.startedAt, logical);
  }

  private deliverFinal(a: AttemptState, chunk: JsonObject, raw: Buffer): void {
    const sink = this.sink;
    const headers = { 'x-baton-attempts': String(this.attempts), 'x-baton-migrations': String(this.attempts - 1) };
    if (sink.streaming) {
      if (a.forwardRaw) sink.writeRaw(a.swapId(raw));
      else sink.writeChunk(this.out.render(chunk, a.output, false));
      sink.endStream();
      return;
    }
    // Unary: attempt 0 on a cumulative worker wrote the whole answer in its last chunk.
    if (a.index === 0 && a.output.incremental === false) {
      const p = raw.indexOf('{');
      sink.json(200, a.swapId(raw.subarray(p, raw.length - 2)), headers);
    } else {
      sink.json(200, JSON.stringify(this.out.render(chunk, a.output, true)), headers);
    }
  }

  private finishLocally(a: AttemptState): void {
    const chunk = this.out.renderLocalFinish(!this.sink.streaming, a.lastChunk ?? this.template);
    if (this.sink.streaming) {
      this.sink.writeChunk(chunk);
      this.sink.endStream();
    } else {
      this.sink.json(200, JSON.stringify(chunk), { 'x-baton-attempts': String(this.attempts), 'x-baton-migrations': String(this.attempts - 1) });
    }
  }

  /**
   * A failure that belongs to the client: forwarded as the worker wrote it. On a continuation a
   * frame with meta_info is rebased like every other frame (the logical id, the original prompt
   * length, the whole output so far), so the client cannot tell which attempt refused.
   */
  private passThrough(a: AttemptState, failure: Failure): void {
    const sink = this.sink;
    if (sink.streaming && sink.started) {
      // The stream started on an earlier attempt: an HTTP status can no longer be sent, so the
      // refusal ends the stream in band, as SGLang ends a stream that fails after its headers.
      if (a.passThroughChunk && a.index > 0) sink.writeChunk(this.out.render(a.passThroughChunk, new AttemptOutput(a.output.incremental, this.out.ids.length), false));
      else if (a.passThroughFrame) sink.writeRaw(a.swapId(a.passThroughFrame));
      else {
        sink.endStreamWithError(failure.message, { type: VALUE_ERROR_TYPE, code: failure.status, retryable: false });
        return;
      }
      sink.endStream();
      return;
    }
    if (failure.body) {
      sink.json(failure.status, failure.body, failure.contentType ? { 'content-type': failure.contentType } : {});
      return;
    }
    if (sink.streaming && a.passThroughFrame) {
      if (a.passThroughChunk && a.index > 0) sink.writeChunk(this.out.render(a.passThroughChunk, new AttemptOutput(a.output.incremental, this.out.ids.length), false));
      else sink.writeRaw(a.swapId(a.passThroughFrame));
      sink.endStream();
      return;
    }
    // A unary request's refusal, in SGLang's unary shape: its status and {"error": {"message"}}.
    sink.json(failure.status, JSON.stringify({ error: { message: failure.message } }));
  }

  /** SGLang's answer for a request aborted by /abort_request, rendered from the output so far. */
  private finishAborted(): void {
    const chunk = this.out.renderAbort(!this.sink.streaming);
    if (this.sink.streaming) {
      this.sink.writeChunk(chunk);
      this.sink.endStream();
    } else {
      this.sink.json(200, JSON.stringify(chunk), { 'x-baton-attempts': String(this.attempts), 'x-baton-migrations': String(Math.max(0, this.attempts - 1)) });
    }
  }

  private endAttempt(a: AttemptState, outcome: AttemptOutcome, failure: Failure | null): void {
    const tokens = a.output.ids.length;
    this.segments.push({ attempt: a.index, worker: a.worker.url, from_token: a.replayed, tokens });
    const meta = a.lastChunk?.meta_info;
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
      cached_tokens: isObject(meta) && typeof meta.cached_tokens === 'number' ? meta.cached_tokens : a.output.cachedTokens,
      outcome,
      error_kind: failure?.kind ?? null,
      error: failure?.message ?? null,
      error_evidence: failure?.evidence ?? null,
      finish_reason: outcome === 'finished' ? finishReasonType(a.lastChunk) : null,
    });
  }
}

function metaWeightVersion(chunk: JsonObject): string | null {
  const m = chunk.meta_info;
  return isObject(m) && typeof m.weight_version === 'string' ? m.weight_version : null;
}

/** SGLang's /abort_request for one attempt, best effort (the worker may be gone). */
function sendAbort(a: AttemptState): void {
  void a.worker.pool
    .request({ path: '/abort_request', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid: a.rid }), signal: AbortSignal.timeout(2000) })
    .then((r) => r.body.dump(), () => undefined);
}

function finishReasonType(chunk: JsonObject | null): string | null {
  if (!chunk) return null;
  const f = finishReasonOf(chunk);
  return f && typeof f.type === 'string' ? f.type : null;
}

export type { AttemptResult };
