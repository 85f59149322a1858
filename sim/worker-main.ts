// One simulated worker as its own OS process: `node --import tsx sim/worker-main.ts [flags]`.
// Prints `listening on http://HOST:PORT` once it accepts connections (and tells a parent cluster
// over IPC). Started by a cluster, it exits when the parent's IPC channel closes, so a parent that
// dies, even by SIGKILL, leaves no orphan worker behind.

import { intFlag, parseFlags, UsageError } from '../cli/args.ts';
import { startWorker, type WorkerOptions } from './worker.ts';

export interface ListeningMessage {
  type: 'listening';
  port: number;
  url: string;
}

function nonEmpty(name: string, value: string | undefined): string | undefined {
  if (value === '') throw new UsageError(`--${name} must not be empty`);
  return value;
}

function workerOptionsFromFlags(argv: string[]): WorkerOptions {
  const v = parseFlags(argv, {
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
    'enable-custom-logit-processor': { type: 'boolean' },
    'enable-return-hidden-states': { type: 'boolean' },
    'page-size': { type: 'string' },
    'model-path': { type: 'string' },
    'weight-version': { type: 'string' },
  });
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
  return {
    host: v.host ?? '127.0.0.1',
    port: intFlag('port', v.port, 0),
    tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 0),
    prefillUsPerToken: intFlag('prefill-us-per-token', v['prefill-us-per-token'], 20),
    incremental: v.incremental ?? false,
    text: v.text ?? false,
    preferredSamplingParams: preferred,
    eosEvery: intFlag('eos-every', v['eos-every'], 64),
    legacyErrors: v['legacy-errors'] ?? false,
    enableCustomLogitProcessor: v['enable-custom-logit-processor'] ?? false,
    enableReturnHiddenStates: v['enable-return-hidden-states'] ?? false,
    pageSize: intFlag('page-size', v['page-size'], 1, 1),
    modelPath: nonEmpty('model-path', v['model-path']),
    weightVersion: nonEmpty('weight-version', v['weight-version']),
    inProcess: false,
  };
}

async function main(): Promise<void> {
  let opts: WorkerOptions;
  try {
    opts = workerOptionsFromFlags(process.argv.slice(2));
  } catch (err) {
    console.error(`baton sim worker: ${(err as Error).message}`);
    process.exit(2);
  }
  let worker;
  try {
    worker = await startWorker(opts);
  } catch (err) {
    console.error(`baton sim worker: cannot listen on ${opts.host}:${opts.port}: ${(err as Error).message}`);
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
