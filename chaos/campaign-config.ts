// A chaos campaign's options (chaos/campaign.ts): what the caller gives, the defaults that fill
// the rest, and the router settings and timers every phase of the campaign derives from them.

import { DEFAULTS as ROUTER_DEFAULTS, type RouterConfig } from '../router/config.ts';
import { TRAFFIC_DEFAULTS, type CampaignFormat } from './traffic.ts';

/** The weight_version of the campaign's other-weights worker(s). */
export const OTHER_WEIGHT_VERSION = 'chaos-other-weights';

export interface CampaignOptions {
  durationS: number;
  /** Default workers (the other-weights worker comes on top); in a mixed campaign half are vLLM (the smaller half). */
  workers: number;
  /** Which workers and which traffic: sglang (default), vllm, or mixed. */
  format?: CampaignFormat;
  concurrency: number;
  seed: number;
  /** Mean faults per second. */
  faultRate: number;
  tokenIntervalMs: number;
  maxNewTokens?: number;
  nonMigratableShare?: number;
  cancelShare?: number;
  /** Share of single requests with an input id beyond the vocabulary (the client's own fault). */
  badShare?: number;
  /** Share of traffic units that are groups sharing an x-trace-id / x-correlation-id header. */
  sharedHeaderShare?: number;
  /** Share of traffic units that are groups of prefix-sharing rids with one cancel. */
  prefixShare?: number;
  /** Extra SGLang workers serving other weights (weight_version OTHER_WEIGHT_VERSION); default 1, none with format vllm. */
  otherWeightsWorkers?: number;
  /** Share of continuations the proxy in front of one worker refuses with 429; default 0.3, 0: no proxy. */
  continuation4xxShare?: number;
  /** Progress lines; silent when absent. */
  log?: (line: string) => void;
  progressEveryMs?: number;
  /** Log every change of a worker's state as the router sees it, and each fault as it is applied. */
  verbose?: boolean;
  /** Keep the trace file (and a JSON Lines file of client records) in this directory. */
  keepDir?: string;
  /**
   * The special clients (unknown sampling keys, stream_interval, never-reading clients,
   * keep-alive bursts): on by default. Their SGLang requests need SGLang workers.
   */
  clients?: boolean;
  /** The router's --client-write-timeout-ms in the campaign (when the router has the setting); default 3000. */
  clientWriteTimeoutMs?: number;
  /**
   * `k8s`: the SGLang workers are pods of an in-process fake Kubernetes API server on distinct
   * loopback addresses, found by the router's --service-discovery, with pod deletions, evictions
   * and watch faults on top (chaos/k8s.ts). The other-weights worker stays hand-added.
   */
  discovery?: 'none' | 'k8s';
}

/** Every option of a campaign with its default filled in (the report's `options`). */
export type CampaignSettings = Required<Omit<CampaignOptions, 'log' | 'progressEveryMs' | 'verbose' | 'keepDir'>>;

/** The router's client write timeout in a campaign: a few seconds, so that a never-reading client is cut several times per run. */
export const CAMPAIGN_CLIENT_WRITE_TIMEOUT_MS = 3000;

/**
 * Whether this router has a client write timeout (`--client-write-timeout-ms`): a router without
 * it still starts the campaign (its never-reading clients are then judged against the campaign's
 * intended timeout, and held streams show as violations).
 */
export const ROUTER_HAS_CLIENT_WRITE_TIMEOUT = 'clientWriteTimeoutMs' in ROUTER_DEFAULTS;

/** The options with their defaults, or an error for a combination the campaign cannot run. */
export function campaignSettings(opts: CampaignOptions): CampaignSettings {
  const format: CampaignFormat = opts.format ?? 'sglang';
  if (format === 'mixed' && opts.workers < 2) throw new Error('a mixed campaign needs at least 2 workers (one of each format)');
  if (format === 'vllm' && (opts.otherWeightsWorkers ?? 0) > 0) {
    throw new Error('the other-weights worker is an SGLang worker: vLLM continuations are pinned to the model, not yet to the weights (docs/vllm.md)');
  }
  const o: CampaignSettings = {
    durationS: opts.durationS,
    workers: opts.workers,
    format,
    concurrency: opts.concurrency,
    seed: opts.seed,
    faultRate: opts.faultRate,
    tokenIntervalMs: opts.tokenIntervalMs,
    maxNewTokens: opts.maxNewTokens ?? 128,
    nonMigratableShare: opts.nonMigratableShare ?? 0.15,
    cancelShare: opts.cancelShare ?? 0.03,
    badShare: opts.badShare ?? TRAFFIC_DEFAULTS.badShare,
    sharedHeaderShare: opts.sharedHeaderShare ?? TRAFFIC_DEFAULTS.sharedHeaderShare,
    prefixShare: opts.prefixShare ?? TRAFFIC_DEFAULTS.prefixShare,
    otherWeightsWorkers: opts.otherWeightsWorkers ?? (format === 'vllm' ? 0 : 1),
    continuation4xxShare: opts.continuation4xxShare ?? 0.3,
    // The special clients speak SGLang (keep-alive bursts: the campaign's formats).
    clients: opts.clients ?? true,
    clientWriteTimeoutMs: opts.clientWriteTimeoutMs ?? CAMPAIGN_CLIENT_WRITE_TIMEOUT_MS,
    discovery: opts.discovery ?? 'none',
  };
  if (o.discovery === 'k8s' && format !== 'sglang') throw new Error('--discovery k8s runs SGLang workers only (--format sglang)');
  // The 429 proxy stands in front of one worker's URL; a pod's URL is its own address.
  if (o.discovery === 'k8s') o.continuation4xxShare = 0;
  return o;
}

/** The router settings of a campaign: short timers, so that a 20 s campaign sees faults resolve. */
export function campaignRouterConfig(
  workers: string[],
  traceFile: string,
  adminToken: string,
  extra: { clientWriteTimeoutMs?: number; maxConcurrentRequests?: number } = {},
): Partial<RouterConfig> {
  const config: Partial<RouterConfig> = {
    host: '127.0.0.1',
    port: 0,
    workers,
    migrationLimit: 3,
    // Long enough that a CPU-starved shared machine does not pass for a hung worker, short
    // enough that a hang resolves several times within a CI-sized campaign.
    interTokenTimeoutMs: 2000,
    // Queue + prefill: above the inter-token timeout (a slow prefill is not a stall), below the
    // longest hang, so that requests sent to a hung worker move on without blaming it.
    firstTokenTimeoutMs: 4000,
    connectTimeoutMs: 1000,
    benchMs: 2000,
    healthIntervalMs: 500,
    healthTimeoutMs: 1000,
    healthFailureThreshold: 2,
    circuitFailureThreshold: 5,
    circuitOpenMs: 3000,
    circuitSuccessThreshold: 2,
    // The verifier reads every row from the file; the ring stays small, so a full ring does not
    // pass for memory growth.
    traceRingSize: 1000,
    traceFile,
    adminToken,
  };
  if (extra.maxConcurrentRequests !== undefined) config.maxConcurrentRequests = extra.maxConcurrentRequests;
  // Passed only to a router that has the setting (startRouter would ignore an unknown key, but
  // the report would then claim a timeout the router never had).
  if (extra.clientWriteTimeoutMs !== undefined && ROUTER_HAS_CLIENT_WRITE_TIMEOUT) (config as Record<string, unknown>).clientWriteTimeoutMs = extra.clientWriteTimeoutMs;
  return config;
}

/**
 * How long a never-reading client may keep its request open at the router: its first frames (at
 * most the first-token deadline), then the client write timeout, then 2 s for the router's own
 * timers on a loaded host.
 */
export function neverReaderCutMs(c: { firstTokenTimeoutMs: number }, clientWriteTimeoutMs: number): number {
  return c.firstTokenTimeoutMs + clientWriteTimeoutMs + 2000;
}
