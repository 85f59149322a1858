// The campaign's traffic: request i is a pure function of (seed, i), so the same seed sends the
// same requests in the same order whatever the timing. The mix covers what migration must get
// right (stream and unary, logprobs with and without top lists and prompt windows, min/stop/EOS
// rules, zero budgets) and a share that must NOT migrate (stateful sampling, unresolved budget).

import { fmix32 } from '../sim/model.ts';
import { Rng } from './rng.ts';
import { DEFAULT_MODEL, runModel, type DecodeParams } from '../sim/model.ts';

export type TrafficKind = 'greedy' | 'sampling_seed' | 'frequency_penalty' | 'presence_penalty' | 'unresolved_budget';

export interface RequestSpec {
  index: number;
  /** The logical id, sent as `rid`: trace rows and worker stats are found by it. */
  id: string;
  kind: TrafficKind;
  stream: boolean;
  body: Record<string, unknown>;
  /** Whether migration.md's admission rules admit this request. */
  admitted: boolean;
  /** The admission reason the router must record when it refuses. */
  reason: string | null;
  /** What the worker model decodes with: the fault-free reference is runModel(prompt, decode). */
  prompt: number[];
  decode: DecodeParams;
  returnLogprob: boolean;
  logprobStartLen: number;
  topLogprobsNum: number;
  /** A client that hangs up after this many stream chunks (a cancel); undefined: reads to the end. */
  cancelAfterChunks?: number;
}

/** SGLang's default budget when the request gives none (the simulated workers advertise none). */
export const WORKER_DEFAULT_MAX_NEW_TOKENS = 128;

const NOT_ADMITTED: Record<Exclude<TrafficKind, 'greedy'>, number> = {
  sampling_seed: 4,
  frequency_penalty: 3,
  presence_penalty: 1,
  unresolved_budget: 2,
};

export interface TrafficOptions {
  seed: number;
  /** Share of requests the router must refuse to migrate. */
  nonMigratableShare: number;
  /** Largest max_new_tokens asked for. */
  maxNewTokens: number;
  /** Share of stream requests whose client hangs up mid-stream. */
  cancelShare: number;
}

export function planRequest(o: TrafficOptions, index: number): RequestSpec {
  const rng = new Rng(o.seed, fmix32(index + 1));
  const id = `chaos-${o.seed}-${index}`;
  const kind: TrafficKind = rng.chance(o.nonMigratableShare) ? rng.weighted(NOT_ADMITTED) : 'greedy';
  const stream = rng.chance(0.6);
  const prompt = Array.from({ length: rng.int(1, 48) }, () => rng.int(3, DEFAULT_MODEL.vocabSize - 1));

  const sampling: Record<string, unknown> = {};
  // A budget of 0 is legal and must end without a token; keep it rare.
  const maxNew = rng.chance(0.02) ? 0 : rng.int(1, o.maxNewTokens);
  const decode: DecodeParams = { max_new_tokens: maxNew, top_k: -1 };
  if (kind === 'unresolved_budget') decode.max_new_tokens = WORKER_DEFAULT_MAX_NEW_TOKENS;
  else sampling.max_new_tokens = maxNew;

  if (kind === 'greedy') {
    if (rng.chance(0.2)) {
      // Explicit greedy, as clients often write it; the worker turns it into top_k = 1.
      sampling.temperature = 0;
      decode.temperature = 0;
      decode.top_k = 1;
    }
    if (rng.chance(0.15) && maxNew > 1) {
      const min = rng.int(1, maxNew);
      sampling.min_new_tokens = min;
      decode.min_new_tokens = min;
    }
    if (rng.chance(0.1)) {
      sampling.ignore_eos = true;
      decode.ignore_eos = true;
    }
    if (rng.chance(0.15) && maxNew > 2) {
      // A stop token the uninterrupted run really meets, so a stop finish straddles migrations.
      const free = runModel(prompt, { ...decode, ignore_eos: true });
      const stop = free.output_ids[rng.int(1, free.output_ids.length - 1)]!;
      sampling.stop_token_ids = [stop];
      decode.stop_token_ids = [stop];
    }
  } else if (kind === 'sampling_seed') {
    const t = Math.round((0.3 + rng.float()) * 100) / 100;
    const seed = rng.int(1, 1_000_000);
    sampling.temperature = t;
    sampling.sampling_seed = seed;
    decode.temperature = t;
    decode.sampling_seed = seed;
  } else if (kind === 'frequency_penalty' || kind === 'presence_penalty') {
    // The simulated model ignores penalties, so the reference is the greedy run; what matters is
    // that the router treats the request as stateful and never continues it.
    sampling[kind] = Math.round((0.1 + rng.float()) * 100) / 100;
  }

  const returnLogprob = rng.chance(0.4);
  const topLogprobsNum = returnLogprob && rng.chance(0.5) ? rng.int(1, 3) : 0;
  // A prompt window from an earlier position: the continuation's window (which would cover the
  // replayed tokens) must never reach the client.
  const logprobStartLen = returnLogprob && rng.chance(0.3) ? rng.int(0, prompt.length - 1) : -1;
  const body: Record<string, unknown> = { input_ids: prompt, sampling_params: sampling, rid: id, stream };
  if (returnLogprob) {
    body.return_logprob = true;
    if (topLogprobsNum > 0) body.top_logprobs_num = topLogprobsNum;
    if (logprobStartLen >= 0) body.logprob_start_len = logprobStartLen;
  }
  decode.top_logprobs_num = topLogprobsNum;
  const admitted = kind === 'greedy';
  const spec: RequestSpec = { index, id, kind, stream, body, admitted, reason: admitted ? null : kind, prompt, decode, returnLogprob, logprobStartLen, topLogprobsNum };
  if (stream && rng.chance(o.cancelShare)) spec.cancelAfterChunks = rng.int(1, 8);
  return spec;
}
