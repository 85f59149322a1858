// Router configuration: defaults, a YAML file (--config), environment variables (BATON_*), and
// command-line flags, in rising precedence. Every value is checked once here, with an error that
// names where the bad value came from.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { GC_SCAVENGE_MODES, type GcScavenge } from './gc.ts';
import { POLICY_NAMES, pdPolicies } from './pool/policies/names.ts';
import { autoReplicas } from './cpu-limit.ts';
import { REASONING_PARSER_NAMES, TOOL_PARSER_NAMES } from './parsers/names.ts';
import { ConfigError } from './config-error.ts';

// What loadConfig throws, for its callers (the class lives in config-error.ts).
export { ConfigError };

export interface RouterConfig {
  host: string;
  port: number;
  workers: string[];
  migrationLimit: number;
  migrationMaxSeqLen: number | null;
  policy: string;
  /** cache_aware: match rate (cached prefix / prompt tokens) above which the best-matching worker wins (docs/routing.md). */
  cacheThreshold: number;
  /** cache_aware: load is imbalanced when max - min exceeds this (requests)... */
  balanceAbsThreshold: number;
  /** ...and max exceeds min times this. */
  balanceRelThreshold: number;
  /** cache_aware: tokens of prefix remembered per worker (LRU), capped by the worker's max_total_num_tokens. */
  maxTreeSize: number;
  /** cache_aware: a continuation goes to the survivor with the longest cached prefix of prompt + replayed tokens. */
  continuationPlacement: boolean;
  /** How often the workers' own load (SGLang /get_load, vLLM /metrics) is read, for cache_aware and power_of_two. 0 = off. */
  loadIntervalMs: number;
  /** No data from a worker for this long, once its first token came, counts as a stall. 0 = off. */
  interTokenTimeoutMs: number;
  /**
   * No first token within this long of sending an attempt (queueing + prefill, which grow with
   * load and with the replayed tokens): the attempt moves on, without blaming the worker. 0 = off.
   */
  firstTokenTimeoutMs: number;
  connectTimeoutMs: number;
  /** A worker whose attempt failed takes no new attempts for this long. */
  benchMs: number;
  healthIntervalMs: number;
  healthTimeoutMs: number;
  healthFailureThreshold: number;
  circuitFailureThreshold: number;
  circuitOpenMs: number;
  circuitSuccessThreshold: number;
  traceRingSize: number;
  traceFile: string | null;
  maxBodyBytes: number;
  bodyTimeoutMs: number;
  /** A client must send its request headers within this long (slowloris). */
  headersTimeoutMs: number;
  maxConcurrentRequests: number;
  /**
   * Required to expose the admin surfaces (workers, traces, events, the dashboard's API) and the
   * destructive calls (`abort_all`, `/flush_cache`) on a non-loopback host (docs/reliability.md).
   */
  adminToken: string | null;
  /**
   * SGLang's `--api-key`: every endpoint but `/health*` and `/metrics*` needs it
   * (`Authorization: Bearer <key>`, or `x-api-key`), as SGLang's auth middleware reads it.
   */
  apiKey: string | null;
  /**
   * A client that reads nothing for this long while its socket is full is cut off, and its
   * attempt is aborted at the worker (nginx's `send_timeout`). 0 = off.
   */
  clientWriteTimeoutMs: number;
  /** Most spare connections kept per worker so that a continuation is written at once; 0 = off. */
  spareConnections: number;
  /** Pending-connection queue of the listening socket (the kernel caps it at somaxconn). */
  listenBacklog: number;
  /**
   * OTLP/HTTP collector to export traces to (like OTEL_EXPORTER_OTLP_ENDPOINT: `/v1/traces` is
   * appended unless given). Null: the standard OTEL_EXPORTER_OTLP_* variables decide; none, no
   * tracing (docs/tracing.md).
   */
  otlpEndpoint: string | null;
  /** Link from the dashboard to a trace, e.g. `http://jaeger:16686/trace/{trace_id}`. */
  traceUrlTemplate: string | null;
  /**
   * Model directories for the OpenAI-compatible front (docs/openai.md): `DIR` (the workers' model)
   * or `NAME=DIR`. None: the front is off and GET /v1/models is a worker's.
   */
  tokenizers: string[];
  /** The OpenAI front's tool-call parser (SGLang's or vLLM's name, docs/openai.md); null: none. */
  toolCallParser: string | null;
  /** The OpenAI front's reasoning parser (SGLang's or vLLM's name, docs/openai.md); null: none. */
  reasoningParser: string | null;
  /** The chat answer's reasoning fields: `both` (default), `reasoning_content` (SGLang) or `reasoning` (vLLM). */
  reasoningField: string;
  /** Most responses the Responses front keeps for `previous_response_id` and `item_reference` (docs/openai.md); 0: none. */
  responsesStoreMaxResponses: number;
  /** Most bytes of JSON those stored responses may hold; 0: none. */
  responsesStoreMaxBytes: number;
  /** A stored response is forgotten this long after it was answered. */
  responsesStoreTtlMs: number;
  /** V8's scavenges on the main thread only (`serial`) or with helper threads (router/gc.ts). */
  gcScavenge: GcScavenge;
  /** Discover workers from Kubernetes (docs/kubernetes.md); the SGLang gateway's flag names. */
  serviceDiscovery: boolean;
  /** Pod label selector terms `k=v`, ANDed (repeatable, or comma-separated). */
  selector: string[];
  /** Workers' port on a discovered pod (the `baton.dev/port` annotation overrides it). */
  serviceDiscoveryPort: number;
  /** Null: every namespace (needs a ClusterRole). */
  serviceDiscoveryNamespace: string | null;
  /** `pods` (label selector) or `endpointslices` (of --service-discovery-service). */
  serviceDiscoveryMode: 'pods' | 'endpointslices';
  serviceDiscoveryService: string | null;
  /** Full re-list period; each watch asks the API server to end it after this long. */
  serviceDiscoveryRelistMs: number;
  /** A watch still open this long after its timeoutSeconds is stuck: aborted, state `stale`. */
  serviceDiscoveryWatchdogMs: number;
  /**
   * A YAML file of workers, watched and re-read (router/discovery/file-source.ts): a list of URLs
   * or of `{url, format?, name?, drain_grace_ms?}`. Null: none.
   */
  workerFile: string | null;
  /** How often the worker file is re-read besides its change notifications. */
  workerFileIntervalMs: number;
  /** POST /workers/:id/drain without a deadline: the worker is removed this long after. */
  drainGraceMs: number;
  /**
   * A draining worker's streams are moved off it by (deadline - this): the time a continuation
   * needs to be started and the old attempt aborted before the worker is killed.
   */
  drainMarginMs: number;
  /** On SIGTERM, /readyz answers 503 and in-flight requests get up to this long to finish. */
  shutdownGraceMs: number;
  /** Router processes sharing the port, under a supervising primary (router/replicas/); 1: a lone router; `auto` (given as a string): one per core it may use (router/cpu-limit.ts). */
  replicas: number;
  /** Replica i also listens on 127.0.0.1:(base + i) for its own /metrics, /events, ...; 0: any free port. */
  replicaAdminPortBase: number;
  /** Prefill/decode disaggregation (docs/pd.md): the SGLang model gateway's `--pd-disaggregation`. */
  pdDisaggregation: boolean;
  /** Prefill servers, `URL` or `URL BOOTSTRAP_PORT` (the gateway's `--prefill URL [PORT]`). */
  prefill: string[];
  /** Decode servers (`--decode URL`). */
  decode: string[];
  /**
   * A P/D attempt whose decode leg has no first token this long after it was sent moves to a new
   * pair, blaming the prefill leg when it had not answered (SGLang's own wait is 300 s). 0 = off.
   */
  pdFirstTokenTimeoutMs: number;
  /**
   * P/D: the prefill side's policy (the gateway's `--prefill-policy`); null: `policy` when it was
   * given, else cache_aware (pool/policies/names.ts pdPolicies).
   */
  prefillPolicy: string | null;
  /** P/D: the decode side's policy (`--decode-policy`); null: `policy` when it was given, else least_inflight. */
  decodePolicy: string | null;
  /** P/D with Kubernetes discovery: pods with these labels are prefill servers (the gateway's `--prefill-selector`). */
  prefillSelector: string[];
  /** ... and these decode servers (`--decode-selector`); a pod matching both is a prefill server, as in the gateway. */
  decodeSelector: string[];
}

export const DEFAULTS: RouterConfig = {
  host: '127.0.0.1',
  port: 30080,
  workers: [],
  migrationLimit: 3,
  migrationMaxSeqLen: null,
  // The SGLang model gateway's default (sgl-model-gateway/src/main.rs, CliArgs.policy:
  // default_value = "cache_aware"): requests that share a prefix meet where it is cached.
  policy: 'cache_aware',
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  maxTreeSize: 262_144,
  continuationPlacement: true,
  loadIntervalMs: 1_000,
  interTokenTimeoutMs: 30_000,
  firstTokenTimeoutMs: 120_000,
  connectTimeoutMs: 5_000,
  benchMs: 5_000,
  healthIntervalMs: 5_000,
  healthTimeoutMs: 2_000,
  healthFailureThreshold: 2,
  circuitFailureThreshold: 5,
  circuitOpenMs: 10_000,
  circuitSuccessThreshold: 2,
  traceRingSize: 10_000,
  traceFile: null,
  maxBodyBytes: 16 * 1024 * 1024,
  bodyTimeoutMs: 30_000,
  headersTimeoutMs: 30_000,
  maxConcurrentRequests: 10_000,
  adminToken: null,
  apiKey: null,
  clientWriteTimeoutMs: 60_000,
  spareConnections: 64,
  listenBacklog: 4096,
  otlpEndpoint: null,
  traceUrlTemplate: null,
  tokenizers: [],
  toolCallParser: null,
  reasoningParser: null,
  reasoningField: 'both',
  responsesStoreMaxResponses: 10_000,
  responsesStoreMaxBytes: 128 * 1024 * 1024,
  responsesStoreTtlMs: 3_600_000,
  gcScavenge: 'serial',
  serviceDiscovery: false,
  selector: [],
  serviceDiscoveryPort: 8000,
  serviceDiscoveryNamespace: null,
  serviceDiscoveryMode: 'pods',
  serviceDiscoveryService: null,
  serviceDiscoveryRelistMs: 60_000,
  serviceDiscoveryWatchdogMs: 10_000,
  workerFile: null,
  workerFileIntervalMs: 5_000,
  drainGraceMs: 30_000,
  drainMarginMs: 1_000,
  shutdownGraceMs: 30_000,
  replicas: 1,
  replicaAdminPortBase: 0,
  pdDisaggregation: false,
  prefill: [],
  decode: [],
  pdFirstTokenTimeoutMs: 30_000,
  prefillPolicy: null,
  decodePolicy: null,
  prefillSelector: [],
  decodeSelector: [],
};


/** Most router processes under one primary (`--replicas`). */
const MAX_REPLICAS = 64;

type Key = keyof RouterConfig;

/** file key / env var / flag name for each setting (kebab-case flags, snake_case file keys). */
const NAMES: Record<Key, { file: string; env: string; flag: string }> = Object.fromEntries(
  (Object.keys(DEFAULTS) as Key[]).map((k) => {
    const snake = k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    return [k, { file: snake, env: `BATON_${snake.toUpperCase()}`, flag: snake.replace(/_/g, '-') }];
  }),
) as Record<Key, { file: string; env: string; flag: string }>;

export function flagName(k: Key): string {
  return NAMES[k].flag;
}

/** Fields whose empty value means unset (null). One key a line: several features add theirs. */
const NULLABLE_KEYS: ReadonlySet<string> = new Set([
  'migrationMaxSeqLen',
  'traceFile',
  'adminToken',
  'apiKey',
  'otlpEndpoint',
  'traceUrlTemplate',
  'workerFile',
  'toolCallParser',
  'reasoningParser',
  'prefillPolicy',
  'decodePolicy',
]);

function coerce(key: Key, value: unknown, where: string, env: NodeJS.ProcessEnv): RouterConfig[Key] {
  const d = DEFAULTS[key];
  const bad = (what: string) => new ConfigError(`${where}: ${NAMES[key].flag} ${what}, got ${JSON.stringify(value)}`);
  if (typeof d === 'boolean') {
    if (value === true || value === 'true' || value === '1') return true;
    if (value === false || value === 'false' || value === '0') return false;
    throw bad('must be true or false');
  }
  if (key === 'selector' || key === 'prefillSelector' || key === 'decodeSelector') {
    const list = Array.isArray(value) ? value.flatMap((v) => (typeof v === 'string' ? v.split(',') : [v])) : typeof value === 'string' ? value.split(',') : null;
    const terms = list?.map((t) => (typeof t === 'string' ? t.trim() : t)).filter((t) => t !== '');
    if (!terms || !terms.every((t) => typeof t === 'string' && /^[\w./-]+=[\w.-]*$/.test(t))) throw bad('must be label terms key=value');
    return terms as string[];
  }
  if (key === 'serviceDiscoveryNamespace' || key === 'serviceDiscoveryService') {
    if (value === null || value === '' || value === undefined) return null;
    if (typeof value !== 'string' || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value)) throw bad('must be a Kubernetes name (lowercase letters, digits, -)');
    return value;
  }
  if (key === 'prefill' || key === 'decode') {
    const list = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',').map((s) => s.trim()).filter(Boolean) : null;
    const ok = (s: unknown) => typeof s === 'string' && (key === 'prefill' ? /^\S+(\s+\d{1,5})?$/ : /^\S+$/).test(s.trim());
    if (!list || !list.every(ok)) throw bad(key === 'prefill' ? 'must be a list of URL or URL BOOTSTRAP_PORT' : 'must be a list of URLs');
    return (list as string[]).map((s) => s.trim());
  }
  if (key === 'workers' || key === 'tokenizers') {
    const list = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',').map((s) => s.trim()).filter(Boolean) : null;
    if (!list || !list.every((s) => typeof s === 'string')) throw bad(key === 'workers' ? 'must be a list of URLs' : 'must be a list of DIR or NAME=DIR');
    return list as string[];
  }
  if (NULLABLE_KEYS.has(key)) {
    if (value === null || value === '' || value === undefined) return null;
    if (key === 'toolCallParser' && !Object.hasOwn(TOOL_PARSER_NAMES, String(value))) throw bad(`must be one of ${Object.keys(TOOL_PARSER_NAMES).join(', ')}`);
    if (key === 'reasoningParser' && !Object.hasOwn(REASONING_PARSER_NAMES, String(value))) throw bad(`must be one of ${Object.keys(REASONING_PARSER_NAMES).join(', ')}`);
    if ((key === 'prefillPolicy' || key === 'decodePolicy') && !(POLICY_NAMES as readonly string[]).includes(String(value))) throw bad(`must be one of ${POLICY_NAMES.join(', ')}`);
    if (key === 'migrationMaxSeqLen') {
      const n = Number(value);
      if (!Number.isInteger(n) || n <= 0) throw bad('must be a positive integer');
      return n;
    }
    if (key === 'otlpEndpoint' && !/^https?:\/\/[^/\s]+/.test(String(value))) throw bad('must be an http:// or https:// URL');
    if (key === 'traceUrlTemplate' && !String(value).includes('{trace_id}')) throw bad('must contain {trace_id}');
    return String(value);
  }
  if (key === 'cacheThreshold' || key === 'balanceRelThreshold') {
    const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
    if (!Number.isFinite(n) || n < 0 || (key === 'cacheThreshold' && n > 1)) throw bad(key === 'cacheThreshold' ? 'must be a number from 0 to 1' : 'must be a non-negative number');
    return n;
  }
  if (key === 'continuationPlacement') {
    if (typeof value === 'boolean') return value;
    if (value === 'true' || value === '1') return true;
    if (value === 'false' || value === '0') return false;
    throw bad('must be true or false');
  }
  // One replica per core the process may use (its affinity mask and its cgroup's CPU quota:
  // router/cpu-limit.ts), within the same bound as a number.
  if (key === 'replicas' && value === 'auto') return autoReplicas(MAX_REPLICAS, env);
  if (typeof d === 'number') {
    const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
    if (key === 'replicas' && (!Number.isInteger(n) || n < 1 || n > MAX_REPLICAS)) throw bad(`must be from 1 to ${MAX_REPLICAS}, or auto`);
    if (!Number.isInteger(n) || n < 0) throw bad('must be a non-negative integer');
    if (key === 'port' && n > 65535) throw bad('must be a port number (0 picks one)');
    if (key === 'listenBacklog' && n < 1) throw bad('must be a positive integer');
    if (key === 'responsesStoreTtlMs' && n < 1) throw bad('must be a positive integer');
    if (key === 'replicaAdminPortBase' && n > 65535) throw bad('must be a port number (0 picks free ones)');
    return n;
  }
  if (typeof value !== 'string' || value === '') throw bad('must be a string');
  if (key === 'policy' && !(POLICY_NAMES as readonly string[]).includes(value)) throw bad(`must be one of ${POLICY_NAMES.join(', ')}`);
  if (key === 'gcScavenge' && !(GC_SCAVENGE_MODES as readonly string[]).includes(value)) throw bad(`must be one of ${GC_SCAVENGE_MODES.join(', ')}`);
  if (key === 'reasoningField' && value !== 'both' && value !== 'reasoning_content' && value !== 'reasoning') throw bad('must be one of both, reasoning_content, reasoning');
  if (key === 'serviceDiscoveryMode' && value !== 'pods' && value !== 'endpointslices') throw bad('must be pods or endpointslices');
  return value;
}

/** Build a config from layers; `flags` are already typed values keyed like RouterConfig. */
export function loadConfig(opts: { file?: string; env?: NodeJS.ProcessEnv; flags?: Partial<Record<Key, unknown>> } = {}): RouterConfig {
  const cfg: RouterConfig = { ...DEFAULTS, workers: [], tokenizers: [], selector: [], prefill: [], decode: [], prefillSelector: [], decodeSelector: [] };
  const env = opts.env ?? {};
  const given = new Set<Key>();
  const set = (k: Key, v: unknown, where: string) => {
    (cfg as unknown as Record<string, unknown>)[k] = coerce(k, v, where, env);
    given.add(k);
  };
  if (opts.file) {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(opts.file, 'utf8'));
    } catch (err) {
      throw new ConfigError(`config file ${opts.file}: ${(err as Error).message}`);
    }
    if (doc !== null && doc !== undefined) {
      if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError(`config file ${opts.file}: must be a mapping of settings`);
      const byFile = new Map((Object.keys(NAMES) as Key[]).map((k) => [NAMES[k].file, k]));
      for (const [name, v] of Object.entries(doc as Record<string, unknown>)) {
        const k = byFile.get(name.replace(/-/g, '_'));
        if (!k) throw new ConfigError(`config file ${opts.file}: unknown setting '${name}'`);
        set(k, v, `config file ${opts.file}`);
      }
    }
  }
  for (const k of Object.keys(NAMES) as Key[]) {
    const v = env[NAMES[k].env];
    if (v !== undefined) set(k, v, `environment ${NAMES[k].env}`);
  }
  for (const [k, v] of Object.entries(opts.flags ?? {})) {
    if (v !== undefined) set(k as Key, v, 'command line');
  }
  if (!cfg.pdDisaggregation && (cfg.prefill.length > 0 || cfg.decode.length > 0)) throw new ConfigError('--prefill and --decode need --pd-disaggregation');
  if (!cfg.pdDisaggregation && (cfg.prefillPolicy !== null || cfg.decodePolicy !== null)) throw new ConfigError('--prefill-policy and --decode-policy need --pd-disaggregation');
  if (cfg.pdDisaggregation) {
    const sides = pdPolicies(cfg, given.has('policy'));
    cfg.prefillPolicy = sides.prefill;
    cfg.decodePolicy = sides.decode;
  }
  if (cfg.serviceDiscovery) {
    const pdSelectors = cfg.pdDisaggregation && cfg.prefillSelector.length + cfg.decodeSelector.length > 0;
    if (cfg.serviceDiscoveryMode === 'pods' && cfg.selector.length === 0 && !pdSelectors) throw new ConfigError('service-discovery: pods mode needs --selector key=value (which pods are workers)');
    if (cfg.serviceDiscoveryMode === 'endpointslices' && !cfg.serviceDiscoveryService) throw new ConfigError('service-discovery: endpointslices mode needs --service-discovery-service NAME');
    if (cfg.serviceDiscoveryPort < 1 || cfg.serviceDiscoveryPort > 65535) throw new ConfigError('service-discovery-port must be a port number');
    if (cfg.serviceDiscoveryRelistMs < 1000) throw new ConfigError('service-discovery-relist-ms must be at least 1000 (a watch\'s timeoutSeconds is whole seconds)');
  }
  if (cfg.replicaAdminPortBase > 0 && cfg.replicaAdminPortBase + cfg.replicas - 1 > 65535) throw new ConfigError(`replica-admin-port-base ${cfg.replicaAdminPortBase} + ${cfg.replicas} replicas passes port 65535`);
  return cfg;
}
