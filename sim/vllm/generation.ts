// One choice of a vLLM generate call: prefill, then one token per step until the model, the
// budget, an abort or a fault ends it. The worker core owns sockets, faults, bookkeeping and
// pacing (../scheduling.ts); the vLLM worker (worker.ts) renders and writes what a choice emits.

import type { ServerResponse } from 'node:http';
import { Decoder, INITIAL_STATE, foldToken, type ModelConfig } from '../model.ts';
import type { PrefixCache } from '../prefix-cache.ts';
import { ScheduledGeneration, type SchedulingHost } from '../scheduling.ts';
import { ChoiceAnswer, ResponseShape } from './answer.ts';
import { budgetOf, decodeParams, rawStep, vllmFinish, type VllmFinish } from './model.ts';
import type { VllmRequest } from './request.ts';

/** One /inference/v1/generate call: its response and its choices (n). */
export interface VllmCall {
  res: ServerResponse;
  req: VllmRequest;
  shape: ResponseShape;
  gens: VllmGeneration[];
  open: number;
  /** Ended by us or by the client: no more writes, no more generation. */
  done: boolean;
  /** Prompt tokens found in the prefix cache (the first choice's lookup). */
  cached: number;
  /** The prompt_token_ids still to send on the first chunk (return_token_ids). */
  promptIdsPending: boolean;
  created: number;
  /** prompt_logprobs (JSON), computed at prefill with the weights of that moment. */
  promptLogprobs: string | null;
}

/** What a choice needs from the vLLM worker that runs it. */
export interface VllmGenerationHost {
  readonly model: ModelConfig;
  readonly weights: number;
  readonly weightVersion: string;
  readonly maxModelLen: number;
  /** The older `ChatCompletionLogProbs` shape (`token: "token_id:N"`). */
  readonly legacyLogprobs: boolean;
  cacheFor(salt: string | null): PrefixCache;
  /** A choice produced a chunk, or finished (`final`); `flushed` runs once it is on the wire. */
  emit(call: VllmCall, g: VllmGeneration, final: boolean, flushed?: () => void): void;
}

/** vLLM's repetition check (vllm/v1/core/sched/utils.py check_sequence_repetition). */
function repeats(ids: readonly number[], p: { max_pattern_size: number; min_pattern_size: number; min_count: number }): boolean {
  const min = p.min_pattern_size <= 0 ? 1 : p.min_pattern_size;
  for (let len = min; len <= p.max_pattern_size; len++) {
    if (len * p.min_count > ids.length) return false;
    let all = true;
    for (let n = 1; n <= len && all; n++) {
      const target = ids[ids.length - n];
      for (let m = 1; m < p.min_count; m++) {
        if (ids[ids.length - (len * m + n)] !== target) {
          all = false;
          break;
        }
      }
    }
    if (all) return true;
  }
  return false;
}

export class VllmGeneration extends ScheduledGeneration<VllmCall> {
  readonly answer: ChoiceAnswer;
  private readonly decoder: Decoder;
  /** The finish reason once finished (null while running). */
  finish: VllmFinish | null = null;
  private readonly topK: number;

  constructor(
    host: SchedulingHost,
    private readonly w: VllmGenerationHost,
    call: VllmCall,
    readonly index: number,
  ) {
    super(host, call, call.req.stream);
    const sp = call.req.sampling;
    this.answer = new ChoiceAnswer(index, sp.logprobs !== null);
    this.topK = sp.logprobs === null ? 0 : Math.max(0, sp.logprobs);
    const budget = budgetOf(sp.max_tokens, call.req.promptIds.length, w.maxModelLen);
    this.decoder = new Decoder(call.req.promptIds, decodeParams(sp, budget, index), w.model, w.weights);
  }

  get contextTokens(): number {
    return this.call.req.promptIds.length + this.answer.count;
  }

  get isPrefilled(): boolean {
    return this.prefilled;
  }

  start(): void {
    const r = this.call.req;
    const prompt = r.promptIds;
    // vLLM recomputes at least the last prompt token; prompt logprobs skip reading the cache.
    const cache = this.w.cacheFor(r.cacheSalt);
    const cached = r.sampling.prompt_logprobs !== null ? 0 : cache.match(prompt, prompt.length - 1);
    if (this.index === 0) this.call.cached = cached;
    this.enqueue(prompt.length - cached, () => this.prefill());
  }

  private prefill(): void {
    this.prefillDone();
    const r = this.call.req;
    this.w.cacheFor(r.cacheSalt).insertSequence(r.promptIds);
    if (this.index === 0 && r.sampling.prompt_logprobs !== null && !r.stream) {
      this.call.promptLogprobs = promptLogprobsJson(r.promptIds, Math.max(0, r.sampling.prompt_logprobs), this.w.model, this.w.weights);
    }
    this.awaitStep();
  }

  protected step(): void {
    this.timer = null;
    if (this.ended) return;
    const sp = this.call.req.sampling;
    const before = this.decoder.contextHash;
    const s = this.decoder.next();
    let entry = '';
    if (sp.logprobs !== null) entry = this.logprobEntry(before, s.token);
    this.answer.push(s.token, entry, this.w.weightVersion);
    const due = this.host.tokenGenerated();
    let finish: VllmFinish | null = s.finish ? vllmFinish(s.finish.type === 'length' ? 'length' : 'stop', s.token, this.answer.count, sp, this.w.model.eosTokenId) : null;
    if (!finish && sp.repetition_detection && this.answer.count >= sp.min_tokens && repeats(this.answer.tokens, sp.repetition_detection)) finish = 'repetition';
    if (finish) {
      this.end(finish, 'finished', due);
      return;
    }
    this.w.emit(this.call, this, false, due);
    if (this.ended) return;
    this.stepAgain();
  }

  /** The logprobs.content entry of one token: raw logprob and rank, the top list in the engine's order. */
  private logprobEntry(state: number, token: number): string {
    const rv = rawStep(state, token, this.topK, this.w.model, this.w.weights);
    return this.w.legacyLogprobs ? legacyEntry(token, rv, this.topK) : entryJson(token, rv, this.topK);
  }

  private end(finish: VllmFinish, how: 'finished' | 'aborted', flushed?: () => void): void {
    if (this.ended) return flushed?.();
    this.ended = true;
    this.finish = finish;
    this.clearTimer();
    if (!this.prefilled) this.host.queued--;
    this.w.cacheFor(this.call.req.cacheSalt).insertSequence([...this.call.req.promptIds, ...this.answer.tokens]);
    this.host.generationEnded(this, how);
    this.w.emit(this.call, this, true, flushed);
  }

  /** An abort (abort_requests, the `abort` fault): a final output with finish_reason "abort". */
  abort(): void {
    this.end('abort', 'aborted');
  }

  /** The engine's retryable request-level error (the `error` fault): finish_reason "error". */
  fail(): void {
    this.end('error', 'aborted');
  }

  /** Another choice of the call failed and the response ended: stop without a word (an engine abort). */
  cancel(): void {
    if (this.ended) return;
    this.halt();
    this.host.generationEnded(this, 'aborted');
  }

  /** The worker's weights changed: the next tokens come from the new ones. */
  setWeights(weights: number): void {
    this.decoder.setWeights(weights);
  }
}

/**
 * The entries the engine's logprob dict holds at one position, in its order: the token itself
 * (with its rank), then the top k by rank without it (vllm/v1/engine/logprobs.py builds the dict
 * from [sampled] + top-k; a repeated key keeps its first place).
 */
function dictEntries(token: number, rv: { logprob: number; rank: number; top: [number, number][] }): [number, number, number][] {
  const out: [number, number, number][] = [[token, rv.logprob, rv.rank]];
  for (let j = 0; j < rv.top.length; j++) {
    const [lp, id] = rv.top[j]!;
    if (id !== token) out.push([id, lp, j + 1]);
  }
  return out;
}

/** GenerateLogProbsContent: {token_id, logprob, rank, top_logprobs: first max(k, 1) dict entries}. */
export function entryJson(token: number, rv: { logprob: number; rank: number; top: [number, number][] }, k: number): string {
  const entries = dictEntries(token, rv);
  const n = Math.min(entries.length, Math.max(k, 1));
  let top = '';
  for (let i = 0; i < n; i++) {
    const [id, lp, rank] = entries[i]!;
    top += `${i ? ',' : ''}{"token_id":${id},"logprob":${lp},"rank":${rank}}`;
  }
  return `{"token_id":${token},"logprob":${rv.logprob},"rank":${rv.rank},"top_logprobs":[${top}]}`;
}

/** The older ChatCompletionLogProbsContent with `token_id:N` placeholders and `bytes: null`. */
export function legacyEntry(token: number, rv: { logprob: number; rank: number; top: [number, number][] }, k: number): string {
  const entries = dictEntries(token, rv);
  const n = Math.min(entries.length, Math.max(k, 1));
  let top = '';
  for (let i = 0; i < n; i++) {
    const [id, lp] = entries[i]!;
    top += `${i ? ',' : ''}{"token":"token_id:${id}","logprob":${lp},"bytes":null}`;
  }
  return `{"token":"token_id:${token}","logprob":${rv.logprob},"bytes":null,"top_logprobs":[${top}]}`;
}

/**
 * prompt_logprobs: null first, then per prompt position a dict {"<id>": {logprob, rank,
 * decoded_token}} of the prompt token and the top k (the engine's order; decoded_token is null on
 * a tokens-only server).
 */
export function promptLogprobsJson(prompt: readonly number[], k: number, cfg: ModelConfig, weights: number): string {
  let out = '[null';
  let state = INITIAL_STATE;
  for (let j = 0; j < prompt.length; j++) {
    if (j > 0) {
      const rv = rawStep(state, prompt[j]!, k, cfg, weights);
      const entries = dictEntries(prompt[j]!, rv);
      out += ',{' + entries.map(([id, lp, rank]) => `"${id}":{"logprob":${lp},"rank":${rank},"decoded_token":null}`).join(',') + '}';
    }
    state = foldToken(state, prompt[j]!);
  }
  return out + ']';
}
