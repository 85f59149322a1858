import { intFlag, parseFlags, UsageError } from './args.ts';
import { startCluster, type ClusterChange, type SimCluster } from '../sim/cluster.ts';
import { startControlServer } from '../sim/control.ts';

const USAGE = `usage: baton sim [options]

Starts simulated SGLang workers, each its own process, speaking SGLang's native API.

options:
  --workers N                  number of workers (default 2)
  --port P                     first port; workers use P, P+1, ... (default 0: free ports)
  --token-interval-ms T        pause between tokens of a stream, ms (default 0: as fast as possible)
  --prefill-us-per-token U     prefill cost per uncached prompt token, µs (default 20)
  --incremental                incremental streaming chunks (SGLang's --incremental-streaming-output)
  --text                       text mode (built-in vocabulary); default is token-only (--skip-tokenizer-init)
  --preferred-max-new-tokens M advertise preferred_sampling_params {"max_new_tokens": M}
  --legacy-errors              older SGLang's in-band stream error frame: {"error":{"message"}} only
  --enable-custom-logit-processor  accept custom_logit_processor (SGLang refuses it without this flag)
  --enable-return-hidden-states    accept return_hidden_states (SGLang refuses it without this flag)
  --page-size P                prefix cache page size, like SGLang's --page-size (default 1)
  --model-path NAME            model_path / served_model_name (default baton-sim)
  --weight-version V           weight_version (default "default"); path and version salt the model
  --control-port C             also serve the cluster control API (kill, restart, faults) on port C
  -h, --help                   show this help`;

function nonEmpty(name: string, value: string | undefined): string | undefined {
  if (value === '') throw new UsageError(`--${name} must not be empty`);
  return value;
}

// node:util's parse errors can span lines; the CLI promises one line per mistake.
function flags(argv: string[]) {
  try {
    return parseFlags(argv, {
      workers: { type: 'string' },
      port: { type: 'string' },
      'token-interval-ms': { type: 'string' },
      'prefill-us-per-token': { type: 'string' },
      incremental: { type: 'boolean' },
      text: { type: 'boolean' },
      'preferred-max-new-tokens': { type: 'string' },
      'legacy-errors': { type: 'boolean' },
      'enable-custom-logit-processor': { type: 'boolean' },
      'enable-return-hidden-states': { type: 'boolean' },
      'page-size': { type: 'string' },
      'model-path': { type: 'string' },
      'weight-version': { type: 'string' },
      'control-port': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    });
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(err.message.split('\n').join(' '));
    throw err;
  }
}

export async function run(argv: string[]): Promise<void> {
  const v = flags(argv);
  if (v.help) {
    console.log(USAGE);
    return;
  }
  const workers = intFlag('workers', v.workers, 2, 1);
  const port = intFlag('port', v.port, 0);
  if (port > 0 && port + workers - 1 > 65535) throw new UsageError(`--port ${port} leaves no room for ${workers} consecutive ports`);
  const preferredMax = v['preferred-max-new-tokens'];
  const options = {
    workers,
    port,
    tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 0),
    prefillUsPerToken: intFlag('prefill-us-per-token', v['prefill-us-per-token'], 20),
    incremental: v.incremental ?? false,
    text: v.text ?? false,
    preferredSamplingParams: preferredMax === undefined ? null : { max_new_tokens: intFlag('preferred-max-new-tokens', preferredMax, 0) },
    legacyErrors: v['legacy-errors'] ?? false,
    enableCustomLogitProcessor: v['enable-custom-logit-processor'] ?? false,
    enableReturnHiddenStates: v['enable-return-hidden-states'] ?? false,
    pageSize: intFlag('page-size', v['page-size'], 1, 1),
    modelPath: nonEmpty('model-path', v['model-path']),
    weightVersion: nonEmpty('weight-version', v['weight-version']),
  };
  const controlPort = v['control-port'] === undefined ? null : intFlag('control-port', v['control-port'], 0);
  let cluster: SimCluster;
  try {
    cluster = await startCluster(options);
  } catch (err) {
    // A taken port or a worker that cannot start: one line, not a stack.
    console.error(`baton sim: ${(err as Error).message}`);
    process.exit(1);
  }
  for (const w of cluster.workers()) console.log(`worker ${w.index} (pid ${w.pid}) listening on ${w.url}`);
  cluster.onChange((c: ClusterChange) => {
    if (c.alive) console.log(`worker ${c.index} (pid ${c.pid}) listening on ${c.url}`);
    else console.log(`worker ${c.index} (pid ${c.pid}) exited (${c.signal ?? `code ${c.code}`})`);
  });
  const control = controlPort === null ? null : await startControlServer(cluster, controlPort);
  if (control) console.log(`control API on ${control.url}`);

  // Stay up while workers are dead too (they can be restarted); only a signal ends the manager.
  const keepAlive = setInterval(() => {}, 1 << 30);
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    clearInterval(keepAlive);
    void Promise.all([cluster.stop(), control?.close()]).finally(() => process.exit(0));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}
