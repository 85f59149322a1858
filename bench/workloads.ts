// The four workloads of docs/benchmarks.md, as data: what one request looks like and how many run at once.
// Every request asks for an explicit budget with ignore_eos, so each one produces exactly that many
// tokens whatever the target, and tokens/s compares like with like.
// W1, W2 and W4 also run in vLLM's wire format: the same sizes, vLLM's request shape
// (`token_ids`, `sampling_params.max_tokens`, `stream`, `request_id`) on `/inference/v1/generate`,
// against simulated vLLM workers.

export type WireFormat = 'sglang' | 'vllm';
/** The workloads as `--only` names them; each runs in one or both formats. */
export type BaseWorkloadName = 'W1' | 'W2' | 'W3' | 'W4';
/** SGLang's workloads keep their names; vLLM's are suffixed (there is no vLLM W3). */
export type SharedName = BaseWorkloadName | 'W1-vllm' | 'W2-vllm' | 'W4-vllm';
/**
 * The same workloads on the pinned layout (`-pinned`): the proxy under test alone on CPU 1, the
 * workers, the load generator and the bench on CPU 0. W4 has its own two parts instead.
 */
export type PinnedName = 'W1-pinned' | 'W2-pinned' | 'W3-pinned' | 'W1-vllm-pinned' | 'W2-vllm-pinned';
export type WorkloadName = SharedName | PinnedName;

/**
 * Where the processes of a run are: `shared`, every process on every CPU (the scheduler's
 * choice); `pinned`, the proxy under test on a CPU of its own (as deployed, where the workers run
 * on GPU hosts of their own) and everything else on the other.
 */
export type Layout = 'shared' | 'pinned';

export function layoutOf(name: WorkloadName): Layout {
  return name.endsWith('-pinned') ? 'pinned' : 'shared';
}

/** The pinned layout's variant of a workload: the same requests, its own name. */
export function pinnedOf(w: Workload): Workload {
  return { ...w, name: `${w.name}-pinned` as PinnedName, title: `${w.title}, proxy pinned` };
}

export const VLLM_WORKLOADS: Partial<Record<BaseWorkloadName, WorkloadName>> = { W1: 'W1-vllm', W2: 'W2-vllm', W4: 'W4-vllm' };

/** The workload's wire format, from its name. */
export function formatOf(name: WorkloadName): WireFormat {
  return name.includes('-vllm') ? 'vllm' : 'sglang';
}

/** The workload as `--only` names it (W1-vllm → W1, W2-pinned → W2). */
export function baseOf(name: WorkloadName): BaseWorkloadName {
  return name.replace(/-pinned$/, '').replace(/-vllm$/, '') as BaseWorkloadName;
}

export interface Workload {
  name: WorkloadName;
  title: string;
  promptTokens: number;
  newTokens: number;
  concurrency: number;
  logprobs: boolean;
  /** Chunks of the cluster it runs on: SGLang's default cumulative, or --incremental-streaming-output (vLLM: always deltas). */
  incremental: boolean;
  /** Pause between a worker's tokens, ms (0: as fast as the worker can). */
  tokenIntervalMs: number;
  /** The wire format of its requests and of the workers it runs on. */
  format: WireFormat;
}

export interface WorkloadSizes {
  /** W3's number of concurrent streams. */
  streams: number;
  /** W3's token interval. */
  w3IntervalMs: number;
}

export function workloads(sizes: WorkloadSizes): Record<WorkloadName, Workload> {
  const shared = sharedWorkloads(sizes);
  const pinned = (['W1', 'W2', 'W3', 'W1-vllm', 'W2-vllm'] as const).map((n) => pinnedOf(shared[n]));
  return { ...shared, ...(Object.fromEntries(pinned.map((w) => [w.name, w])) as Record<PinnedName, Workload>) };
}

function sharedWorkloads(sizes: WorkloadSizes): Record<SharedName, Workload> {
  return {
    W1: { name: 'W1', title: 'short', promptTokens: 64, newTokens: 32, concurrency: 64, logprobs: false, incremental: false, tokenIntervalMs: 0, format: 'sglang' },
    W2: { name: 'W2', title: 'logprob-heavy', promptTokens: 512, newTokens: 256, concurrency: 16, logprobs: true, incremental: false, tokenIntervalMs: 0, format: 'sglang' },
    W3: {
      name: 'W3',
      title: 'many streams',
      promptTokens: 64,
      newTokens: 128,
      concurrency: sizes.streams,
      logprobs: false,
      incremental: true,
      tokenIntervalMs: sizes.w3IntervalMs,
      format: 'sglang',
    },
    W4: { name: 'W4', title: 'migration gap', promptTokens: 64, newTokens: 32, concurrency: 64, logprobs: false, incremental: false, tokenIntervalMs: 0, format: 'sglang' },
    // vLLM streams deltas (one token a frame) and no prompt logprobs: its W2 carries each output
    // token's top-5 logprobs, ~0.5 KB a frame, not SGLang's 23 MB of repeated prompt logprobs.
    'W1-vllm': { name: 'W1-vllm', title: 'short', promptTokens: 64, newTokens: 32, concurrency: 64, logprobs: false, incremental: true, tokenIntervalMs: 0, format: 'vllm' },
    'W2-vllm': { name: 'W2-vllm', title: 'logprobs', promptTokens: 512, newTokens: 256, concurrency: 16, logprobs: true, incremental: true, tokenIntervalMs: 0, format: 'vllm' },
    'W4-vllm': { name: 'W4-vllm', title: 'migration gap', promptTokens: 64, newTokens: 32, concurrency: 64, logprobs: false, incremental: true, tokenIntervalMs: 0, format: 'vllm' },
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

/** Where a request of `w` goes: SGLang's `/generate` or vLLM's token-in/token-out generate. */
export function generatePath(w: Workload): string {
  return w.format === 'vllm' ? '/inference/v1/generate' : '/generate';
}

/** Top logprobs per output token in W2 (SGLang's top_logprobs_num, vLLM's logprobs). */
const TOP_LOGPROBS = 5;

/** The body of one request of `w`, in its format. */
export function requestBody(w: Workload, seq: number, rid: string): string {
  if (w.format === 'vllm') {
    // stream_options.include_usage: the last frame says completion_tokens, which is how the load
    // generator checks that every target produced the whole budget.
    const sampling: Record<string, unknown> = { max_tokens: w.newTokens, ignore_eos: true, temperature: 0 };
    if (w.logprobs) sampling.logprobs = TOP_LOGPROBS;
    return JSON.stringify({ request_id: rid, token_ids: promptIds(seq, w.promptTokens), sampling_params: sampling, stream: true, stream_options: { include_usage: true } });
  }
  const body: Record<string, unknown> = {
    rid,
    input_ids: promptIds(seq, w.promptTokens),
    sampling_params: { max_new_tokens: w.newTokens, ignore_eos: true, temperature: 0 },
    stream: true,
  };
  if (w.logprobs) Object.assign(body, { return_logprob: true, logprob_start_len: 0, top_logprobs_num: TOP_LOGPROBS });
  return JSON.stringify(body);
}
