// `baton chaos`: a chaos campaign against a simulated cluster (see chaos/campaign.ts and
// docs/reliability.md). Exits 1 on any violation, so CI can run it as a gate.
import { intFlag, parseFlags, UsageError } from '../lib/args.ts';
import { CAMPAIGN_FORMATS, type CampaignFormat } from '../chaos/formats.ts';

const HELP = `usage: baton chaos [options]

Starts simulated workers and the router in its own process, sends seeded traffic while a seeded
schedule injects faults, then checks every answer against the fault-free reference, the trace
rows, workers benched by a client's mistake (a benching the router reported that no injected
fault on that worker explains), in-flight counts and router memory.

Workers: SGLang workers (--format sglang: half cumulative, half incremental, so one request's
attempts can land on both modes), vLLM workers (--format vllm), or both (--format mixed: half of
--workers are vLLM, the traffic holds requests of both formats, each sent to its format's
endpoint). On top of them, one SGLang worker serving other weights (weight_version
chaos-other-weights; not with --format vllm), and one worker of each format sits behind a proxy
that answers 429 to 30% of continuations.

Traffic: streams and unary requests, logprobs, budgets, min/stop/EOS rules, client cancels,
requests that must not migrate, bad requests (an id beyond the vocabulary), shared header ids
and prefix-sharing ids with a cancel. And clients that must hurt nobody else: SGLang requests
with an unknown sampling_params key (max_tokens, a typo), SGLang streams whose stream_interval
spaces frames around the router's inter-token deadline, clients that open a stream and never
read it (the router must cut them after its client write timeout), and bursts of short requests
4.8-5.2 s apart (around uvicorn's 5 s keep-alive). Faults: kill -9 and restart, self-crash mid-stream, hang,
connection reset, reject (SGLang 503, vLLM engine dead 500), slow tokens, engine abort, and on
vLLM workers finish_reason "error".

P/D (--pd): prefill and decode SGLang workers (sim/pd.ts) behind the router in P/D mode
(docs/pd.md); faults over both legs (a prefill killed, hung, reset or refusing before its rooms
transfer; a decode killed mid-stream, crashing after some tokens, reset, hung or slow), at most one
worker of each role at a time. The verdict: every request answered and equal to the fault-free
answer, no room ever seen twice by any worker (read from the workers), no worker exit that no fault
caused, no room issued twice in the trace rows (docs/reliability.md).

options:
  --pd                   the P/D campaign above (--prefill N, --decode M: default 2 each)
  --format F             sglang (default), vllm or mixed
  --duration S           seconds of traffic (default 60)
  --workers N            simulated workers besides the other-weights one
                         (default 3; 4 with --format mixed: 2 SGLang, 2 vLLM)
  --concurrency C        requests in flight (default 16)
  --seed X               replay a campaign: same seed, same traffic and fault schedule
                         (default: a random seed, printed)
  --fault-rate R         mean faults per second (default 0.2)
  --token-interval-ms T  pause between a worker's tokens (default 10)
  --max-new-tokens M     largest budget a request asks for (default 128)
  --client-write-timeout-ms T
                         the router's client write timeout in the campaign (default 3000;
                         passed only to a router that has the setting)
  --discovery k8s        the SGLang workers are pods of an in-process fake Kubernetes API server
                         on 127.0.0.11, .12, ... found by --service-discovery; adds pod
                         deletions with a grace (drained, then killed), evictions and watch
                         faults; the verdict adds drains and stale workers (docs/kubernetes.md)
  --replicas N           the router as \`baton router --replicas N\` (N >= 2): SGLang traffic judged
                         against the reference, workers killed (kill -9, restarted), and one
                         replica SIGKILLed halfway: its clients must get a connection or
                         in-band error (never a hang), the rest 0 violations, the primary must
                         restart it; reports each survivor's continuation burst (docs/replicas.md)
  --no-clients           leave out the clients above (unknown keys, stream_interval,
                         never-reading clients, keep-alive bursts)
  --json                 print the report as JSON instead of the table
  --verbose              also log every fault and every worker state change
  --keep-dir DIR         keep the trace rows, client records, fault log and benchings in DIR
  -h, --help             show this help

Progress goes to stderr, the summary to stdout; the exit code is 1 when any violation was found.`;

export async function run(argv: string[]): Promise<void> {
  const v = parseFlags(argv, {
    format: { type: 'string' },
    pd: { type: 'boolean' },
    prefill: { type: 'string' },
    decode: { type: 'string' },
    duration: { type: 'string' },
    workers: { type: 'string' },
    concurrency: { type: 'string' },
    seed: { type: 'string' },
    'fault-rate': { type: 'string' },
    'token-interval-ms': { type: 'string' },
    'max-new-tokens': { type: 'string' },
    'client-write-timeout-ms': { type: 'string' },
    'no-clients': { type: 'boolean' },
    replicas: { type: 'string' },
    discovery: { type: 'string' },
    json: { type: 'boolean' },
    verbose: { type: 'boolean' },
    'keep-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (v.help) {
    console.log(HELP);
    return;
  }
  if (v.replicas !== undefined) {
    const replicas = intFlag('replicas', v.replicas, 3, 2);
    if (v.format !== undefined && v.format !== 'sglang') throw new UsageError('--replicas runs SGLang workers only: leave out --format or use --format sglang');
    if (v.discovery !== undefined) throw new UsageError('--replicas and --discovery do not combine');
    const { runReplicaCampaign, formatReplicaSummary } = await import('../chaos/replicas.ts');
    const durationS = intFlag('duration', v.duration, 30, 1);
    const { hubCheck } = await import('../chaos/hub-check.ts');
    const hub = hubCheck((line) => console.error(`[chaos] ${line}`));
    const report = await runReplicaCampaign({
      hooks: hub,
      durationS,
      workers: intFlag('workers', v.workers, 3, 2),
      replicas,
      concurrency: intFlag('concurrency', v.concurrency, 16, 1),
      seed: intFlag('seed', v.seed, Math.floor(Math.random() * 2 ** 31)),
      tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 10),
      maxNewTokens: intFlag('max-new-tokens', v['max-new-tokens'], 128, 1),
      workerKills: Math.max(1, Math.round(durationS / 10)),
      log: (line) => console.error(`[chaos] ${line}`),
    }).finally(() => hub.close());
    console.log(v.json ? JSON.stringify(report, null, 2) : formatReplicaSummary(report));
    if (report.violationCount > 0) process.exitCode = 1;
    return;
  }
  const faultRate = v['fault-rate'] === undefined ? 0.2 : Number(v['fault-rate']);
  if (!Number.isFinite(faultRate) || faultRate < 0) throw new UsageError(`--fault-rate must be a number >= 0, got '${v['fault-rate']}'`);
  if (v.pd) return runPd(v, faultRate);
  if (v.prefill !== undefined || v.decode !== undefined) throw new UsageError('--prefill and --decode need --pd');
  const format = (v.format ?? 'sglang') as CampaignFormat;
  if (!CAMPAIGN_FORMATS.includes(format)) throw new UsageError(`--format must be sglang, vllm or mixed, got '${v.format}'`);
  const workers = intFlag('workers', v.workers, format === 'mixed' ? 4 : 3, format === 'mixed' ? 2 : 1);
  const opts = {
    durationS: intFlag('duration', v.duration, 60, 1),
    workers,
    format,
    concurrency: intFlag('concurrency', v.concurrency, 16, 1),
    seed: intFlag('seed', v.seed, Math.floor(Math.random() * 2 ** 31)),
    faultRate,
    tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], 10),
    maxNewTokens: intFlag('max-new-tokens', v['max-new-tokens'], 128, 1),
    clientWriteTimeoutMs: intFlag('client-write-timeout-ms', v['client-write-timeout-ms'], 3000, 1),
    clients: !(v['no-clients'] ?? false),
    discovery: v.discovery === undefined ? ('none' as const) : v.discovery === 'k8s' ? ('k8s' as const) : (() => { throw new UsageError(`--discovery must be k8s, got '${v.discovery}'`); })(),
  };
  if (opts.discovery === 'k8s' && format !== 'sglang') throw new UsageError('--discovery k8s runs SGLang workers only: leave out --format or use --format sglang');
  // Loaded here so that `baton chaos --help` and option errors need not load the simulator.
  const { runCampaign } = await import('../chaos/campaign.ts');
  const { formatSummary } = await import('../chaos/summary.ts');
  const report = await runCampaign({ ...opts, verbose: v.verbose ?? false, keepDir: v['keep-dir'], log: (line) => console.error(`[chaos] ${line}`) });
  console.log(v.json ? JSON.stringify(report, null, 2) : formatSummary(report));
  if (report.violationCount > 0) process.exitCode = 1;
}

async function runPd(v: Record<string, string | boolean | undefined>, faultRate: number): Promise<void> {
  for (const flag of ['format', 'workers', 'discovery', 'no-clients', 'client-write-timeout-ms'] as const) {
    if (v[flag] !== undefined) throw new UsageError(`--${flag} is not a --pd option`);
  }
  const opts = {
    durationS: intFlag('duration', v.duration as string | undefined, 60, 1),
    prefill: intFlag('prefill', v.prefill as string | undefined, 2, 2),
    decode: intFlag('decode', v.decode as string | undefined, 2, 2),
    concurrency: intFlag('concurrency', v.concurrency as string | undefined, 16, 1),
    seed: intFlag('seed', v.seed as string | undefined, Math.floor(Math.random() * 2 ** 31)),
    faultRate,
    tokenIntervalMs: intFlag('token-interval-ms', v['token-interval-ms'] as string | undefined, 10),
    maxNewTokens: intFlag('max-new-tokens', v['max-new-tokens'] as string | undefined, 128, 1),
  };
  const { runPdCampaign, formatPdSummary } = await import('../chaos/pd-campaign.ts');
  const report = await runPdCampaign({ ...opts, verbose: v.verbose === true, keepDir: v['keep-dir'] as string | undefined, log: (line) => console.error(`[chaos pd] ${line}`) });
  console.log(v.json ? JSON.stringify(report, null, 2) : formatPdSummary(report));
  if (report.violationCount > 0) process.exitCode = 1;
}
