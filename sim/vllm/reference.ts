// The uninterrupted answer of a simulated vLLM worker, for tests and oracles: what
// POST /inference/v1/generate returns for a prompt and vLLM sampling params when nothing
// interrupts it. Built on runModel (sim/model.ts) with vLLM's params mapped onto the model's
// DecodeParams (sim/vllm/model.ts), vLLM's stop order, and the raw logprobs vLLM reports.

import { DEFAULT_MODEL, DEFAULT_WEIGHTS, contextState, foldToken, runModel, type ModelConfig } from '../model.ts';
import { budgetOf, decodeParams, rawStep, vllmFinish, type VllmFinish } from './model.ts';
import { entryJson, legacyEntry } from './generation.ts';
import { resolveSampling } from './request.ts';

export interface VllmReferenceOptions {
  maxModelLen?: number;
  /** The model config (eosEvery) of the worker. */
  model?: ModelConfig;
  /** weightsSalt(modelPath, weightVersion) of the worker; default weights by default. */
  weights?: number;
  /** Logprob entries in the older `token_id:N` shape. */
  legacyLogprobs?: boolean;
  /** The choice index (n > 1). */
  choice?: number;
}

/** GenerateLogProbsContent as parsed JSON. */
export interface LogprobEntry {
  token_id: number;
  logprob: number;
  rank: number | null;
  top_logprobs: { token_id: number; logprob: number; rank: number | null }[];
}

export interface VllmReference {
  token_ids: number[];
  finish_reason: VllmFinish;
  /** logprobs.content entries (parsed), or null without `logprobs`. */
  logprobs: unknown[] | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/**
 * The uninterrupted answer to `token_ids` with `sampling_params` (the JSON object a client sends;
 * max_tokens defaults as the server defaults it). `repetition_detection` is not modelled here.
 */
export function vllmReference(tokenIds: readonly number[], samplingParams: Record<string, unknown>, opts: VllmReferenceOptions = {}): VllmReference {
  const cfg = opts.model ?? DEFAULT_MODEL;
  const weights = opts.weights ?? DEFAULT_WEIGHTS;
  const maxModelLen = opts.maxModelLen ?? 32768;
  const sp = resolveSampling(samplingParams, tokenIds.length, { maxModelLen });
  const budget = budgetOf(sp.max_tokens, tokenIds.length, maxModelLen);
  const out = runModel(tokenIds, decodeParams(sp, budget, opts.choice ?? 0), cfg, weights);
  const n = out.output_ids.length;
  const last = out.output_ids[n - 1]!;
  const type = out.finish_reason.type === 'length' ? 'length' : 'stop';
  const finish = vllmFinish(type, last, n, sp, cfg.eosTokenId);
  let logprobs: unknown[] | null = null;
  if (sp.logprobs !== null) {
    const k = Math.max(0, sp.logprobs);
    logprobs = [];
    let state = contextState(tokenIds);
    for (const token of out.output_ids) {
      const rv = rawStep(state, token, k, cfg, weights);
      logprobs.push(JSON.parse(opts.legacyLogprobs ? legacyEntry(token, rv, k) : entryJson(token, rv, k)));
      state = foldToken(state, token);
    }
  }
  return {
    token_ids: out.output_ids,
    finish_reason: finish,
    logprobs,
    usage: { prompt_tokens: tokenIds.length, completion_tokens: n, total_tokens: tokenIds.length + n },
  };
}
