// The simulated worker's command-line flags, in one table: `baton sim` (cli/sim.ts) and one
// worker process (worker-main.ts) parse them with the same parser, and a cluster (cluster.ts)
// turns a worker's options back into them for each child it starts.

import { intFlag, UsageError } from '../lib/args.ts';
import type { WorkerOptions } from './worker.ts';
import type { VllmWorkerOptions } from './vllm/worker.ts';
import { MIN_VOCAB_SIZE } from './vocab.ts';

/** Every option of either format's worker. */
export type AnyWorkerOptions = WorkerOptions & VllmWorkerOptions;

/** The worker's wire format and its options: SGLang's native API (default) or vLLM's generate API. */
export type WorkerLaunch = { format: 'sglang'; options: WorkerOptions } | { format: 'vllm'; options: VllmWorkerOptions };

interface FlagSpec {
  /** The worker option it sets (none: the flag is read on its own). */
  option?: keyof AnyWorkerOptions;
  kind: 'int' | 'bool' | 'string' | 'json';
  /** An int's least value. */
  min?: number;
  /** Only this format's worker takes it. */
  only?: 'sglang' | 'vllm';
  /** Only a worker process takes it, not `baton sim`. */
  processOnly?: true;
}

/** The worker flags. `format`, `host`, `port` and `preferred-max-new-tokens` are read on their own. */
export const WORKER_FLAGS: Readonly<Record<string, FlagSpec>> = {
  format: { kind: 'string' },
  host: { kind: 'string', processOnly: true },
  port: { kind: 'int' },
  'token-interval-ms': { option: 'tokenIntervalMs', kind: 'int' },
  'prefill-us-per-token': { option: 'prefillUsPerToken', kind: 'int' },
  'eos-every': { option: 'eosEvery', kind: 'int', processOnly: true },
  'page-size': { option: 'pageSize', kind: 'int', min: 1 },
  'max-total-tokens': { option: 'maxTotalTokens', kind: 'int', min: 1 },
  'serial-prefill': { option: 'serialPrefill', kind: 'bool' },
  'model-path': { option: 'modelPath', kind: 'string' },
  'weight-version': { option: 'weightVersion', kind: 'string' },
  tokenizer: { option: 'tokenizer', kind: 'string' },
  'vocab-size': { option: 'vocabSize', kind: 'int', min: MIN_VOCAB_SIZE },
  script: { option: 'script', kind: 'string' },
  incremental: { option: 'incremental', kind: 'bool', only: 'sglang' },
  text: { option: 'text', kind: 'bool', only: 'sglang' },
  'preferred-sampling-params': { option: 'preferredSamplingParams', kind: 'json', only: 'sglang', processOnly: true },
  'preferred-max-new-tokens': { kind: 'int', only: 'sglang' },
  'legacy-errors': { option: 'legacyErrors', kind: 'bool', only: 'sglang' },
  'legacy-sampling': { option: 'legacySampling', kind: 'bool', only: 'sglang' },
  'enable-custom-logit-processor': { option: 'enableCustomLogitProcessor', kind: 'bool', only: 'sglang' },
  'enable-return-hidden-states': { option: 'enableReturnHiddenStates', kind: 'bool', only: 'sglang' },
  'disaggregation-mode': { option: 'disaggregationMode', kind: 'string', only: 'sglang' },
  'disaggregation-bootstrap-port': { option: 'disaggregationBootstrapPort', kind: 'int', only: 'sglang' },
  'disaggregation-bootstrap-timeout-ms': { option: 'disaggregationBootstrapTimeoutMs', kind: 'int', only: 'sglang' },
  'disaggregation-waiting-timeout-ms': { option: 'disaggregationWaitingTimeoutMs', kind: 'int', only: 'sglang' },
  'max-model-len': { option: 'maxModelLen', kind: 'int', min: 2, only: 'vllm' },
  'max-logprobs': { option: 'maxLogprobs', kind: 'int', only: 'vllm' },
  'legacy-logprobs': { option: 'legacyLogprobs', kind: 'bool', only: 'vllm' },
  'legacy-generate': { option: 'legacyGenerate', kind: 'bool', only: 'vllm' },
  'legacy-abort': { option: 'legacyAbort', kind: 'bool', only: 'vllm' },
  'enable-scale-out': { option: 'enableScaleOut', kind: 'bool', only: 'vllm' },
  'enable-prompt-tokens-details': { option: 'enablePromptTokensDetails', kind: 'bool', only: 'vllm' },
  'scheduling-policy': { option: 'schedulingPolicy', kind: 'string', only: 'vllm' },
};

type ArgSpec = { type: 'string' | 'boolean' };

/** The node:util parseArgs table of the worker flags (`baton sim` leaves out the process-only ones). */
export function workerArgSpecs(who: 'process' | 'cli'): Record<string, ArgSpec> {
  const out: Record<string, ArgSpec> = {};
  for (const [flag, spec] of Object.entries(WORKER_FLAGS)) {
    if (who === 'cli' && spec.processOnly) continue;
    out[flag] = { type: spec.kind === 'bool' ? 'boolean' : 'string' };
  }
  return out;
}

export type FlagValues = Readonly<Record<string, string | boolean | undefined>>;

/**
 * The format and options the flags ask for; a UsageError names the first wrong flag. Options not
 * given stay unset (the worker's defaults apply); host and port are always set.
 */
export function parseWorkerFlags(v: FlagValues): WorkerLaunch {
  const format = (v.format as string | undefined) ?? 'sglang';
  if (format !== 'sglang' && format !== 'vllm') throw new UsageError(`--format must be sglang or vllm, got '${format}'`);
  for (const [flag, spec] of Object.entries(WORKER_FLAGS)) {
    if (v[flag] === undefined || spec.only === undefined || spec.only === format) continue;
    throw new UsageError(spec.only === 'sglang' ? `--${flag} is an SGLang worker option (not with --format vllm)` : `--${flag} is a vLLM worker option (needs --format vllm)`);
  }
  const policy = v['scheduling-policy'];
  if (policy !== undefined && policy !== 'fcfs' && policy !== 'priority') throw new UsageError(`--scheduling-policy must be fcfs or priority, got '${String(policy)}'`);
  const mode = v['disaggregation-mode'];
  if (mode !== undefined && mode !== 'null' && mode !== 'prefill' && mode !== 'decode') throw new UsageError(`--disaggregation-mode must be prefill, decode or null, got '${String(mode)}'`);
  if (v.tokenizer !== undefined && v['vocab-size'] !== undefined) throw new UsageError('--tokenizer sets the vocabulary: give --tokenizer or --vocab-size, not both');
  const options: Record<string, unknown> = { host: (v.host as string | undefined) ?? '127.0.0.1', port: intFlag('port', v.port as string | undefined, 0) };
  for (const [flag, spec] of Object.entries(WORKER_FLAGS)) {
    const value = v[flag];
    if (value === undefined || spec.option === undefined) continue;
    if (spec.kind === 'bool') options[spec.option] = value;
    else if (spec.kind === 'int') options[spec.option] = intFlag(flag, value as string, 0, spec.min ?? 0);
    else if (spec.kind === 'json') options[spec.option] = jsonObject(flag, value as string);
    else if (value === '') throw new UsageError(`--${flag} must not be empty`);
    else options[spec.option] = value;
  }
  const preferredMax = v['preferred-max-new-tokens'] as string | undefined;
  if (preferredMax !== undefined) {
    options.preferredSamplingParams = { ...((options.preferredSamplingParams as object | undefined) ?? {}), max_new_tokens: intFlag('preferred-max-new-tokens', preferredMax, 0) };
  }
  return { format, options } as WorkerLaunch;
}

function jsonObject(flag: string, value: string): Record<string, unknown> {
  try {
    return JSON.parse(value) as Record<string, unknown>;
  } catch {
    throw new UsageError(`--${flag} must be a JSON object, got '${value}'`);
  }
}

/** The flags that give a worker process `options` (the inverse of parseWorkerFlags, without host, port and format). */
export function workerFlags(options: Partial<AnyWorkerOptions>): string[] {
  const f: string[] = [];
  for (const [flag, spec] of Object.entries(WORKER_FLAGS)) {
    if (spec.option === undefined) continue;
    const value = options[spec.option];
    if (value === undefined || value === null || value === false) continue;
    if (spec.kind === 'bool') f.push(`--${flag}`);
    else f.push(`--${flag}`, spec.kind === 'json' ? JSON.stringify(value) : String(value));
  }
  return f;
}
