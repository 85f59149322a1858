// One sample of a /generate call: prefill, then one token per step until the model, the budget,
// an abort or a fault ends it. The worker core owns sockets, faults, bookkeeping and pacing
// (scheduling.ts); the SGLang worker (worker.ts) renders and writes what a generation emits.

import type { ServerResponse } from 'node:http';
import { Answer, type WeightLabel } from './answer.ts';
import { stopPrefixPending, textStopMatch } from './detokenizer.ts';
import type { WorkerMetrics } from './metrics.ts';
import { Decoder, promptLogprobs, type FinishReason, type ModelConfig, type Step } from './model.ts';
import { decodeTransferFailed, prefillBootstrapFailed, prefillTransferFailed, pullKv, type Bootstrap, type KvPull, type PrefillLeg } from './pd.ts';
import type { PrefixCache } from './prefix-cache.ts';
import type { RequestSettings, SampleRequest } from './request.ts';
import { ScheduledGeneration, type SchedulingHost } from './scheduling.ts';

/** One /generate call: its response and the generations (samples) it carries. */
export interface Call {
  res: ServerResponse;
  stream: boolean;
  batch: boolean;
  gens: Generation[];
  open: number;
  /** Ended by us or by the client: no more writes, no more generation. */
  done: boolean;
}

/** What a generation needs from the SGLang worker that runs it. */
export interface GenerationHost {
  readonly model: ModelConfig;
  readonly settings: RequestSettings;
  readonly incremental: boolean;
  readonly cache: PrefixCache;
  readonly metrics: WorkerMetrics;
  /** The salt of the weights the worker serves now (model.ts weightsSalt). */
  readonly weights: number;
  /** Its weight_version, JSON-encoded, as every chunk reports it. */
  readonly weightLabel: WeightLabel;
  emit(call: Call, g: Generation, body: string, final: boolean, flushed?: () => void): void;
}

/**
 * A sample's P/D leg (sim/pd.ts). Prefill: wait for the decode to connect, prefill, sample one
 * token, send it with the KV, answer with it and finish_reason length 0. Decode: pull the KV, go
 * on from the prefill's token. `fake`: SGLang's FAKE_BOOTSTRAP_HOST, nothing is transferred.
 */
export type PdSample =
  | { role: 'prefill'; leg: PrefillLeg; fake: boolean; bootstrapTimeoutMs: number; release: () => void }
  | { role: 'decode'; bootstrap: Bootstrap; fake: boolean; waitingTimeoutMs: number; release: () => void };

/** scheduler_output_processor_mixin.py DEFAULT_FORCE_STREAM_INTERVAL: a unary request's output reaches the detokenizer every this many tokens. */
const FORCE_STREAM_INTERVAL = 50;

export class Generation extends ScheduledGeneration<Call> {
  readonly answer: Answer;
  private readonly decoder: Decoder;
  private readonly arrived = performance.now();
  private lastToken = 0;
  finalBody = '';
  engineAbort: { message: string; status_code: number | null } | null = null;
  private pull: KvPull | null = null;

  constructor(
    host: SchedulingHost,
    private readonly w: GenerationHost,
    call: Call,
    readonly req: SampleRequest,
    readonly pd: PdSample | null = null,
  ) {
    super(host, call, call.stream);
    this.answer = new Answer(req, {
      incremental: call.stream && w.incremental,
      text: w.settings.text,
      indexed: call.stream && call.batch,
      weights: w.weightLabel,
      vocab: w.settings.vocab,
    });
    // prefill.py PrefillBootstrapQueue._process_req: a prefill leg samples one token.
    const decode = pd?.role === 'prefill' ? { ...req.decode, max_new_tokens: 1 } : req.decode;
    this.decoder = new Decoder(req.promptIds, decode, w.model, w.weights);
  }

  get contextTokens(): number {
    return this.req.promptIds.length + this.answer.completionTokens;
  }

  start(): void {
    if (this.req.startError) {
      this.finish({ type: 'abort', message: this.req.startError, status_code: 400, err_type: 'BadRequestError' });
      return;
    }
    if (this.pd?.role === 'decode' && !this.pd.fake) return this.startDecodeLeg();
    if (this.pd?.role === 'prefill' && !this.pd.fake) return this.startPrefillLeg();
    this.startPrefill();
  }

  private startPrefill(): void {
    const prompt = this.req.promptIds;
    // Like SGLang, at least one prompt token is always recomputed, and a logprob window must be.
    const cached = this.w.cache.match(prompt, Math.min(prompt.length - 1, this.req.logprobStart));
    this.enqueue(prompt.length - cached, () => this.prefill(cached));
  }

  /**
   * prefill.py: the request waits in the bootstrap queue until its decode connects
   * (PrefillBootstrapQueue.pop_bootstrapped, failing after SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT),
   * then is prefilled like any other.
   */
  private startPrefillLeg(): void {
    const pd = this.pd as Extract<PdSample, { role: 'prefill' }>;
    this.host.queued++;
    const since = performance.now();
    void pd.leg.awaitDecode(pd.bootstrapTimeoutMs).then((connected) => {
      if (this.ended) return;
      if (!connected) return this.failLeg(prefillBootstrapFailed(this.req.rid, pd.leg.room, performance.now() - since));
      this.host.queued--;
      this.startPrefill();
    });
  }

  /**
   * decode.py: the decode pre-allocates and waits for its room's KV (DecodeTransferQueue,
   * bounded by SGLANG_DISAGGREGATION_WAITING_TIMEOUT); pop_transferred appends the prefill's
   * token to output_ids (_commit_transfer_to_req) and decoding goes on from it. A failed transfer
   * is the in-band abort, status 500.
   */
  private startDecodeLeg(): void {
    const pd = this.pd as Extract<PdSample, { role: 'decode' }>;
    this.host.queued++;
    this.pull = pullKv(pd.bootstrap, this.req.rid, pd.waitingTimeoutMs);
    void this.pull.result.then((r) => {
      this.pull = null;
      if (this.ended) return;
      if (!r.ok) return this.failLeg(decodeTransferFailed(this.req.rid, pd.bootstrap.room, r.reason));
      this.prefillDone();
      this.answer.setPrefill(r.kv.cached_tokens, [], []);
      this.w.metrics.promptTokens.inc(this.req.promptIds.length);
      this.w.metrics.cachedTokens.inc(r.kv.cached_tokens);
      this.host.whenAwake(() => {
        if (this.ended) return;
        // A zero budget ends as it does on an aggregated worker: one final chunk, nothing generated.
        if (this.decoder.finish) return this.finish(this.decoder.finish);
        const finish = this.decoder.adopt(r.kv.output_id);
        this.produce({ token: r.kv.output_id, logprob: r.kv.logprob, top: r.kv.top, idsLogprobs: r.kv.ids_logprobs, finish });
      });
    });
  }

  /** prepare_abort(req, message, status_code=HTTPStatus.INTERNAL_SERVER_ERROR) on either leg. */
  private failLeg(message: string): void {
    this.finish({ type: 'abort', message, status_code: 500, err_type: null });
  }

  private prefill(cached: number): void {
    this.prefillDone();
    const r = this.req;
    if (r.returnLogprob) {
      const lp = promptLogprobs(r.promptIds, r.logprobStart, r.topLogprobsNum, this.w.model, this.w.weights, r.tokenIdsLogprob ?? []);
      this.answer.setPrefill(cached, lp.logprobs, lp.tops, lp.ids);
    } else this.answer.setPrefill(cached, [], []);
    this.w.cache.insertSequence(r.promptIds);
    this.w.metrics.promptTokens.inc(r.promptIds.length);
    this.w.metrics.cachedTokens.inc(cached);
    this.awaitStep();
  }

  protected step(): void {
    this.timer = null;
    if (this.ended) return;
    if (this.decoder.finish) {
      // A zero budget: prefill only, one final chunk with nothing generated.
      this.finish(this.decoder.finish);
      return;
    }
    this.produce(this.decoder.next());
  }

  /** One token: the model's, or on a decode leg first the prefill's. */
  private produce(s: Step): void {
    const now = performance.now();
    if (this.answer.completionTokens === 0) this.w.metrics.ttft.observe((now - this.arrived) / 1000);
    else this.w.metrics.itl.observe((now - this.lastToken) / 1000);
    this.lastToken = now;
    this.answer.push(s);
    this.w.metrics.generationTokens.inc();
    const due = this.host.tokenGenerated();
    if (this.pd?.role === 'prefill') return this.sendKv(s, due);
    const finish = s.finish ?? this.stopStringMatch();
    if (finish) {
      this.finish(finish, due);
      return;
    }
    const n = this.answer.completionTokens;
    // SOP stream_output_generation: `len(output_ids) % stream_interval == 1` when the interval is
    // above 1 (the first token goes out at once, then one chunk per interval), else every token.
    const k = this.req.streamInterval;
    if (this.call.stream && (k > 1 ? n % k === 1 : true) && !this.stopPrefixHeld()) {
      this.w.emit(this.call, this, this.answer.render(null, null), false, due);
    } else {
      // A unary text request's text still passes through the detokenizer every 50 tokens, which
      // decides where its windows start (DEFAULT_FORCE_STREAM_INTERVAL).
      if (!this.call.stream && this.w.settings.text && n % FORCE_STREAM_INTERVAL === 0) this.answer.detokenize(null);
      due?.();
    }
    if (this.ended) return;
    this.stepAgain();
  }

  /**
   * prefill.py: the sampled token goes into output_ids and the KV to the decode
   * (process_batch_result_disagg_prefill); once the transfer succeeded the request finishes with
   * FINISH_LENGTH(length=0) and answers (process_disagg_prefill_inflight_queue).
   */
  private sendKv(s: Step, due: (() => void) | undefined): void {
    const pd = this.pd as Extract<PdSample, { role: 'prefill' }>;
    if (pd.fake) return this.finish({ type: 'length', length: 0 }, due);
    const cached = this.answer.cachedTokens;
    void pd.leg.transfer({ bootstrap_room: pd.leg.room, output_id: s.token, logprob: s.logprob, top: s.top, ids_logprobs: [...s.idsLogprobs], cached_tokens: cached }).then((sent) => {
      if (sent) this.finish({ type: 'length', length: 0 }, due);
      else {
        due?.();
        this.failLeg(prefillTransferFailed(this.req.rid, pd.leg.room));
      }
    });
  }

  /** Text mode: the scheduler's stop strings and stop regexes, on the decoded tail of the output (sim/detokenizer.ts). */
  private stopStringMatch(): FinishReason | null {
    const { stops } = this.req;
    if (stops.strings.length === 0 && stops.regex.length === 0) return null;
    return textStopMatch(this.w.settings.vocab, this.answer.tokens, stops);
  }

  /** A stream sends no chunk while its tail may be the start of a stop string (Req.check_match_stop_str_prefix). */
  private stopPrefixHeld(): boolean {
    return this.req.stops.strings.length > 0 && stopPrefixPending(this.w.settings.vocab, this.answer.tokens, this.req.stops);
  }

  protected override halt(): void {
    super.halt();
    this.endLeg();
  }

  /** The request ended: its room is free again, a pull in flight is given up. */
  private endLeg(): void {
    if (this.pd === null) return;
    this.pull?.cancel();
    this.pull = null;
    this.pd.release();
  }

  private finish(reason: FinishReason, flushed?: () => void): void {
    if (this.ended) return flushed?.();
    this.ended = true;
    this.clearTimer();
    this.endLeg();
    if (!this.prefilled && !this.req.startError) this.host.queued--;
    if (reason.type === 'abort' && 'status_code' in reason && reason.status_code !== null && reason.status_code >= 500) {
      this.engineAbort = { message: reason.message, status_code: reason.status_code };
    }
    // SGLang's cache_finished_req inserts (origin_input_ids + output_ids)[:-1]: the last token's
    // KV was never computed.
    const out = this.answer.tokens;
    if (out.length > 1) this.w.cache.insertSequence([...this.req.promptIds, ...out.slice(0, -1)]);
    const e2e = (performance.now() - this.arrived) / 1000;
    this.w.metrics.e2e.observe(e2e);
    this.w.metrics.requests.inc();
    this.host.generationEnded(this, reason.type === 'abort' ? 'aborted' : 'finished');
    this.w.emit(this.call, this, this.answer.render(reason, e2e), true, flushed);
  }

  /** An engine abort (the `abort` fault): the answer ends with that abort finish reason. */
  abort(reason: FinishReason): void {
    this.finish(reason);
  }

  /**
   * /abort_request: a running request ends at its next step with the scheduler's default
   * FINISH_ABORT; one still queued (before prefill) is answered by the tokenizer manager with
   * the queued-abort shape (Answer.renderQueuedAbort).
   */
  abortByRequest(): void {
    if (this.ended) return;
    if (this.prefilled || this.req.startError) {
      this.finish({ type: 'abort', message: 'Aborted', status_code: null, err_type: null });
      return;
    }
    this.ended = true;
    this.clearTimer();
    this.host.queued--;
    this.endLeg();
    const e2e = (performance.now() - this.arrived) / 1000;
    this.w.metrics.e2e.observe(e2e);
    this.w.metrics.requests.inc();
    this.host.generationEnded(this, 'aborted');
    this.w.emit(this.call, this, this.answer.renderQueuedAbort({ type: 'abort', message: 'Abort in waiting queue' }, e2e, this.call.stream), true);
  }

  /** The worker's weights changed (a live weight update): the next tokens come from the new ones. */
  setWeights(weights: number): void {
    this.decoder.setWeights(weights);
  }
}
