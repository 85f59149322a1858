// Serialising one sample's answer as SGLang writes it: the unary object, or one stream chunk.
//
// This is the per-token hot path of the benchmark worker, so the JSON is assembled from cached
// string pieces instead of re-stringifying growing arrays: cumulative chunks append each token's
// piece to running strings (the re-send of the whole prefix is inherent to SGLang's cumulative
// mode, the re-serialisation is not), incremental chunks keep only what arrived since the last
// chunk. Input-side logprobs are serialised once and repeated, as SGLang repeats them.
//
// meta_info keys come in SGLang's order (tokenizer_manager.py _handle_batch_output): id,
// finish_reason, prompt_tokens, weight_version, num_retractions, the logprob lists
// (add_logprob_to_meta_info), reasoning_tokens, completion_tokens, cached_tokens, e2e_latency.

import { SglangDetokenizer } from './detokenizer.ts';
import type { FinishReason, Step, TopEntry } from './model.ts';
import type { SampleRequest } from './request.ts';
import { tokenSpelling, type SimTokenizer } from './vocab.ts';

/** The worker's live weight version, already JSON-encoded; read at every render. */
export interface WeightLabel {
  versionJson: string;
}

export interface AnswerOptions {
  /** Deltas instead of the whole output so far (only for stream chunks of an incremental worker). */
  incremental: boolean;
  /** Text mode: answers carry `text`. */
  text: boolean;
  /** Add `index` (batch and n > 1 streams). */
  indexed: boolean;
  weights: WeightLabel;
  vocab: SimTokenizer;
}

export class Answer {
  readonly tokens: number[] = [];
  private ids = '';
  private lps = '';
  private tops = '';
  private idLps = '';
  private emittedTokens = 0;
  /** Text mode: SGLang's detokenizer state, the ids it has been sent, and the text it produced (the tokenizer manager's state.text). */
  private readonly detok: SglangDetokenizer | null;
  private detokenized = 0;
  private text = '';
  private inputLps = '[]';
  private inputTops = '[]';
  private inputIdLps = '[]';
  private cached = 0;
  private readonly head: string;
  private readonly tail: string;

  constructor(private readonly req: SampleRequest, private readonly o: AnswerOptions) {
    this.head = `"meta_info":{"id":${JSON.stringify(req.rid)},"finish_reason":`;
    this.tail = o.indexed ? `,"index":${req.index}}` : '}';
    this.detok = o.text
      ? new SglangDetokenizer(o.vocab, req.promptIds, { skipSpecialTokens: req.skipSpecialTokens, spacesBetweenSpecialTokens: req.spacesBetweenSpecialTokens })
      : null;
  }

  /** The prompt tokens the prefix cache held (cached_tokens). */
  get cachedTokens(): number {
    return this.cached;
  }

  get completionTokens(): number {
    return this.tokens.length;
  }

  /** Prefill results: cache hits and the prompt's logprobs, fixed for the rest of the request. */
  setPrefill(cachedTokens: number, inputLogprobs: (number | null)[], inputTops: (TopEntry[] | null)[], inputIds: (number[] | null)[] = []): void {
    this.cached = cachedTokens;
    if (!this.req.returnLogprob) return;
    const start = this.req.logprobStart;
    const prompt = this.req.promptIds;
    this.inputLps = '[' + inputLogprobs.map((lp, i) => this.triple(lp, prompt[start + i]!)).join(',') + ']';
    this.inputTops = '[' + inputTops.map((t) => (t === null ? 'null' : this.entries(t))).join(',') + ']';
    const wanted = this.req.tokenIdsLogprob;
    if (wanted) this.inputIdLps = '[' + inputIds.map((v) => (v === null ? 'null' : this.idEntries(v, wanted))).join(',') + ']';
  }

  push(step: Step): void {
    const first = this.o.incremental ? this.tokens.length === this.emittedTokens : this.tokens.length === 0;
    const sep = first ? '' : ',';
    this.tokens.push(step.token);
    this.ids += sep + step.token;
    if (this.req.returnLogprob) {
      this.lps += sep + this.triple(step.logprob, step.token);
      if (this.req.topLogprobsNum > 0) this.tops += sep + this.entries(step.top);
      if (this.req.tokenIdsLogprob) this.idLps += sep + this.idEntries(step.idsLogprobs, this.req.tokenIdsLogprob);
    }
  }

  /**
   * Text mode: one scheduler output reaches the detokenizer (the ids since the last one); returns
   * the text it adds. SGLang sends one per streamed chunk, one every 50 tokens of a unary request,
   * and one at the end (scheduler_output_processor_mixin.py stream_output_generation).
   */
  detokenize(finish: FinishReason | null): string {
    if (!this.detok) return '';
    const delta = this.detok.step(this.tokens.slice(this.detokenized), finish, this.req.noStopTrim);
    this.detokenized = this.tokens.length;
    this.text += delta;
    return delta;
  }

  /** The JSON object text of a chunk (finish null) or of the final answer. */
  render(finish: FinishReason | null, e2eLatency: number | null): string {
    const r = this.req;
    let out = '{';
    if (this.o.text) {
      // tokenizer_manager.py _handle_batch_output: an incremental stream sends the new text, every other answer all of it.
      const delta = this.detokenize(finish);
      out += `"text":${JSON.stringify(this.o.incremental ? delta : this.text)},`;
    }
    out += `"output_ids":[${this.ids}],`;
    out += this.head + (finish === null ? 'null' : JSON.stringify(finish));
    out += `,"prompt_tokens":${r.promptIds.length},"weight_version":${this.o.weights.versionJson},"num_retractions":0`;
    if (r.returnLogprob) {
      // output_token_logprobs_length counts every output logprob so far, also when the list itself
      // is an incremental slice (it is computed before _slice_streaming_output_meta_info).
      out += `,"input_token_logprobs":${this.inputLps},"output_token_logprobs":[${this.lps}],"output_token_logprobs_length":${this.tokens.length}`;
      if (r.topLogprobsNum > 0) out += `,"input_top_logprobs":${this.inputTops},"output_top_logprobs":[${this.tops}]`;
      if (r.tokenIdsLogprob) out += `,"input_token_ids_logprobs":${this.inputIdLps},"output_token_ids_logprobs":[${this.idLps}]`;
    }
    out += `,"reasoning_tokens":0,"completion_tokens":${this.tokens.length},"cached_tokens":${this.cached}`;
    if (e2eLatency !== null) out += `,"e2e_latency":${e2eLatency}`;
    out += '}' + this.tail;
    if (this.o.incremental) {
      this.ids = '';
      this.lps = '';
      this.tops = '';
      this.idLps = '';
      this.emittedTokens = this.tokens.length;
    }
    return out;
  }

  /**
   * The answer of a request aborted while still queued, built by tokenizer_manager.py
   * _handle_abort_req rather than from a scheduler output: `text` (even in token-only mode), no
   * prompt_tokens / cached_tokens / num_retractions, e2e_latency before the logprob lists,
   * completion_tokens last, and in a stream only the last output id.
   */
  renderQueuedAbort(finish: FinishReason, e2eLatency: number, stream: boolean): string {
    const r = this.req;
    const ids = stream ? (this.tokens.length > 0 ? String(this.tokens.at(-1)) : '') : this.tokens.join(',');
    let out = `{"text":${JSON.stringify(this.text)},"output_ids":[${ids}],`;
    out += this.head + JSON.stringify(finish);
    out += `,"weight_version":${this.o.weights.versionJson},"e2e_latency":${e2eLatency}`;
    if (r.returnLogprob) {
      out += `,"input_token_logprobs":[],"output_token_logprobs":[],"output_token_logprobs_length":0`;
      if (r.topLogprobsNum > 0) out += `,"input_top_logprobs":[],"output_top_logprobs":[]`;
      if (r.tokenIdsLogprob) out += `,"input_token_ids_logprobs":[],"output_token_ids_logprobs":[]`;
    }
    out += `,"completion_tokens":${this.tokens.length}}` + this.tail;
    return out;
  }

  private triple(lp: number | null, id: number): string {
    const text = this.req.returnTextInLogprobs ? JSON.stringify(tokenSpelling(this.o.vocab, id)) : 'null';
    return `[${lp === null ? 'null' : lp},${id},${text}]`;
  }

  private entries(top: TopEntry[]): string {
    let s = '[';
    for (let i = 0; i < top.length; i++) s += (i ? ',' : '') + this.triple(top[i]![0], top[i]![1]);
    return s + ']';
  }

  private idEntries(lps: readonly number[], ids: readonly number[]): string {
    let s = '[';
    for (let i = 0; i < ids.length; i++) s += (i ? ',' : '') + this.triple(lps[i]!, ids[i]!);
    return s + ']';
  }
}
