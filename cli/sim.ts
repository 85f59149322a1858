import { intFlag, parseFlags, UsageError } from '../lib/args.ts';
import { startCluster, type ClusterChange, type SimCluster } from '../sim/cluster.ts';
import { startControlServer } from '../sim/control.ts';
import { parseWorkerFlags, workerArgSpecs } from '../sim/flags.ts';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const USAGE = `usage: baton sim [options]

Starts simulated workers, each its own process, speaking SGLang's native API (default) or
vLLM's token-in/token-out generate API (--format vllm).

options:
  --format sglang|vllm         the workers' wire format (default sglang)
  --workers N                  number of workers (default 2)
  --port P                     first port; workers use P, P+1, ... (default 0: free ports)
  --token-interval-ms T        pause between tokens of a stream, ms (default 0: as fast as possible)
  --prefill-us-per-token U     prefill cost per uncached prompt token, µs (default 20)
  --incremental                incremental streaming chunks (SGLang's --incremental-streaming-output)
  --text                       text mode (built-in vocabulary); default is token-only (--skip-tokenizer-init)
  --preferred-max-new-tokens M advertise preferred_sampling_params {"max_new_tokens": M}
  --legacy-errors              older SGLang's in-band stream error frame: {"error":{"message"}} only
  --legacy-sampling            SGLang 2025's SamplingParams: stop_regex and sampling_seed are a TypeError
  --enable-custom-logit-processor  accept custom_logit_processor (SGLang refuses it without this flag)
  --enable-return-hidden-states    accept return_hidden_states (SGLang refuses it without this flag)
  --page-size P                prefix cache page size, like SGLang's --page-size / vLLM's --block-size
                               (default 1 for sglang, 16 for vllm)
  --max-total-tokens N         the prefix cache's capacity in tokens, like SGLang's --max-total-tokens
                               (advertised as max_total_num_tokens; default 1048576)
  --serial-prefill             prefills run one after another, as SGLang's scheduler runs one prefill
                               batch at a time (default: they overlap)
  --model-path NAME            model_path / served_model_name (default baton-sim)
  --weight-version V           weight_version (default "default"); path and version salt the model
  --tokenizer DIR              a Hugging Face model directory (tokenizer.json, tokenizer_config.json): the
                               model generates that vocabulary's ordinary ids and ends on its EOS; with
                               --text, prompts are tokenized and answers decoded by it as SGLang does
                               (vLLM workers: vocabulary and EOS only)
  --vocab-size N               vocabulary size without a tokenizer (default 32000, at least 512)
  --control-port C             also serve the cluster control API (kill, restart, faults) on port C

P/D disaggregation (SGLang workers; docs/simulator.md "P/D roles"):
  --prefill N --decode M       N prefill then M decode workers (instead of --workers)
  --disaggregation-mode prefill|decode|null   every worker's role, like SGLang's flag (default null)
  --disaggregation-bootstrap-port B   the (first) prefill's bootstrap server port (default 0: a free port)
  --disaggregation-bootstrap-timeout-ms T  a prefill request's wait for its decode (default 300000)
  --disaggregation-waiting-timeout-ms T    a decode request's wait for its KV (default 300000)

vLLM workers only (--format vllm):
  --max-model-len L            context length, like vLLM's --max-model-len (default 32768)
  --max-logprobs K             like vLLM's --max-logprobs (default 20)
  --legacy-logprobs            older logprobs shape: {"token":"token_id:N","logprob","bytes","top_logprobs"}
  --legacy-generate            older serve/disagg generate: no output_mode / weight_versions, and a stream
                               skips every output without new tokens (even an abort's final one)
  --legacy-abort               older abort API (vLLM before PR #58588, 2026-10; implied by --legacy-generate):
                               no /inference/v1/abort_requests, only /abort_requests
  --enable-scale-out           as vLLM's --enable-scale-out without --tokens-only: no /abort_requests
                               (with --legacy-abort: no abort endpoint, only a closed connection aborts)
  --enable-prompt-tokens-details  usage.prompt_tokens_details.cached_tokens, like vLLM's flag
  --scheduling-policy fcfs|priority  like vLLM's (default fcfs: a non-zero priority is refused)

SGLang-only options (--incremental, --text, --preferred-max-new-tokens, --legacy-errors,
--legacy-sampling, --enable-custom-logit-processor, --enable-return-hidden-states) are refused with --format vllm.
  -h, --help                   show this help`;

// node:util's parse errors can span lines; the CLI promises one line per mistake.
function flags(argv: string[]) {
  try {
    return parseFlags(argv, {
      ...workerArgSpecs('cli'),
      workers: { type: 'string' },
      prefill: { type: 'string' },
      decode: { type: 'string' },
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
  const { format, options: worker } = parseWorkerFlags(v);
  const pd = v.prefill !== undefined || v.decode !== undefined;
  if (pd && v.workers !== undefined) throw new UsageError('--prefill/--decode set the workers: give them or --workers, not both');
  if (pd && format !== 'sglang') throw new UsageError('--prefill/--decode are SGLang worker options (not with --format vllm)');
  const roles = pd ? [...Array<'prefill'>(intFlag('prefill', v.prefill, 1, 1)).fill('prefill'), ...Array<'decode'>(intFlag('decode', v.decode, 1, 1)).fill('decode')] : undefined;
  const workers = roles?.length ?? intFlag('workers', v.workers, 2, 1);
  const port = worker.port ?? 0;
  if (port > 0 && port + workers - 1 > 65535) throw new UsageError(`--port ${port} leaves no room for ${workers} consecutive ports`);
  const options = { ...worker, format, workers, port, ...(roles ? { roles } : {}) };
  if (options.tokenizer !== undefined && !existsSync(join(options.tokenizer, 'tokenizer.json'))) throw new UsageError(`--tokenizer ${options.tokenizer}: no tokenizer.json there`);
  const controlPort = v['control-port'] === undefined ? null : intFlag('control-port', v['control-port'], 0);
  let cluster: SimCluster;
  try {
    cluster = await startCluster(options);
  } catch (err) {
    // A taken port or a worker that cannot start: one line, not a stack.
    console.error(`baton sim: ${(err as Error).message}`);
    process.exit(1);
  }
  const role = (i: number) => {
    const w = cluster.workers()[i]!;
    return w.role === 'null' ? '' : w.role === 'prefill' ? ` (prefill, bootstrap port ${w.bootstrapPort})` : ' (decode)';
  };
  for (const w of cluster.workers()) console.log(`worker ${w.index} (pid ${w.pid}) listening on ${w.url}${role(w.index)}`);
  cluster.onChange((c: ClusterChange) => {
    if (c.alive) console.log(`worker ${c.index} (pid ${c.pid}) listening on ${c.url}${role(c.index)}`);
    else console.log(`worker ${c.index} (pid ${c.pid}) exited (${c.signal ?? `code ${c.code}`})`);
  });
  const control = controlPort === null ? null : await startControlServer(cluster, controlPort);
  if (control) console.log(`control API on ${control.url}`);
  // At full speed a 128-token answer is over in milliseconds: nothing can be killed mid-stream by
  // hand. Stderr, so that scripts reading the worker lines on stdout are unaffected.
  if ((options.tokenIntervalMs ?? 0) === 0) console.error('hint: tokens stream as fast as possible; to kill a worker mid-stream by hand, pace them, e.g. --token-interval-ms 20');

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
