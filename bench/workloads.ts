// The four workloads of issue 6, as data: what one request looks like and how many run at once.
// Every request asks for an explicit budget with ignore_eos, so each one produces exactly that many
// tokens whatever the target, and tokens/s compares like with like.

export type WorkloadName = 'W1' | 'W2' | 'W3' | 'W4';

export interface Workload {
  name: WorkloadName;
  title: string;
  promptTokens: number;
  newTokens: number;
  concurrency: number;
  logprobs: boolean;
  /** Chunks of the cluster it runs on: SGLang's default cumulative, or --incremental-streaming-output. */
  incremental: boolean;
  /** Pause between a worker's tokens, ms (0: as fast as the worker can). */
  tokenIntervalMs: number;
}

export interface WorkloadSizes {
  /** W3's number of concurrent streams. */
  streams: number;
  /** W3's token interval. */
  w3IntervalMs: number;
}

export function workloads(sizes: WorkloadSizes): Record<WorkloadName, Workload> {
  return {
    W1: { name: 'W1', title: 'short', promptTokens: 64, newTokens: 32, concurrency: 64, logprobs: false, incremental: false, tokenIntervalMs: 0 },
    W2: { name: 'W2', title: 'logprob-heavy', promptTokens: 512, newTokens: 256, concurrency: 16, logprobs: true, incremental: false, tokenIntervalMs: 0 },
    W3: {
      name: 'W3',
      title: 'many streams',
      promptTokens: 64,
      newTokens: 128,
      concurrency: sizes.streams,
      logprobs: false,
      incremental: true,
      tokenIntervalMs: sizes.w3IntervalMs,
    },
    W4: { name: 'W4', title: 'migration gap', promptTokens: 64, newTokens: 32, concurrency: 64, logprobs: false, incremental: false, tokenIntervalMs: 0 },
  };
}

const VOCAB = 32000;
const FIRST_ORDINARY_ID = 3;

/**
 * Prompt ids for request number `seq`: distinct per request (its first token differs), so no
 * worker's prefix cache turns a prefill into a cache hit and every target does the same work.
 */
export function promptIds(seq: number, length: number): number[] {
  const ids = new Array<number>(length);
  for (let j = 0; j < length; j++) ids[j] = FIRST_ORDINARY_ID + ((seq * 7919 + j * 104_729) % (VOCAB - FIRST_ORDINARY_ID));
  return ids;
}

/** The /generate body of one request of `w`. */
export function requestBody(w: Workload, seq: number, rid: string): string {
  const body: Record<string, unknown> = {
    rid,
    input_ids: promptIds(seq, w.promptTokens),
    sampling_params: { max_new_tokens: w.newTokens, ignore_eos: true, temperature: 0 },
    stream: true,
  };
  if (w.logprobs) Object.assign(body, { return_logprob: true, logprob_start_len: 0, top_logprobs_num: 5 });
  return JSON.stringify(body);
}
