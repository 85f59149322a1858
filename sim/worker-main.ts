// One simulated worker as its own OS process: `node --import tsx sim/worker-main.ts [flags]`.
// Prints `listening on http://HOST:PORT` once it accepts connections (and tells a parent cluster
// over IPC). Started by a cluster, it exits when the parent's IPC channel closes, so a parent that
// dies, even by SIGKILL, leaves no orphan worker behind.

import { intFlag, parseFlags, UsageError } from '../cli/args.ts';
import { startWorker, type WorkerOptions } from './worker.ts';
import { startVllmWorker, type VllmWorkerOptions } from './vllm/worker.ts';
import { MIN_VOCAB_SIZE } from './vocab.ts';

export interface ListeningMessage {
  type: 'listening';
  port: number;
  url: string;
}

function nonEmpty(name: string, value: string | undefined): string | undefined {
  if (value === '') throw new UsageError(`--${name} must not be empty`);
  return value;
}

/** The worker's wire format and its options: SGLang's native API (default) or vLLM's generate API. */
export type WorkerLaunch = { format: 'sglang'; options: WorkerOptions } | { format: 'vllm'; options: VllmWorkerOptions };

const SGLANG_ONLY = ['incremental', 'text', 'preferred-sampling-params', 'preferred-max-new-tokens', 'legacy-errors', 'legacy-sampling', 'enable-custom-logit-processor', 'enable-return-hidden-states'] as const;
const VLLM_ONLY = ['max-model-len', 'max-logprobs', 'legacy-logprobs', 'legacy-generate', 'legacy-abort', 'enable-scale-out', 'enable-prompt-tokens-details', 'scheduling-policy'] as const;

function workerOptionsFromFlags(argv: string[]): WorkerLaunch {
  const v = parseFlags(argv, {
    format: { type: 'string' },
    'max-model-len': { type: 'string' },
    'max-logprobs': { type: 'string' },
    'legacy-logprobs': { type: 'boolean' },
    'legacy-generate': { type: 'boolean' },
    'legacy-abort': { type: 'boolean' },
    'enable-scale-out': { type: 'boolean' },
    'enable-prompt-tokens-details': { type: 'boolean' },
    'scheduling-policy': { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    'token-interval-ms': { type: 'string' },
    'prefill-us-per-token': { type: 'string' },
    incremental: { type: 'boolean' },
    text: { type: 'boolean' },
    'preferred-sampling-params': { type: 'string' },
    'preferred-max-new-tokens': { type: 'string' },
    'eos-every': { type: 'string' },
    'legacy-errors': { type: 'boolean' },
    'legacy-sampling': { type: 'boolean' },
    'enable-custom-logit-processor': { type: 'boolean' },
    'enable-return-hidden-states': { type: 'boolean' },
    'page-size': { type: 'string' },
    'model-path': { type: 'string' },
    'weight-version': { type: 'string' },
    tokenizer: { type: 'string' },
    'vocab-size': { type: 'string' },
  });
  if (v.tokenizer !== undefined && v['vocab-size'] !== undefined) throw new UsageError('--tokenizer sets the vocabulary: give --tokenizer or --vocab-size, not both');
  const vocabulary = {
    tokenizer: nonEmpty('tokenizer', v.tokenizer),
    vocabSize: v['vocab-size'] === undefined ? undefined : intFlag('vocab-size', v['vocab-size'], 32000, MIN_VOCAB_SIZE),
  };
  const format = v.format ?? 'sglang';
  if (format !== 'sglang' && format !== 'vllm') throw new UsageError(`--format must be sglang or vllm, got '${format}'`);
  const flagged = (names: readonly string[]) => names.filter((n) => (v as Record<string, unknown>)[n] !== undefined);
  if (format === 'vllm') {
    const wrong = flagged(SGLANG_ONLY);
    if (wrong.length > 0) throw new UsageError(`--${wrong[0]} is an SGLang worker option (not with --format vllm)`);
    const policy = v['scheduling-policy'] ?? 'fcfs';
    if (policy !== 'fcfs' && policy !== 'priority') throw new UsageError(`--scheduling-policy must be fcfs or priority, got '${policy}'`);
    return {
      format,
      options: {
        host: v.host ?? '127.0.0.1',
        port: intFlag('port', v.port, 0),
        tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 0),
        prefillUsPerToken: intFlag('prefill-us-per-token', v['prefill-us-per-token'], 20),
        eosEvery: intFlag('eos-every', v['eos-every'], 64),
        pageSize: intFlag('page-size', v['page-size'], 16, 1),
        modelPath: nonEmpty('model-path', v['model-path']),
        weightVersion: nonEmpty('weight-version', v['weight-version']),
        ...vocabulary,
        maxModelLen: intFlag('max-model-len', v['max-model-len'], 32768, 2),
        maxLogprobs: intFlag('max-logprobs', v['max-logprobs'], 20),
        legacyLogprobs: v['legacy-logprobs'] ?? false,
        legacyGenerate: v['legacy-generate'] ?? false,
        legacyAbort: v['legacy-abort'] ?? false,
        enableScaleOut: v['enable-scale-out'] ?? false,
        enablePromptTokensDetails: v['enable-prompt-tokens-details'] ?? false,
        schedulingPolicy: policy,
        inProcess: false,
      },
    };
  }
  const wrong = flagged(VLLM_ONLY);
  if (wrong.length > 0) throw new UsageError(`--${wrong[0]} is a vLLM worker option (needs --format vllm)`);
  let preferred: Record<string, unknown> | null = null;
  if (v['preferred-sampling-params'] !== undefined) {
    try {
      preferred = JSON.parse(v['preferred-sampling-params']) as Record<string, unknown>;
    } catch {
      throw new UsageError(`--preferred-sampling-params must be a JSON object, got '${v['preferred-sampling-params']}'`);
    }
  }
  if (v['preferred-max-new-tokens'] !== undefined) {
    preferred = { ...(preferred ?? {}), max_new_tokens: intFlag('preferred-max-new-tokens', v['preferred-max-new-tokens'], 0) };
  }
  const options: WorkerOptions = {
    host: v.host ?? '127.0.0.1',
    port: intFlag('port', v.port, 0),
    tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 0),
    prefillUsPerToken: intFlag('prefill-us-per-token', v['prefill-us-per-token'], 20),
    incremental: v.incremental ?? false,
    text: v.text ?? false,
    preferredSamplingParams: preferred,
    eosEvery: intFlag('eos-every', v['eos-every'], 64),
    legacyErrors: v['legacy-errors'] ?? false,
    legacySampling: v['legacy-sampling'] ?? false,
    enableCustomLogitProcessor: v['enable-custom-logit-processor'] ?? false,
    enableReturnHiddenStates: v['enable-return-hidden-states'] ?? false,
    pageSize: intFlag('page-size', v['page-size'], 1, 1),
    modelPath: nonEmpty('model-path', v['model-path']),
    weightVersion: nonEmpty('weight-version', v['weight-version']),
    ...vocabulary,
    inProcess: false,
  };
  return { format, options };
}

async function main(): Promise<void> {
  let opts: WorkerLaunch;
  try {
    opts = workerOptionsFromFlags(process.argv.slice(2));
  } catch (err) {
    console.error(`baton sim worker: ${(err as Error).message}`);
    process.exit(2);
  }
  let worker;
  try {
    worker = opts.format === 'vllm' ? await startVllmWorker(opts.options) : await startWorker(opts.options);
  } catch (err) {
    // A tokenizer that cannot load fails here too: its message names the file.
    console.error(`baton sim worker: cannot start on ${opts.options.host}:${opts.options.port}: ${(err as Error).message}`);
    process.exit(1);
  }
  console.log(`listening on ${worker.url}`);
  if (process.send) {
    const msg: ListeningMessage = { type: 'listening', port: worker.port, url: worker.url };
    process.send(msg);
    process.on('disconnect', () => process.exit(0));
  }
  const stop = () => {
    void worker.close().finally(() => process.exit(0));
    // A stuck close must not keep a worker alive past its cluster.
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

await main();
