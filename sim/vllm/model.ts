// vLLM's view of the simulator's deterministic model (sim/model.ts): how vLLM's sampling params
// map onto the model's DecodeParams, vLLM's stop order, and the logprobs vLLM reports.
//
// - vLLM reports *raw* logprobs by default (`--logprobs-mode raw_logprobs`): the model's
//   distribution before temperature, top-k/top-p, logit_bias and allowed_token_ids. So the tokens
//   are drawn from the biased distribution (model.ts Decoder) while the reported logprob, rank and
//   top list come from the unbiased one (rawStep below).
// - vLLM's scheduler checks EOS and stop_token_ids before the budget (vllm/v1/core/sched/utils.py
//   check_stop), so a stop token drawn as the last token of the budget finishes with "stop"; the
//   model's Decoder (SGLang's order) reports "length" there, and vllmFinish relabels it.
// - allowed_token_ids is a logit bias of +ALLOWED_BONUS on every allowed id: the allowed ids then
//   outrank every other id in every state, in their own relative order, which is the restricted
//   distribution vLLM samples from (the others keep a weight of about e^-200, never drawn).

import { Decoder, type DecodeParams, type ModelConfig, type TopEntry } from '../model.ts';

/** A bias that puts every allowed id above every other, even one the client biased by +100. */
const ALLOWED_BONUS = 250;
/** Candidates the raw view ranks explicitly (model.ts PROMPT_RANK_WIDTH). */
const RANKED = 20;

/** The sampling params of one vLLM request after SamplingParams.__post_init__ and the server's defaults. */
export interface VllmSampling {
  n: number;
  temperature: number;
  top_p: number;
  top_k: number;
  min_p: number;
  seed: number | null;
  stop_token_ids: number[];
  ignore_eos: boolean;
  /** Already resolved: the client's value, or the server default (max_model_len − prompt). */
  max_tokens: number;
  min_tokens: number;
  logprobs: number | null;
  prompt_logprobs: number | null;
  /** Keys are token ids, values clamped to [-100, 100] (SamplingParams.from_optional). */
  logit_bias: Record<string, number> | null;
  allowed_token_ids: number[] | null;
  repetition_detection: { max_pattern_size: number; min_pattern_size: number; min_count: number } | null;
}

/** The output budget: max_tokens, capped by the context (check_stop: num_tokens >= max_model_len). */
export function budgetOf(maxTokens: number, promptLen: number, maxModelLen: number): number {
  return Math.max(1, Math.min(maxTokens, maxModelLen - promptLen));
}

/**
 * The model's DecodeParams for one choice of a vLLM request. `choice` > 0 (n > 1) gets its own
 * draw: seed + choice when a seed is given (vLLM's parallel sampling), else a seed derived from
 * the choice index (real vLLM draws each child at random).
 */
export function decodeParams(sp: VllmSampling, budget: number, choice = 0): DecodeParams {
  const p: DecodeParams = {
    max_new_tokens: budget,
    min_new_tokens: sp.min_tokens,
    ignore_eos: sp.ignore_eos,
    stop_token_ids: sp.stop_token_ids,
    // SamplingParams: temperature < 1e-5 is greedy (the model's threshold is 1e-6; 0 is the only
    // value below 1e-5 left after __post_init__ raised 0 < t < 1e-2 to 1e-2).
    temperature: sp.temperature < 1e-5 ? 0 : sp.temperature,
    top_k: sp.top_k <= 0 ? -1 : sp.top_k,
  };
  if (sp.top_p < 1) p.top_p = sp.top_p;
  if (sp.min_p > 0) p.min_p = sp.min_p;
  if (sp.seed !== null) p.sampling_seed = sp.seed + choice;
  else if (choice > 0) p.sampling_seed = 0x7f4a7c15 + choice;
  const bias: Record<string, number> = {};
  let biased = false;
  if (sp.logit_bias) {
    for (const [k, v] of Object.entries(sp.logit_bias)) {
      bias[k] = v;
      biased = true;
    }
  }
  if (sp.allowed_token_ids) {
    for (const id of sp.allowed_token_ids) {
      bias[String(id)] = (bias[String(id)] ?? 0) + ALLOWED_BONUS;
      biased = true;
    }
  }
  if (biased) p.logit_bias = bias;
  return p;
}

/** True when the reported (raw) logprobs differ from what the decoding distribution reports. */
export const needsRawView = (sp: VllmSampling) => sp.logit_bias !== null || sp.allowed_token_ids !== null;

export type VllmFinish = 'stop' | 'length' | 'abort' | 'error' | 'repetition';

/**
 * vLLM's finish reason for a step the model finished: check_stop looks at EOS and stop ids
 * (once min_tokens is reached) before the budget.
 */
export function vllmFinish(type: 'stop' | 'length', token: number, produced: number, sp: VllmSampling, eos: number): VllmFinish {
  if (type === 'stop') return 'stop';
  if (produced >= sp.min_tokens && ((token === eos && !sp.ignore_eos) || sp.stop_token_ids.includes(token))) return 'stop';
  return 'length';
}

/** One position's raw (unbiased) distribution, as vLLM's default raw_logprobs mode reports it. */
export interface RawView {
  /** The logprob of the token at this position (sampled or prompt token). */
  logprob: number;
  /** Its 1-based rank in the whole vocabulary. */
  rank: number;
  /** The top `k` candidates, best first. */
  top: TopEntry[];
}

/**
 * The raw distribution of the context whose (unsalted) hash is `state`, looked at for `token`:
 * its logprob and rank, and the top k. A token past the model's 20 ranked candidates sits in the
 * tail, whose logprobs are `floor − 1 − 8u`: its rank spreads over the rest of the vocabulary
 * with u, so ranks stay ordered like logprobs.
 */
export function rawStep(state: number, token: number, k: number, cfg: ModelConfig, weights: number): RawView {
  const width = Math.max(k, RANKED);
  const step = new Decoder(state, { max_new_tokens: 1, temperature: 0, top_logprobs_num: width, token_ids_logprob: [token] }, cfg, weights).next();
  const logprob = step.idsLogprobs[0]!;
  let rank = 0;
  for (let j = 0; j < step.top.length; j++) {
    if (step.top[j]![1] === token) {
      rank = j + 1;
      break;
    }
  }
  if (rank === 0) {
    const floor = step.top[RANKED - 1]![0];
    const u = Math.min(0.999999, Math.max(0, (floor - 1 - logprob) / 8));
    const tail = (cfg.ordinaryIds?.length ?? cfg.vocabSize - 3) - RANKED;
    rank = RANKED + 1 + Math.floor(u * tail);
  }
  return { logprob, rank, top: k < width ? step.top.slice(0, k) : step.top };
}
