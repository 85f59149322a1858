// One simulated worker as its own OS process: `node --import tsx sim/worker-main.ts [flags]`.
// Prints `listening on http://HOST:PORT` once it accepts connections (and tells a parent cluster
// over IPC). Started by a cluster, it exits when the parent's IPC channel closes, so a parent that
// dies, even by SIGKILL, leaves no orphan worker behind.

import { parseFlags } from '../lib/args.ts';
import { parseWorkerFlags, workerArgSpecs, type WorkerLaunch } from './flags.ts';
import { startWorker } from './worker.ts';
import { startVllmWorker } from './vllm/worker.ts';

export type { WorkerLaunch } from './flags.ts';

export interface ListeningMessage {
  type: 'listening';
  port: number;
  url: string;
  /** A P/D prefill's bootstrap server port (kept across a restart, as the router caches it). */
  bootstrapPort?: number;
}

function workerOptionsFromFlags(argv: string[]): WorkerLaunch {
  const launch = parseWorkerFlags(parseFlags(argv, workerArgSpecs('process')));
  // Its own process: a `crash` fault kills it for real.
  launch.options.inProcess = false;
  return launch;
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
    const pd = worker.stats().pd;
    const msg: ListeningMessage = { type: 'listening', port: worker.port, url: worker.url, ...(pd?.mode === 'prefill' ? { bootstrapPort: pd.bootstrapPort } : {}) };
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
