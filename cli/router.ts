// `baton router`: the headless migrating router.
import { parseFlags, UsageError } from '../lib/args.ts';
import { ConfigError, loadConfig, type RouterConfig } from '../router/config.ts';
import { isLoopback } from '../router/loopback.ts';
import { startRouter } from '../router/index.ts';
import { describeTracing } from '../router/otel/settings.ts';
import { ReplicaStartError, startPrimary } from '../router/replicas/primary.ts';

const HELP = `usage: baton router [options]

  --host H                     address to bind (default 127.0.0.1)
  --port P                     port (default 30080; 0 picks a free one)
  --worker URL                 an SGLang worker (repeatable)
  --migration-limit N          migrations per request (default 3; 0 = off)
  --migration-max-seq-len N    stop migrating when prompt + replayed tokens exceed N
  --policy NAME                cache_aware (default, as in the SGLang gateway), least_inflight,
                               round_robin, power_of_two (docs/routing.md)
  --cache-threshold F          cache_aware: a cached prefix above F of the prompt picks its
                               worker (default 0.3; docs/routing.md)
  --balance-abs-threshold N    cache_aware: load is imbalanced when max - min > N (default 64)
  --balance-rel-threshold F    ... and max > min * F (default 1.5)
  --max-tree-size N            cache_aware: prefix tokens remembered per worker (default 262144)
  --continuation-placement B   cache_aware: continuations go where prompt + replayed tokens are
                               cached (default true)
  --load-interval-ms T         read the workers' own load every T ms, for cache_aware and
                               power_of_two (default 1000; 0 = off)
  --inter-token-timeout-ms T   no data for T ms after the first token counts as a stalled
                               worker (default 30000; 0 = off)
  --first-token-timeout-ms T   no first token within T ms (queue + prefill) moves the attempt
                               to another worker without blaming this one (default 120000; 0 = off)
  --bench-ms T                 keep a failed worker out of new requests for T ms (default 5000)
  --health-interval-ms T       health-check period (default 5000)
  --trace-file PATH            append trace rows to PATH as JSON Lines
  --trace-ring-size N          trace rows kept in memory (default 10000)
  --max-concurrent-requests N  answer 503 above N requests in flight (default 10000)
  --headers-timeout-ms T       a client must send its request headers within T ms (default 30000)
  --admin-token TOKEN          bearer token for the worker API, traces, events, abort_all
                               and /flush_cache (required when --host is not loopback)
  --api-key KEY                SGLang's --api-key: every endpoint but /health* and /metrics
                               needs Authorization: Bearer KEY (docs/reliability.md)
  --client-write-timeout-ms T  cut off a client that reads nothing for T ms while its socket
                               is full, and abort its request at the worker (default 60000;
                               0 = off)
  --spare-connections N        most spare connections per worker, so that a continuation is
                               written at once (default 64; 0 = off)
  --listen-backlog N           pending-connection queue (default 4096, capped by somaxconn)
  --otlp-endpoint URL          export OpenTelemetry traces over OTLP/HTTP to URL (a collector,
                               Jaeger, Tempo; /v1/traces is appended unless given). Without it
                               the standard OTEL_EXPORTER_OTLP_* variables apply (docs/tracing.md)
  --trace-url-template T       the dashboard links a request to T with {trace_id} filled in,
                               e.g. http://jaeger:16686/trace/{trace_id}
  --tokenizer DIR|NAME=DIR     serve the OpenAI-compatible front (/v1/completions,
                               /v1/chat/completions) with the Hugging Face tokenizer in DIR, for
                               the workers' model or for model NAME (repeatable; docs/openai.md)
  --tool-call-parser NAME      parse tool calls out of chat answers: qwen25 (hermes), llama3,
                               mistral, deepseekv3, pythonic, qwen3_coder, or vLLM's names
                               (docs/openai.md)
  --reasoning-parser NAME      separate <think> reasoning: qwen3, qwen3-thinking, deepseek-r1,
                               or vLLM's names (docs/openai.md)
  --reasoning-field F          the reasoning's field in message and delta: both (default),
                               reasoning_content (SGLang) or reasoning (vLLM)
  --responses-store-max-responses N
                               responses /v1/responses keeps for previous_response_id and
                               item_reference (default 10000; 0 = none kept)
  --responses-store-max-bytes B
                               bytes of JSON those responses may hold (default 134217728)
  --responses-store-ttl-ms T   a stored response is forgotten T ms after it was answered
                               (default 3600000)
  --gc-scavenge serial|parallel
                               V8's young-generation GC on the main thread only (default
                               serial: cheaper beside a busy host's load) or with helper threads
  --service-discovery          discover workers from Kubernetes (docs/kubernetes.md)
  --selector K=V               label a worker pod carries (repeatable; pods mode)
  --service-discovery-port P   workers' port on a pod (default 8000; annotation baton.dev/port)
  --service-discovery-namespace NS  namespace to watch (default: all)
  --service-discovery-mode pods|endpointslices
  --service-discovery-service NAME  the Service whose EndpointSlices list the workers
  --service-discovery-relist-ms T   full re-list period (default 60000)
  --service-discovery-watchdog-ms T a watch open this long past its timeout is stuck (default 10000)
  --worker-file PATH           a YAML list of workers, watched and re-read: URLs or
                               {url, format?, name?, drain_grace_ms?} (docs/configuration.md)
  --worker-file-interval-ms T  re-read the worker file every T ms besides its change
                               notifications (default 5000)
  --drain-grace-ms T           POST /workers/:id/drain without a deadline drains for T ms
                               (default 30000)
  --drain-margin-ms T          a draining worker's streams are moved off it by its deadline
                               less T ms (default 1000)
  --shutdown-grace-ms T        on SIGTERM, /readyz answers 503 and requests in flight get up
                               to T ms to end before the router exits (default 30000)
  --replicas N|auto            N router processes on the one port (node:cluster on Node 20;
                               SO_REUSEPORT processes on Node >= 22.12), supervised and
                               restarted by a primary; GET /replicas lists them; auto: one per
                               core it may use (CPU affinity, capped by the cgroup's CPU
                               limit; at most 64). SIGHUP to the primary replaces them one at
                               a time, re-reading --config
                               (default 1; docs/replicas.md)
  --replica-admin-port-base P  replica i also serves its own /metrics, /events, /traces, ...
                               on 127.0.0.1:P+i (default 0: any free port)
  --pd-disaggregation          prefill/decode disaggregation (docs/pd.md): each attempt is a
                               prefill and a decode leg with a fresh bootstrap_room
  --prefill URL [PORT]         a prefill server and its bootstrap port (repeatable; without
                               PORT, its /server_info disaggregation_bootstrap_port)
  --decode URL                 a decode server (repeatable)
  --prefill-selector K=V       with --service-discovery: pods with this label are prefill
                               servers (repeatable; bootstrap port: the pod's
                               sglang.ai/bootstrap-port annotation)
  --decode-selector K=V        ... and these decode servers (repeatable)
  --prefill-policy NAME        P/D: the prefill servers' policy (default: --policy when given,
                               else cache_aware; docs/pd.md)
  --decode-policy NAME         P/D: the decode servers' policy (default: --policy when given and
                               not cache_aware, else least_inflight: SGLang decode servers keep
                               no radix cache)
  --pd-first-token-timeout-ms T  a P/D attempt without a first token after T ms: moved to a new
                               pair if its prefill leg answered, else its prefill server is
                               checked (health, load report) and blamed only if it fails
                               (default 30000; 0 = off)
  --config FILE                YAML file of the same settings (snake_case keys)

Settings come from flags, then BATON_* environment variables (e.g. BATON_MIGRATION_LIMIT),
then the config file, then defaults.`;

const OPTIONS = {
  help: { type: 'boolean' },
  config: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  worker: { type: 'string', multiple: true },
  'migration-limit': { type: 'string' },
  'migration-max-seq-len': { type: 'string' },
  policy: { type: 'string' },
  'cache-threshold': { type: 'string' },
  'balance-abs-threshold': { type: 'string' },
  'balance-rel-threshold': { type: 'string' },
  'max-tree-size': { type: 'string' },
  'continuation-placement': { type: 'string' },
  'load-interval-ms': { type: 'string' },
  'inter-token-timeout-ms': { type: 'string' },
  'first-token-timeout-ms': { type: 'string' },
  'connect-timeout-ms': { type: 'string' },
  'bench-ms': { type: 'string' },
  'health-interval-ms': { type: 'string' },
  'trace-file': { type: 'string' },
  'trace-ring-size': { type: 'string' },
  'max-concurrent-requests': { type: 'string' },
  'headers-timeout-ms': { type: 'string' },
  'admin-token': { type: 'string' },
  'api-key': { type: 'string' },
  'client-write-timeout-ms': { type: 'string' },
  'spare-connections': { type: 'string' },
  'listen-backlog': { type: 'string' },
  'otlp-endpoint': { type: 'string' },
  'trace-url-template': { type: 'string' },
  tokenizer: { type: 'string', multiple: true },
  'tool-call-parser': { type: 'string' },
  'reasoning-parser': { type: 'string' },
  'reasoning-field': { type: 'string' },
  'responses-store-max-responses': { type: 'string' },
  'responses-store-max-bytes': { type: 'string' },
  'responses-store-ttl-ms': { type: 'string' },
  'gc-scavenge': { type: 'string' },
  'service-discovery': { type: 'boolean' },
  selector: { type: 'string', multiple: true },
  'service-discovery-port': { type: 'string' },
  'service-discovery-namespace': { type: 'string' },
  'service-discovery-mode': { type: 'string' },
  'service-discovery-service': { type: 'string' },
  'service-discovery-relist-ms': { type: 'string' },
  'service-discovery-watchdog-ms': { type: 'string' },
  'worker-file': { type: 'string' },
  'worker-file-interval-ms': { type: 'string' },
  'drain-grace-ms': { type: 'string' },
  'drain-margin-ms': { type: 'string' },
  'shutdown-grace-ms': { type: 'string' },
  replicas: { type: 'string' },
  'replica-admin-port-base': { type: 'string' },
  'pd-disaggregation': { type: 'boolean' },
  prefill: { type: 'string', multiple: true },
  decode: { type: 'string', multiple: true },
  'pd-first-token-timeout-ms': { type: 'string' },
  'prefill-policy': { type: 'string' },
  'decode-policy': { type: 'string' },
  'prefill-selector': { type: 'string', multiple: true },
  'decode-selector': { type: 'string', multiple: true },
} as const;

/**
 * The gateway writes a prefill server's bootstrap port as a second value of the flag
 * (`--prefill http://p:30001 9001`, sgl-model-gateway's CLI): folded into one `URL PORT` value
 * before node:util's parser, which takes one value per flag.
 */
export function foldPrefillPorts(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--prefill' && /^\d{1,5}$/.test(argv[i + 2] ?? '') && !argv[i + 1]!.startsWith('--')) {
      out.push(a, `${argv[i + 1]} ${argv[i + 2]}`);
      i += 2;
    } else out.push(a);
  }
  return out;
}

export function configFromArgv(argv: string[], env: NodeJS.ProcessEnv = process.env): RouterConfig | null {
  const v = parseFlags(foldPrefillPorts(argv), OPTIONS);
  if (v.help) return null;
  try {
    return loadConfig({
      file: v.config,
      env,
      flags: {
        host: v.host,
        port: v.port,
        workers: v.worker,
        migrationLimit: v['migration-limit'],
        migrationMaxSeqLen: v['migration-max-seq-len'],
        policy: v.policy,
        cacheThreshold: v['cache-threshold'],
        balanceAbsThreshold: v['balance-abs-threshold'],
        balanceRelThreshold: v['balance-rel-threshold'],
        maxTreeSize: v['max-tree-size'],
        continuationPlacement: v['continuation-placement'],
        loadIntervalMs: v['load-interval-ms'],
        interTokenTimeoutMs: v['inter-token-timeout-ms'],
        firstTokenTimeoutMs: v['first-token-timeout-ms'],
        connectTimeoutMs: v['connect-timeout-ms'],
        benchMs: v['bench-ms'],
        healthIntervalMs: v['health-interval-ms'],
        traceFile: v['trace-file'],
        traceRingSize: v['trace-ring-size'],
        maxConcurrentRequests: v['max-concurrent-requests'],
        headersTimeoutMs: v['headers-timeout-ms'],
        adminToken: v['admin-token'],
        apiKey: v['api-key'],
        clientWriteTimeoutMs: v['client-write-timeout-ms'],
        spareConnections: v['spare-connections'],
        listenBacklog: v['listen-backlog'],
        otlpEndpoint: v['otlp-endpoint'],
        traceUrlTemplate: v['trace-url-template'],
        tokenizers: v.tokenizer,
        toolCallParser: v['tool-call-parser'],
        reasoningParser: v['reasoning-parser'],
        reasoningField: v['reasoning-field'],
        responsesStoreMaxResponses: v['responses-store-max-responses'],
        responsesStoreMaxBytes: v['responses-store-max-bytes'],
        responsesStoreTtlMs: v['responses-store-ttl-ms'],
        gcScavenge: v['gc-scavenge'],
        serviceDiscovery: v['service-discovery'],
        selector: v.selector,
        serviceDiscoveryPort: v['service-discovery-port'],
        serviceDiscoveryNamespace: v['service-discovery-namespace'],
        serviceDiscoveryMode: v['service-discovery-mode'],
        serviceDiscoveryService: v['service-discovery-service'],
        serviceDiscoveryRelistMs: v['service-discovery-relist-ms'],
        serviceDiscoveryWatchdogMs: v['service-discovery-watchdog-ms'],
        workerFile: v['worker-file'],
        workerFileIntervalMs: v['worker-file-interval-ms'],
        drainGraceMs: v['drain-grace-ms'],
        drainMarginMs: v['drain-margin-ms'],
        shutdownGraceMs: v['shutdown-grace-ms'],
        replicas: v.replicas,
        replicaAdminPortBase: v['replica-admin-port-base'],
        pdDisaggregation: v['pd-disaggregation'],
        prefill: v.prefill,
        decode: v.decode,
        pdFirstTokenTimeoutMs: v['pd-first-token-timeout-ms'],
        prefillPolicy: v['prefill-policy'],
        decodePolicy: v['decode-policy'],
        prefillSelector: v['prefill-selector'],
        decodeSelector: v['decode-selector'],
      },
    });
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
}

/**
 * P/D with the decode side placed by prefix (`--decode-policy cache_aware`): SGLang decode
 * servers keep no radix cache by default, so every request with one system prompt would go to
 * one of them. Right where the decode servers were started with their radix cache on.
 */
export function decodePolicyWarning(config: RouterConfig): string | null {
  if (!config.pdDisaggregation || config.decodePolicy !== 'cache_aware') return null;
  return 'warning: the decode side is placed by prefix (cache_aware), but SGLang decode servers keep no radix cache unless started with --disaggregation-decode-enable-radix-cache, so requests that share a prompt prefix crowd onto one decode server unless they were started with it; --decode-policy least_inflight places decode by load (docs/pd.md)';
}

/** The policy the start line names: P/D has one per side. */
function policyLine(config: RouterConfig): string {
  return config.pdDisaggregation ? `prefill policy ${config.prefillPolicy}, decode policy ${config.decodePolicy}` : `policy ${config.policy}`;
}

/**
 * One line on what anyone who reaches a non-loopback router can call without a key: the data
 * plane, unless --api-key is set (the admin surfaces always need the token there). Null when
 * nothing is open beyond this machine.
 */
export function openSurface(config: RouterConfig): string | null {
  if (isLoopback(config.host) || config.apiKey !== null) return null;
  return `open to anyone who reaches ${config.host}: /generate, /inference/v1/generate, the OpenAI front, /abort_request by rid and the info endpoints (no --api-key); the worker API, traces, events, abort_all and /flush_cache need the admin token`;
}

export async function run(argv: string[]): Promise<void> {
  const config = configFromArgv(argv);
  if (!config) {
    console.log(HELP);
    return;
  }
  // A reload reads the config file again under the flags and environment given at the start.
  if (config.replicas > 1) return runReplicas(config, () => configFromArgv(argv)!);
  let router;
  try {
    router = await startRouter(config);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new UsageError(`port ${config.port} on ${config.host} is already in use`);
    if (e.message?.startsWith('invalid worker URL') || e.message?.startsWith('worker URL')) throw new UsageError(e.message);
    throw err;
  }
  if (config.workers.length + config.prefill.length + config.decode.length === 0 && config.workerFile === null) console.error('warning: no --worker given; add workers with POST /workers');
  const pdWarning = decodePolicyWarning(config);
  if (pdWarning) console.error(pdWarning);
  // Before the `listening on` line, which scripts and tests wait for: whoever reads that line has this one too.
  const open = openSurface(config);
  if (open) console.log(open);
  console.log(`baton router listening on ${router.url} (${config.workers.length} workers, migration limit ${config.migrationLimit}, ${policyLine(config)})`);
  const tracing = describeTracing(config);
  if (tracing) console.log(`tracing: ${tracing}`);
  const stop = async () => {
    await router.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  // An orchestrator's stop (Kubernetes sends SIGTERM, then SIGKILL after the pod's grace):
  // unready at once, requests in flight end (up to --shutdown-grace-ms), then exit.
  process.once('SIGTERM', () => {
    console.log(`SIGTERM: not ready; waiting up to ${config.shutdownGraceMs} ms for requests in flight`);
    void router.shutdown!().then((allEnded) => {
      console.log(allEnded ? 'every request ended; exiting' : `grace period over with requests in flight; exiting`);
      process.exit(0);
    });
  });
}

/** `--replicas N`: this process is the primary; the replicas are router/replicas/replica-main.ts. */
async function runReplicas(config: RouterConfig, reloadConfig: () => RouterConfig): Promise<void> {
  // Node's default for SIGHUP ends the process: while the replicas start, it is refused instead.
  const early = () => console.log('SIGHUP: the replicas are still starting; no reload (send it again once the router listens)');
  process.on('SIGHUP', early);
  let primary;
  try {
    primary = await startPrimary(config, {
      log: (line) => console.log(line),
      reloadConfig,
      onAllCrashed: () => {
        console.error('every replica is in a crash loop; exiting');
        process.exit(1);
      },
    });
  } catch (err) {
    if (err instanceof ReplicaStartError && err.usage) throw new UsageError(err.message);
    throw err;
  }
  if (config.workers.length + config.prefill.length + config.decode.length === 0 && config.workerFile === null) console.error('warning: no --worker given; add workers with POST /workers (on the shared port: every replica takes it)');
  const pdWarning = decodePolicyWarning(config);
  if (pdWarning) console.error(pdWarning);
  const open = openSurface(config);
  if (open) console.log(open);
  console.log(`baton router listening on ${primary.url} (${config.replicas} replicas by ${primary.mode === 'cluster' ? 'node:cluster' : 'SO_REUSEPORT'}, ${config.workers.length} workers, migration limit ${config.migrationLimit}, ${policyLine(config)})`);
  for (const r of primary.list()) console.log(`  replica ${r.index}: id ${r.id}, pid ${r.pid}, ${r.url}`);
  let stopping = false;
  const stop = (signal: string, graceMs: number) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping ${config.replicas} replicas (each drains up to ${graceMs} ms)`);
    void primary.stop(graceMs, signal === 'SIGINT' ? 'SIGINT' : 'SIGTERM').then(() => process.exit(0));
  };
  process.on('SIGINT', () => stop('SIGINT', 0));
  process.on('SIGTERM', () => stop('SIGTERM', config.shutdownGraceMs));
  // nginx -s reload, pm2 reload: replace the replicas one at a time (docs/replicas.md, "Reload").
  // The primary logs the outcome; a failure leaves the replicas serving.
  process.off('SIGHUP', early);
  process.on('SIGHUP', () => {
    if (stopping) return console.log('SIGHUP: stopping; no reload');
    console.log('SIGHUP: reload');
    void primary.reload().catch(() => undefined);
  });
}
