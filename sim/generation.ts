// One sample of a /generate call: prefill, then one token per step until the model, the budget,
// an abort or a fault ends it. The worker core owns sockets, faults, bookkeeping and pacing
// (scheduling.ts); the SGLang worker (worker.ts) renders and writes what a generation emits.

import type { ServerResponse } from 'node:http';
import { Answer, type WeightLabel } from './answer.ts';
import { stopPrefixPending, textStopMatch } from './detokenizer.ts';
import type { WorkerMetrics } from './metrics.ts';
import { Decoder, promptLogprobs, type FinishReason, type ModelConfig } from './model.ts';
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

/** scheduler_output_processor_mixin.py DEFAULT_FORCE_STREAM_INTERVAL: a unary request's output reaches the detokenizer every this many tokens. */
const FORCE_STREAM_INTERVAL = 50;

export class Generation extends ScheduledGeneration<Call> {
  readonly answer: Answer;
  private readonly decoder: Decoder;
  private readonly arrived = performance.now();
  private lastToken = 0;
  finalBody = '';
  engineAbort: { message: string; status_code: number | null } | null = null;

  constructor(
    host: SchedulingHost,
    private readonly w: GenerationHost,
    call: Call,
    readonly req: SampleRequest,
  ) {
    super(host, call, call.stream);
    this.answer = new Answer(req, {
      incremental: call.stream && w.incremental,
      text: w.settings.text,
      indexed: call.stream && call.batch,
      weights: w.weightLabel,
      vocab: w.settings.vocab,
    });
    this.decoder = new Decoder(req.promptIds, req.decode, w.model, w.weights);
  }

  get contextTokens(): number {
    return this.req.promptIds.length + this.answer.completionTokens;
  }

  start(): void {
    if (this.req.startError) {
      this.finish({ type: 'abort', message: this.req.startError, status_code: 400, err_type: 'BadRequestError' });
      return;
    }
    const prompt = this.req.promptIds;
    // Like SGLang, at least one prompt token is always recomputed, and a logprob window must be.
    const cached = this.w.cache.match(prompt, Math.min(prompt.length - 1, this.req.logprobStart));
    this.enqueue(prompt.length - cached, () => this.prefill(cached));
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
    const s = this.decoder.next();
    const now = performance.now();
    if (this.answer.completionTokens === 0) this.w.metrics.ttft.observe((now - this.arrived) / 1000);
    else this.w.metrics.itl.observe((now - this.lastToken) / 1000);
    this.lastToken = now;
    this.answer.push(s);
    this.w.metrics.generationTokens.inc();
    const due = this.host.tokenGenerated();
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

  private finish(reason: FinishReason, flushed?: () => void): void {
    if (this.ended) return flushed?.();
    this.ended = true;
    this.clearTimer();
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
