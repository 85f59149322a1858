// A chaos campaign: simulated workers (half cumulative, half incremental, so that one request's
// attempts can land on workers of both modes) plus one on other weights, one worker behind a
// proxy that answers 429 to a seeded share of continuations, the router in its own process,
// seeded traffic (with bad requests, shared header ids and prefix-rid cancels) and a seeded fault
// schedule over a duration, and the clients that must hurt nobody else (unknown sampling keys,
// stream_interval, never-reading clients, requests paced around the keep-alive limit); then the
// verdict: every answer against the fault-free reference of its weights, every failure and refusal
// against the rules, the trace rows, workers benched by a client's mistake (a benching the router
// reported that no injected fault explains), in-flight counts and the router's memory.
//
// Formats: SGLang workers (the default), vLLM workers (`format: 'vllm'`), or both (`mixed`: half
// the workers each, and traffic of both formats, each request to its format's endpoint). The
// worker on other weights is an SGLang worker (vLLM continuations are pinned to the model, not
// yet to the weights: docs/vllm.md); the 429 proxy stands before one worker of each format.

import { randomBytes } from 'node:crypto';
import { K8sChaos, K8S_LABELS, K8S_NAMESPACE, K8S_RELIST_MS, K8S_WATCHDOG_MS, drainViolations } from './k8s.ts';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { DEFAULTS as ROUTER_DEFAULTS, type RouterConfig } from '../router/config.ts';
import type { AttemptRow, TraceRow } from '../router/trace/row.ts';
import { DEFAULT_MODEL_PATH, weightsSalt } from '../sim/model.ts';
import { holdUnread, sendRequest, type ClientResult } from './client.ts';
import type { PromptLists } from './sglang-client.ts';
import { FaultInjector, sleep, type WorkerRef } from './faults.ts';
import { ContinuationProxy } from './proxy.ts';
import { referenceAnswer, referenceFor, type Reference } from './reference.ts';
import { startRouterProcess, type MemorySample, type RouterProcess } from './router-proc.ts';
import { FAULT_KINDS, planFaults, type FaultKind, type PlannedFault } from './schedule.ts';
import {
  planKeepAliveBurst,
  planNeverReader,
  planUnit,
  TRAFFIC_DEFAULTS,
  vocabRefusal,
  type CampaignFormat,
  type ClientKind,
  type RequestSpec,
  type TrafficKind,
  type TrafficOptions,
  type VllmShape,
  type WireFormat,
} from './traffic.ts';
import { watchWorkerEvents } from './worker-events.ts';
import {
  benchedByClientMistake,
  benchingsOf,
  FAULT_LEAD_MS,
  faultAftermathMs,
  groupRows,
  judgeNeverReader,
  judgePaced,
  judgeUnknownKey,
  judgeClient,
  judgeTrace,
  outages,
  refusedAtAdmission,
  sharedWorkerAtCancel,
  splitShared,
  unexplainedBreakage,
  type ClientMistakeBench,
  type ReportedWindow,
  type RequestRecord,
  type RowsOfRequest,
  type Weights,
} from './verify.ts';

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

/** The router's client write timeout in a campaign: a few seconds, so that a never-reading client is cut several times per run. */
export const CAMPAIGN_CLIENT_WRITE_TIMEOUT_MS = 3000;

/**
 * Whether this router has a client write timeout (`--client-write-timeout-ms`): a router without
 * it still starts the campaign (its never-reading clients are then judged against the campaign's
 * intended timeout, and held streams show as violations).
 */
export const ROUTER_HAS_CLIENT_WRITE_TIMEOUT = 'clientWriteTimeoutMs' in ROUTER_DEFAULTS;

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


export interface MemoryVerdict {
  samples: number;
  earlyHeapMB: number;
  lateHeapMB: number;
  heapRatio: number;
  earlyRssMB: number;
  lateRssMB: number;
  rssRatio: number;
}

export interface CampaignReport {
  options: Required<Omit<CampaignOptions, 'log' | 'progressEveryMs' | 'verbose' | 'keepDir'>>;
  /**
   * `--discovery k8s`: pod events and watch faults, and the workers whose discovery disagreed with
   * the pods once everything settled (staleWorkers: must be 0). lateDrains: deletions the router
   * learned of too late to drain (through a watch broken on purpose); drainLagMs: from a delete to
   * the router showing the worker draining, for the others.
   */
  k8s: { pods: number; deletions: number; evictions: number; skipped: number; watchFaults: number; lists: number; watches: number; staleWorkers: number; settleMs: number; lateDrains: number; drainLagMs: number[]; handAddedTouched: number } | null;
  /** The special clients, and how they fared. */
  clients: ClientCounts;
  routerConfig: Partial<RouterConfig>;
  workerModes: string[];
  /** The format of each worker, in the order of workerModes. */
  workerFormats: WireFormat[];
  /** Per wire format of the traffic: requests, answers, token-exact answers. */
  byFormat: Partial<Record<WireFormat, FormatCounts>>;
  /** vLLM answers: the usage and logprobs they carried, and those naming only their last attempt's weight versions. */
  vllm: VllmCounts | null;
  /** Workers serving other weights than the default (router-facing URLs), and their version. */
  otherWeights: { workers: string[]; version: string; answers: number; attemptsWithTokens: number };
  /** Requests with an id beyond the vocabulary, and how their clients heard of it. */
  badRequests: { sent: number; refusedInBand: number; refused400: number; otherEnd: number };
  sharedHeader: { groups: number; requests: number; answered: number; exact: number };
  /** sameWorkerAtCancel: members running on the cancelled member's worker when it was cancelled. */
  prefixRids: { groups: number; cancelled: number; survivors: number; survivorsExact: number; sameWorkerAtCancel: number };
  /** The proxy that refuses continuations with 429 (worker: the first; workers: one per format). */
  continuation4xx: { worker: string | null; workers: string[]; share: number; continuations: number; refused: number; clientsGot429: number };
  /** Attempts moved by the first-token deadline (no blame). */
  firstTokenTimeouts: number;
  /**
   * Benchings the router reported (worker_state events: benched, circuit_open, dead) that no fault
   * injected on that worker explains (from just before it was applied to `faultAftermathMs` after
   * it was cleared): must be 0.
   */
  benchedByClient: number;
  benchedByClientDetails: ClientMistakeBench[];
  /** Every benching the router reported, and the window after a fault that explains one. */
  benchings: { total: number; explained: number; aftermathMs: number; eventStreamInterruptions: number };
  elapsedS: number;
  requests: number;
  admitted: number;
  notAdmitted: Partial<Record<TrafficKind, number>>;
  answered: number;
  tokenExact: number;
  /** Admitted answers, and how many of them were token-exact. */
  admittedAnswered: number;
  admittedExact: number;
  failedCleanly: { admitted: number; notAdmitted: number };
  cancelled: number;
  migratedRequests: number;
  migrations: number;
  migrationsOngoing: number;
  migrationsNewRequest: number;
  maxAttempts: number;
  faults: Record<FaultKind, number>;
  faultsTotal: number;
  faultsNotFired: number;
  faultsSkipped: number;
  faultsPlanned: number;
  /** `refusedAtAdmission`: requests the router refused before any attempt, which have no row. */
  traceRows: { attempts: number; attemptsStarted: number; requests: number; refusedAtAdmission: number };
  inFlightAtEnd: { router: number; routerWorkers: number; simWorkers: number };
  memory: MemoryVerdict | null;
  /** The clear errors clients got, by message (numbers blanked), most frequent first. */
  errorMessages: [string, number][];
  violationCount: number;
  violationsByKind: Record<string, number>;
  violations: string[];
}

export interface ClientCounts {
  unknownKey: { sent: number; refused4xx: number; refusedInBand: number; answered: number; noWorker: number; keys: string[] };
  streamInterval: { sent: number; answered: number; exact: number; tokens: readonly [number, number] | null; frameGapMs: readonly [number, number] | null; stalledAttempts: number; unexplained: number };
  neverRead: { sent: number; cutInTime: number; heldPast: number; notJudged: number; cutMs: number; writeTimeoutMs: number; routerHasTimeout: boolean; slowestCutMs: number | null };
  keepAlive: { bursts: number; requests: number; answered: number; exact: number; brokenAttempts: number; unexplained: number };
  /** Requests (of any client) refused because the router was at its concurrency limit. */
  concurrencyLimit503: number;
}

export interface FormatCounts {
  workers: number;
  requests: number;
  admitted: number;
  answered: number;
  tokenExact: number;
  /** Answered token-exact after at least one migration. */
  migrated: number;
}

export interface VllmCounts {
  answers: number;
  exact: number;
  /** Answers that carried usage: streams with the final usage chunk (continuous: on every chunk too), and unary answers. */
  usageFinal: number;
  usageContinuous: number;
  usageNone: number;
  unary: number;
  logprobs: number;
  /** Migrated answers whose weight_versions name only the last attempt's tokens (docs/vllm.md known gap). */
  spansLastAttemptOnly: number;
}

/** Thresholds of the memory check: late vs early median, after a forced GC in the router. */
export const MEMORY_LIMIT_RATIO = 1.5;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
};
const mb = (b: number) => Math.round((b / 1048576) * 10) / 10;

export function judgeMemory(samples: readonly MemorySample[], t0: number, t1: number): MemoryVerdict | null {
  const span = t1 - t0;
  // Early: after warm-up (connection pools, JIT, rings filled); late: the last fifth.
  const early = samples.filter((s) => s.t >= t0 + span * 0.2 && s.t <= t0 + span * 0.45);
  const late = samples.filter((s) => s.t >= t0 + span * 0.8);
  if (early.length === 0 || late.length === 0) return null;
  const eh = median(early.map((s) => s.heapUsed));
  const lh = median(late.map((s) => s.heapUsed));
  const er = median(early.map((s) => s.rss));
  const lr = median(late.map((s) => s.rss));
  return {
    samples: samples.length,
    earlyHeapMB: mb(eh),
    lateHeapMB: mb(lh),
    heapRatio: Math.round((lh / eh) * 100) / 100,
    earlyRssMB: mb(er),
    lateRssMB: mb(lr),
    rssRatio: Math.round((lr / er) * 100) / 100,
  };
}

async function adminJson(url: string, path: string, token: string): Promise<unknown> {
  const res = await fetch(url + path, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return res.json();
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(url + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name + ' ') || line.startsWith(name + '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

async function waitFor(what: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await what()) return true;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

function countMessages(records: readonly RequestRecord[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const r of records) {
    if (r.errorMessage === null) continue;
    const key = `${r.client ? `${r.client} ` : ''}${r.format === 'vllm' ? 'vllm ' : ''}${r.admitted ? 'admitted' : 'not admitted'}: ${r.errorMessage.replace(/https?:\/\/[^\s,)]+/g, '<worker>').replace(/\d+/g, 'N').replace(/\[N(, N)*\]/g, '[...]').replace(/~mN~\w+/g, '~mN~<nonce>').slice(0, 160)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
}

export async function runCampaign(opts: CampaignOptions): Promise<CampaignReport> {
  const format: CampaignFormat = opts.format ?? 'sglang';
  if (format === 'mixed' && opts.workers < 2) throw new Error('a mixed campaign needs at least 2 workers (one of each format)');
  if (format === 'vllm' && (opts.otherWeightsWorkers ?? 0) > 0) {
    throw new Error('the other-weights worker is an SGLang worker: vLLM continuations are pinned to the model, not yet to the weights (docs/vllm.md)');
  }
  const o = {
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
  const k8sMode = o.discovery === 'k8s';
  if (k8sMode && format !== 'sglang') throw new Error('--discovery k8s runs SGLang workers only (--format sglang)');
  // The 429 proxy stands in front of one worker's URL; a pod's URL is its own address.
  if (k8sMode) o.continuation4xxShare = 0;
  let k8s: K8sChaos | null = null;
  const sglangClients = o.clients && format !== 'vllm';
  const log = opts.log ?? (() => undefined);
  const durationMs = o.durationS * 1000;
  const dir = mkdtempSync(join(tmpdir(), 'baton-chaos-'));
  const traceFile = join(dir, 'traces.jsonl');
  const adminToken = randomBytes(24).toString('hex');
  const clusters: SimCluster[] = [];
  let router: RouterProcess | null = null;
  let client: Pool | null = null;
  let stopEvents: (() => Promise<void>) | null = null;
  const proxies: ContinuationProxy[] = [];
  const violations: string[] = [];
  const byKind: Record<string, number> = {};
  const violate = (kind: string, message: string) => {
    byKind[kind] = (byKind[kind] ?? 0) + 1;
    if (violations.length < 50) violations.push(message);
  };

  try {
    // --- workers: SGLang's cumulative and incremental side by side, vLLM's, or both -------------
    const nVllm = format === 'vllm' ? o.workers : format === 'mixed' ? Math.floor(o.workers / 2) : 0;
    const nSglang = o.workers - nVllm;
    const nInc = Math.floor(nSglang / 2);
    const nCum = nSglang - nInc;
    const refs: (WorkerRef & { weights: Weights; format: WireFormat })[] = [];
    if (k8sMode) {
      // One process per pod, each on its own loopback address, all on the port the first got.
      let port = 0;
      for (let i = 0; i < nSglang; i++) {
        const incremental = i % 2 === 1;
        const c = await startCluster({ workers: 1, host: `127.0.0.${11 + i}`, port, tokenIntervalMs: o.tokenIntervalMs, incremental });
        clusters.push(c);
        const w = c.workers()[0]!;
        port = w.port;
        refs.push({ cluster: c, local: w.index, url: w.url, incremental, weights: 'default', format: 'sglang' });
      }
    }
    for (const [n, incremental] of [[nCum, false], [nInc, true]] as const) {
      if (n === 0 || k8sMode) continue;
      const c = await startCluster({ workers: n, port: 0, tokenIntervalMs: o.tokenIntervalMs, incremental });
      clusters.push(c);
      for (const w of c.workers()) refs.push({ cluster: c, local: w.index, url: w.url, incremental, weights: 'default', format: 'sglang' });
    }
    if (nVllm > 0) {
      // vLLM streams token-id deltas: "incremental" as the router's probe says.
      const c = await startCluster({ workers: nVllm, port: 0, tokenIntervalMs: o.tokenIntervalMs, format: 'vllm' });
      clusters.push(c);
      for (const w of c.workers()) refs.push({ cluster: c, local: w.index, url: w.url, incremental: true, weights: 'default', format: 'vllm' });
    }
    // --- a worker on other weights: a request's tokens must all come from one set of weights --
    if (o.otherWeightsWorkers > 0) {
      const c = await startCluster({ workers: o.otherWeightsWorkers, port: 0, tokenIntervalMs: o.tokenIntervalMs, incremental: false, weightVersion: OTHER_WEIGHT_VERSION });
      clusters.push(c);
      for (const w of c.workers()) refs.push({ cluster: c, local: w.index, url: w.url, incremental: false, weights: 'other', format: 'sglang' });
    }
    // --- a proxy that answers 429 to a share of the continuations sent to one worker of each format
    const refusingUrls: string[] = [];
    if (o.continuation4xxShare > 0) {
      for (const f of ['sglang', 'vllm'] as const) {
        const group = refs.filter((r) => r.format === f && r.weights === 'default');
        if (group.length === 0) continue;
        const target = group[Math.min(1, group.length - 1)]!;
        const proxy = new ContinuationProxy(target.url, o.seed, o.continuation4xxShare, f);
        proxies.push(proxy);
        const at = await proxy.listen();
        log(`proxy ${at} -> ${target.url}${format === 'sglang' ? '' : ` (${f})`}: 429 for ${o.continuation4xxShare * 100}% of continuations`);
        target.url = at;
        refusingUrls.push(at);
      }
    }
    const refusingUrl = refusingUrls[0] ?? null;
    const podUrls = k8sMode ? refs.filter((r) => r.weights === 'default').map((r) => r.url) : [];
    if (k8sMode) {
      k8s = await K8sChaos.start(refs.filter((r) => podUrls.includes(r.url)).map((r) => ({ url: r.url, host: new URL(r.url).hostname, cluster: r.cluster, local: r.local })), o.seed, opts.verbose ? log : () => undefined);
      log(`fake Kubernetes API server ${k8s.fake.url}: ${podUrls.length} pods in namespace ${K8S_NAMESPACE}, watches faulted on a seeded schedule`);
    }
    const otherSalt = weightsSalt(DEFAULT_MODEL_PATH, OTHER_WEIGHT_VERSION);
    const workerUrls = refs.map((r) => r.url);
    const incrementalByUrl = new Map(refs.map((r) => [r.url, r.incremental]));
    const weightsByUrl = new Map(refs.map((r) => [r.url, r.weights]));
    const formatByUrl = new Map(refs.map((r) => [r.url, r.format]));
    const totalWorkers = refs.length;

    // --- router ------------------------------------------------------------------------------
    // The router's concurrency limit: the most requests the campaign ever has open while the
    // router cuts never-reading clients in time (a loop's unit is at most 4 requests; one
    // keep-alive burst at a time; never-readers 3–5 s apart, each open at most neverReaderCutMs),
    // and a margin. A router that keeps cut clients' slots runs into it: a 503 is a violation.
    const probeConfig = campaignRouterConfig([], '', '');
    const cutMs = neverReaderCutMs({ firstTokenTimeoutMs: probeConfig.firstTokenTimeoutMs! }, o.clientWriteTimeoutMs);
    const keepAliveBurst = TRAFFIC_DEFAULTS.keepAliveBurst;
    const maxConcurrentRequests = o.concurrency * 4 + (o.clients ? keepAliveBurst + Math.ceil(cutMs / 3000) + 1 : 0) + 8;
    const routerConfig = campaignRouterConfig(workerUrls.filter((u) => !podUrls.includes(u)), traceFile, adminToken, { clientWriteTimeoutMs: o.clientWriteTimeoutMs, maxConcurrentRequests });
    if (k8s) {
      Object.assign(routerConfig, {
        serviceDiscovery: true,
        selector: Object.entries(K8S_LABELS).map(([k, v]) => `${k}=${v}`),
        serviceDiscoveryPort: Number(new URL(podUrls[0]!).port),
        serviceDiscoveryNamespace: K8S_NAMESPACE,
        serviceDiscoveryRelistMs: K8S_RELIST_MS,
        serviceDiscoveryWatchdogMs: K8S_WATCHDOG_MS,
        drainMarginMs: 1_000,
      });
      // The router process inherits the environment: its kubeconfig is the fake's.
      const prev = process.env.KUBECONFIG;
      process.env.KUBECONFIG = k8s.fake.writeKubeconfig(join(dir, 'kubeconfig'), K8S_NAMESPACE);
      try {
        router = await startRouterProcess(routerConfig);
      } finally {
        if (prev === undefined) delete process.env.KUBECONFIG;
        else process.env.KUBECONFIG = prev;
      }
    } else {
      router = await startRouterProcess(routerConfig);
    }
    const url = router.url;
    // Probed: streaming mode known, and each worker's format detected as the one it speaks.
    const ready = await waitFor(async () => {
      const body = (await adminJson(url, '/workers', adminToken)) as { workers: { url: string; health: string; incremental: boolean | null; format?: string | null }[] };
      return body.workers.length === totalWorkers && body.workers.every((w) => w.health === 'healthy' && w.incremental !== null && (w.format ?? 'sglang') === formatByUrl.get(w.url));
    }, 20_000);
    if (!ready) throw new Error('the router did not see every worker healthy and probed (as the format it speaks) within 20 s');
    // Every benching as the router decides it (verify.ts benchingsOf).
    const workerEvents = watchWorkerEvents(url, adminToken);
    stopEvents = () => workerEvents.stop();
    if (o.clients && !ROUTER_HAS_CLIENT_WRITE_TIMEOUT) log(`this router has no --client-write-timeout-ms: never-reading clients are judged against ${o.clientWriteTimeoutMs} ms all the same`);
    log(`router ${url} (pid ${router.pid}); workers ${refs.map((r) => `${r.url} ${r.format === 'vllm' ? 'vllm' : r.incremental ? 'incremental' : 'cumulative'}${r.weights === 'other' ? ` weight_version ${OTHER_WEIGHT_VERSION}` : ''}`).join(', ')}`);

    // --- schedule ----------------------------------------------------------------------------
    const plan: PlannedFault[] = planFaults({ seed: o.seed, durationMs, workers: totalWorkers, faultRate: o.faultRate, interTokenTimeoutMs: routerConfig.interTokenTimeoutMs!, formats: refs.map((r) => r.format) });
    log(`seed ${o.seed}: ${plan.length} faults planned over ${o.durationS} s, concurrency ${o.concurrency}`);
    const injector = new FaultInjector(refs);
    // A traffic unit may be a group of up to four requests sent together.
    client = new Pool(url, { connections: o.concurrency * 4 + 8, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });

    const records: RequestRecord[] = [];
    const memory: MemorySample[] = [];
    const t0 = Date.now();
    const tEnd = t0 + durationMs;
    injector.start(plan, t0);
    if (k8s) {
      const indexOf = (u: string) => refs.findIndex((r) => r.url === u);
      const podIdx = new Set(podUrls.map(indexOf));
      k8s.gate = { hold: (u) => injector.hold(indexOf(u)), release: (u) => injector.release(indexOf(u)), out: () => [...injector.busyWorkers()].filter((i) => podIdx.has(i)).length };
      k8s.health = async (u) => ((await adminJson(url, '/workers', adminToken)) as { workers: { url: string; health: string }[] }).workers.find((w) => w.url === u)?.health;
      k8s.run(o.seed, t0, tEnd);
    }
    let next = 0;
    let inFlight = 0;
    let routerDied = false;

    const sampleEvery = Math.max(500, Math.min(2000, durationMs / 40));
    const sampler = setInterval(() => {
      if (!router!.alive()) return;
      router!.memory().then((m) => memory.push(m), () => undefined);
    }, sampleEvery);

    // The router's own view of its workers, polled: when it reports a worker anything but
    // healthy (benched, dead, unhealthy after failed health checks, breaker open), that worker is
    // out for a reason the verifier accepts. The state may have changed any time since the last
    // poll, so an out-window opens at the previous poll and closes at the first healthy one.
    const reportedOut: (ReportedWindow & { states: string[] })[] = [];
    const openOut = new Map<string, ReportedWindow & { states: string[] }>();
    const seen = new Map<string, string>();
    let lastPoll = Date.now();
    let polling = false;
    const watcher = setInterval(() => {
      if (polling) return;
      polling = true;
      const before = lastPoll;
      adminJson(url, '/workers', adminToken).then((body) => {
        const now = Date.now();
        lastPoll = now;
        for (const w of (body as { workers: { url: string; health: string; circuit: string; in_flight: number }[] }).workers) {
          const open = openOut.get(w.url);
          const states = w.circuit === 'open' && w.health !== 'circuit_open' ? [w.health, 'circuit_open'] : [w.health];
          if (w.health !== 'healthy') {
            if (open) {
              open.end = now;
              for (const st of states) if (!open.states.includes(st)) open.states.push(st);
            } else {
              const win = { url: w.url, start: before, end: now, states };
              openOut.set(w.url, win);
              reportedOut.push(win);
            }
          } else if (open) {
            open.end = now;
            openOut.delete(w.url);
          }
          const state = `${w.health}/${w.circuit}`;
          if (opts.verbose && seen.get(w.url) !== state) log(`t=${((now - t0) / 1000).toFixed(1)}s worker ${w.url} ${seen.get(w.url) ?? '?'} -> ${state} (in flight ${w.in_flight})`);
          seen.set(w.url, state);
        }
      }, () => undefined).finally(() => (polling = false));
    }, 100);
    if (opts.verbose) injector.onApply = (f, phase) => log(`t=${((Date.now() - t0) / 1000).toFixed(1)}s fault ${f.kind} worker ${f.worker} (${refs[f.worker]!.url}) ${phase}`);
    const progressEvery = opts.progressEveryMs ?? 5000;
    let lastMigrations = 0;
    const progress = setInterval(() => {
      void metric(url, 'baton_migrations_total').then((m) => (lastMigrations = m), () => undefined).finally(() => {
        const done = records.length;
        const exact = records.filter((r) => r.exact).length;
        const bad = records.reduce((n, r) => n + r.violations.length, 0);
        log(`t=${Math.round((Date.now() - t0) / 1000)}s requests ${done + inFlight} (in flight ${inFlight}) answered ${records.filter((r) => r.result === 'answer').length} exact ${exact} migrations ${lastMigrations} faults ${injector.total} violations ${bad}`);
      });
    }, progressEvery);

    // stream_interval values whose frames come 0.8–1.5 inter-token deadlines apart at the
    // workers' token interval (none without one).
    const deadline = routerConfig.interTokenTimeoutMs!;
    const streamIntervalTokens: [number, number] | undefined =
      sglangClients && o.tokenIntervalMs > 0 ? [Math.ceil((deadline * 0.8) / o.tokenIntervalMs), Math.ceil((deadline * 1.5) / o.tokenIntervalMs)] : undefined;
    const trafficOpts: TrafficOptions = {
      seed: o.seed,
      nonMigratableShare: o.nonMigratableShare,
      maxNewTokens: o.maxNewTokens,
      cancelShare: o.cancelShare,
      badShare: o.badShare,
      sharedHeaderShare: o.sharedHeaderShare,
      prefixShare: o.prefixShare,
      format: o.format,
      unknownKeyShare: sglangClients ? TRAFFIC_DEFAULTS.unknownKeyShare : 0,
      streamIntervalShare: TRAFFIC_DEFAULTS.streamIntervalShare,
      streamIntervalTokens,
      keepAliveBurst,
    };
    const hasOther = refs.some((r) => r.weights === 'other');
    // What each vLLM request asked of its answer (usage, logprobs), for the report.
    const specShapes = new Map<string, VllmShape>();
    // One request: sent, read, judged against its reference (of either weights).
    const run = async (spec: RequestSpec, send: (spec: RequestSpec, inputs: PromptLists) => Promise<ClientResult>) => {
      if (spec.vllm) specShapes.set(spec.key, spec.vllm);
      const ref = referenceFor(spec);
      // The other weights' worker is an SGLang worker: only SGLang answers may be of its weights.
      const other = hasOther && spec.format === 'sglang' ? referenceAnswer(spec, otherSalt) : undefined;
      const inputs: PromptLists = {};
      if (spec.format === 'sglang') for (const key of ['input_token_logprobs', 'input_top_logprobs'] as const) {
        const texts = [ref as Reference, other].filter((x): x is Reference => x?.[key] !== undefined).map((x) => JSON.stringify(x[key]));
        if (texts.length > 0) inputs[key] = texts;
      }
      inFlight++;
      const r = await send(spec, inputs);
      inFlight--;
      records.push(judgeClient(r, ref, other));
    };
    const read = (spec: RequestSpec, inputs: PromptLists) => sendRequest(spec, { dispatcher: client!, routerUrl: url, timeoutMs: 60_000, inputs, cancelAfterChunks: spec.cancelAfterChunks });
    const loop = async () => {
      while (Date.now() < tEnd && !routerDied) {
        // A unit is one request, or a group sent together (shared header, prefix-sharing rids).
        const unit = planUnit(trafficOpts, next++);
        // A stream_interval stream runs for seconds: none is started that would outlast the
        // traffic (the campaign lasts its duration; the unit is skipped, not changed).
        const si = unit[0]!.client === 'stream_interval' ? unit[0]!.decode.max_new_tokens * o.tokenIntervalMs * 1.5 : 0;
        if (si > 0 && Date.now() + si > tEnd) continue;
        await Promise.all(unit.map((spec) => run(spec, read)));
        if (!router!.alive()) routerDied = true;
      }
    };
    // Keep-alive bursts: each 4.8–5.2 s after the previous one ended.
    let bursts = 0;
    const keepAlive = async () => {
      for (let k = 0; ; k++) {
        const burst = planKeepAliveBurst(trafficOpts, k);
        await sleep(burst.gapMs);
        if (Date.now() >= tEnd || routerDied) return;
        bursts++;
        await Promise.all(burst.specs.map((spec) => run(spec, read)));
      }
    };
    // Never-reading clients, 3–5 s apart, each holding its unread stream past the longest the
    // router may keep it; none opened too late to be held that long before the traffic ends.
    const holdMs = cutMs + 3000;
    const neverReaders = async () => {
      const open: Promise<void>[] = [];
      let at = Date.now();
      for (let k = 0; ; k++) {
        const nr = planNeverReader(trafficOpts, k);
        at += nr.gapMs;
        if (at + holdMs > tEnd) break;
        await sleep(at - Date.now());
        if (routerDied) break;
        open.push(run(nr.spec, (spec) => holdUnread(spec, url, holdMs)));
      }
      await Promise.all(open);
    };
    await Promise.all([...Array.from({ length: o.concurrency }, loop), ...(o.clients ? [keepAlive()] : []), ...(sglangClients ? [neverReaders()] : [])]);
    const tTrafficEnd = Date.now();
    await k8s?.finish();
    clearInterval(sampler);
    clearInterval(progress);
    clearInterval(watcher);
    await workerEvents.stop();
    if (routerDied || !router.alive()) violate('router_crashed', `the router process died: ${JSON.stringify(router.exitInfo())}\n${router.output().slice(-2000)}`);

    // --- settle: every fault cleared, every worker back, nothing left in flight -----------------
    await injector.finish();
    for (const e of injector.errors) log(`fault injection: ${e}`);
    let routerInFlight = -1;
    let routerWorkersInFlight = -1;
    let simInFlight = -1;
    if (router.alive()) {
      await waitFor(async () => (routerInFlight = await metric(url, 'baton_requests_in_flight')) === 0, 10_000);
      await waitFor(async () => {
        const body = (await adminJson(url, '/workers', adminToken)) as { workers: { in_flight: number }[] };
        routerWorkersInFlight = body.workers.reduce((n, w) => n + w.in_flight, 0);
        return routerWorkersInFlight === 0;
      }, 10_000);
    }
    await waitFor(async () => {
      let n = 0;
      for (const r of refs) n += (await r.cluster.stats(r.local)).inFlight;
      simInFlight = n;
      return n === 0;
    }, 10_000);
    if (routerInFlight !== 0) violate('in_flight', `router in-flight gauge is ${routerInFlight} after the campaign`);
    if (routerWorkersInFlight !== 0) violate('in_flight', `router counts ${routerWorkersInFlight} attempts in flight on workers after the campaign`);
    // --- Kubernetes: the router's discovered workers against the pods, within a re-list -----------
    let k8sReport: CampaignReport['k8s'] = null;
    if (k8s && router.alive()) {
      const settleFrom = Date.now();
      type Row = { url: string; discovery?: unknown };
      let stale = -1;
      let handAddedTouched = 0;
      const disagreement = async () => {
        const body = (await adminJson(url, '/workers', adminToken)) as { workers: Row[] };
        const truth = k8s!.truth();
        const discovered = new Set(body.workers.filter((w) => w.discovery).map((w) => w.url));
        stale = [...discovered].filter((u) => !truth.has(u)).length + [...truth].filter((u) => !discovered.has(u)).length;
        // The other-weights worker was given with --worker: discovery must leave it as it is.
        handAddedTouched = workerUrls.filter((u) => !podUrls.includes(u)).filter((u) => !body.workers.some((w) => w.url === u && !w.discovery)).length;
        return stale === 0;
      };
      // Bound: a re-list period and the watchdog, plus the longest backoff after failed watches (30 s).
      await waitFor(disagreement, K8S_RELIST_MS + K8S_WATCHDOG_MS + 30_000 + 5_000);
      const settleMs = Date.now() - settleFrom;
      if (stale !== 0) violate('stale_workers', `${stale} workers disagree with the pods ${settleMs} ms after the last pod change (discovery missed a change)`);
      if (handAddedTouched !== 0) violate('hand_added', `${handAddedTouched} hand-added workers were changed or removed by discovery`);
      k8sReport = { pods: podUrls.length, deletions: k8s.deletions, evictions: k8s.evictions, skipped: k8s.skipped, watchFaults: k8s.watchFaults + k8s.fake.counts.watchFaults, lists: k8s.fake.counts.list, watches: k8s.fake.counts.watch, staleWorkers: stale, settleMs, lateDrains: 0, drainLagMs: [], handAddedTouched };
      for (const e of k8s.errors) violate('k8s_schedule', `pod schedule: ${e}`);
    }
    if (simInFlight !== 0) violate('in_flight', `workers still run ${simInFlight} generations after the campaign (upstream attempts leaked)`);

    // --- memory ------------------------------------------------------------------------------
    const mem = judgeMemory(memory, t0, tTrafficEnd);
    if (mem && (mem.heapRatio > MEMORY_LIMIT_RATIO || mem.rssRatio > MEMORY_LIMIT_RATIO)) {
      violate('memory', `router memory grew: heap ${mem.earlyHeapMB} → ${mem.lateHeapMB} MB (x${mem.heapRatio}), rss ${mem.earlyRssMB} → ${mem.lateRssMB} MB (x${mem.rssRatio})`);
    }

    // --- trace rows --------------------------------------------------------------------------
    const attemptsStarted = router.alive() ? await metric(url, 'baton_attempts_started_total') : NaN;
    const csvExport = router.alive() ? await (await fetch(url + '/traces?format=csv', { headers: { authorization: `Bearer ${adminToken}` } })).text() : '';
    await router.stop();
    const fileText = readFileSync(traceFile, 'utf8');
    if (opts.keepDir) {
      mkdirSync(opts.keepDir, { recursive: true });
      copyFileSync(traceFile, join(opts.keepDir, 'traces.jsonl'));
      writeFileSync(join(opts.keepDir, 'requests.jsonl'), records.map((r) => JSON.stringify(r)).join('\n') + '\n');
      writeFileSync(join(opts.keepDir, 'faults.json'), JSON.stringify({ plan, windows: injector.windows, t0, reportedOut, workerEvents: workerEvents.events, refusals429: proxies.flatMap((p) => p.refusals) }, null, 1));
    }
    const rows: TraceRow[] = fileText.split('\n').filter(Boolean).map((l) => JSON.parse(l) as TraceRow);
    const attemptRows = rows.filter((r) => r.kind === 'attempt').length;
    const requestRows = rows.length - attemptRows;
    if (attemptRows !== attemptsStarted) violate('trace', `trace: ${attemptRows} attempt rows but ${attemptsStarted} attempts started`);
    // A request the router refused at admission (an unknown sampling key: a 4xx, or in band on a
    // stream, before any attempt) leaves no row, as any body the router refuses.
    const idsWithRows = new Set(rows.map((r) => r.request_id));
    const unrecorded = records.filter((r) => r.client === 'unknown_key' && !idsWithRows.has(r.id) && refusedAtAdmission(r, 0)).length;
    if (requestRows !== records.length - unrecorded) violate('trace', `trace: ${requestRows} request rows for ${records.length} requests${unrecorded ? ` (${unrecorded} refused at admission without one)` : ''}`);
    // Secrets: the admin token must not leak into anything the router writes.
    for (const [where, text] of [['router stdout/stderr', router.output()], ['trace file', fileText], ['CSV export', csvExport]] as const) {
      if (text.includes(adminToken)) violate('secret', `the admin token appears in the ${where}`);
    }

    const grouped = groupRows(rows);
    // A worker's time out lasts past its cause: the bench, an opened breaker, and health checks
    // (threshold x interval, each up to its timeout) before a returning worker is taken back.
    const graceMs = routerConfig.circuitOpenMs! + routerConfig.healthFailureThreshold! * (routerConfig.healthIntervalMs! + routerConfig.healthTimeoutMs!) + 1000;
    const attemptRowList = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
    const faultWindows = [
      ...injector.windows.map((w) => ({ url: refs[w.worker]!.url, start: w.start, end: w.end, kind: w.kind })),
      // A deleted or evicted pod: its worker going away and its process killed are faults too.
      ...(k8s?.windows ?? []).map((w) => ({ url: w.url, start: w.start, end: w.end, kind: 'kill' as const })),
    ];
    // What a fault on a worker may still cause after it is cleared (verify.ts faultAftermathMs).
    const aftermathMs = faultAftermathMs({ interTokenTimeoutMs: routerConfig.interTokenTimeoutMs!, healthIntervalMs: routerConfig.healthIntervalMs!, healthTimeoutMs: routerConfig.healthTimeoutMs! });
    if (k8s && k8sReport) {
      const d = drainViolations(k8s.windows, attemptRowList, 1_000);
      for (const v of d.violations) violate('drain', v);
      k8sReport.lateDrains = d.lateDrains;
      k8sReport.drainLagMs = d.drainLagMs;
    }
    const ctx = {
      migrationLimit: routerConfig.migrationLimit!,
      incrementalByUrl,
      workerUrls,
      weightsByUrl,
      refusingUrl,
      refusingUrls,
      formatByUrl,
      workerOut: outages(attemptRowList, faultWindows, routerConfig.benchMs!, graceMs, reportedOut),
    };
    // The members of a shared-header group share a logical id: their rows are told apart by
    // prompt length (each member has its own).
    const rowsOf = new Map<string, RowsOfRequest | undefined>();
    const byId = new Map<string, RequestRecord[]>();
    for (const rec of records) {
      let list = byId.get(rec.id);
      if (!list) byId.set(rec.id, (list = []));
      list.push(rec);
    }
    for (const [id, recs] of byId) {
      if (recs.length === 1 && recs[0]!.group?.kind !== 'shared_header') {
        rowsOf.set(recs[0]!.key, grouped.get(id));
        continue;
      }
      const { byLength, stray } = splitShared(grouped.get(id), recs.map((r) => r.promptLength));
      for (const rec of recs) rowsOf.set(rec.key, byLength.get(rec.promptLength));
      if (stray > 0) violate('trace', `${id}: trace: ${stray} rows of a shared-header group that match no member's prompt length`);
      if (recs.some((r) => r.group?.kind !== 'shared_header')) violate('trace', `${id}: trace: ${recs.length} requests of the campaign used one logical id outside a shared-header group`);
    }
    let siUnexplained = 0;
    let kaUnexplained = 0;
    let limit503 = 0;
    let migrations = 0;
    let ongoing = 0;
    let migrated = 0;
    let maxAttempts = 0;
    let otherAnswers = 0;
    let otherAttemptsWithTokens = 0;
    let clientsGot429 = 0;
    let spansLastOnly = 0;
    const migratedByFormat: Record<WireFormat, number> = { sglang: 0, vllm: 0 };
    for (const rec of records) {
      const g = rowsOf.get(rec.key);
      const label = rec.key === rec.id ? rec.id : `${rec.id} (${rec.key})`;
      for (const m of rec.violations) violate(m.split(':')[0]!, `${label}: ${m}`);
      // The special clients' own rules; the ordinary ones for the rest (and for stream_interval
      // and keep-alive requests too, which are ordinary requests but for their pacing).
      const traceChecks =
        rec.client === 'unknown_key' ? judgeUnknownKey(rec, g) : rec.client === 'never_read' ? judgeNeverReader(rec, g, cutMs, ROUTER_HAS_CLIENT_WRITE_TIMEOUT ? o.clientWriteTimeoutMs : null) : judgeTrace(rec, g, ctx);
      for (const m of traceChecks) violate(m.split(':')[0]!.split(' (')[0]!, `${label}: ${m}`);
      if (rec.client === 'stream_interval' || rec.client === 'keep_alive') {
        const broke = unexplainedBreakage(g, faultWindows, aftermathMs).length;
        if (rec.client === 'stream_interval') siUnexplained += broke;
        else kaUnexplained += broke;
        for (const m of judgePaced(rec, g, faultWindows, aftermathMs)) violate(m.split(':')[0]!, `${label}: ${m}`);
      }
      if (rec.status === 503 && /at its limit/.test(rec.errorMessage ?? '')) {
        limit503++;
        violate('concurrency limit', `${label}: refused at the router's concurrency limit (${maxConcurrentRequests}): ${rec.errorMessage}`);
      }
      const row = g?.requests[0];
      if (row) {
        maxAttempts = Math.max(maxAttempts, row.attempts);
        migrations += row.migrations;
        if (row.migrations > 0 && rec.exact) migrated++;
      }
      for (const a of g?.attempts ?? []) {
        if (a.attempt > 0 && a.replayed_tokens > 0) ongoing++;
        if (a.tokens > 0 && weightsByUrl.get(a.worker) === 'other') otherAttemptsWithTokens++;
      }
      if (rec.exact && rec.weights.length === 1 && rec.weights[0] === 'other') otherAnswers++;
      const last = g?.attempts.reduce<AttemptRow | null>((m, a) => (m === null || a.attempt > m.attempt ? a : m), null);
      if (rec.result === 'error' && last?.error_kind === 'http_4xx' && last.worker !== undefined && refusingUrls.includes(last.worker) && last.attempt > 0) clientsGot429++;
      if (row && rec.spansStart !== undefined && rec.spansStart !== 0 && rec.exact) spansLastOnly++;
      if (row && row.migrations > 0 && rec.exact) migratedByFormat[rec.format]++;
    }
    // Prefix-rid groups: how many of the members that were not cancelled were running on the
    // cancelled member's worker when it was cancelled (where an abort by prefix would hit them).
    let prefixColocated = 0;
    const prefixGroups = new Map<string, RequestRecord[]>();
    for (const rec of records) {
      if (rec.group?.kind !== 'prefix_rids') continue;
      let list = prefixGroups.get(rec.group.name);
      if (!list) prefixGroups.set(rec.group.name, (list = []));
      list.push(rec);
    }
    for (const members of prefixGroups.values()) {
      const c = members.find((m) => m.group!.member === m.group!.canceller && m.result === 'cancelled');
      if (!c) continue;
      for (const m of members) if (m !== c && sharedWorkerAtCancel(rowsOf.get(c.key), rowsOf.get(m.key))) prefixColocated++;
    }
    const known = new Set(records.map((r) => r.id));
    const strangers = [...grouped.keys()].filter((id) => !known.has(id));
    if (strangers.length > 0) violate('trace', `trace: rows for ${strangers.length} requests the campaign never sent (e.g. ${strangers[0]})`);
    // Every 429 the proxy sent reached the router as a 4xx on that attempt.
    // (A client that hung up just as the 429 came may have its attempt recorded as cancelled.)
    const rowByRid = new Map(attemptRowList.map((a) => [a.rid, a]));
    const lost429 = proxies.flatMap((p) => p.refusals).filter((r) => {
      const row = rowByRid.get(r.rid);
      return row === undefined || (row.error_kind !== 'http_4xx' && row.outcome !== 'cancelled');
    });
    if (lost429.length > 0) violate('continuation 4xx', `continuation 4xx: ${lost429.length} 429s of the proxy have no http_4xx attempt row (e.g. ${lost429[0]!.rid})`);

    // --- workers benched by a client's mistake ------------------------------------------------
    // Every benching the router reported, less those a fault injected on that worker explains.
    const benchings = benchingsOf(workerEvents.events, routerConfig.benchMs!, routerConfig.circuitOpenMs!);
    const clientByRequest = new Map<string, ClientKind>();
    for (const r of records) if (r.client) clientByRequest.set(r.id, r.client);
    const benchedByClient = benchedByClientMistake(benchings, faultWindows, aftermathMs, attemptRowList, (id) => clientByRequest.get(id));
    for (const b of benchedByClient) {
      violate(
        'benched by a client',
        `benched by a client: ${b.worker} ${b.health} at t=${((b.at - t0) / 1000).toFixed(1)}s with no fault on it from ${FAULT_LEAD_MS} ms before to ${aftermathMs} ms after; failed there just before: ${b.suspects.join(', ') || 'nothing'}`,
      );
    }

    if (opts.keepDir) writeFileSync(join(opts.keepDir, 'benchings.json'), JSON.stringify({ t0, aftermathMs, faults: faultWindows, benchings, benchedByClient }, null, 1));

    // --- the special clients -------------------------------------------------------------------
    const byClient = (c: ClientKind) => records.filter((r) => r.client === c);
    const uk = byClient('unknown_key');
    const si = byClient('stream_interval');
    const nr = byClient('never_read');
    const ka = byClient('keep_alive');
    const nrTook = nr.map((r) => rowsOf.get(r.key)?.requests[0]).filter((row) => row !== undefined).map((row) => row.ended_at - row.started_at);
    const nrJudged = nr.filter((r) => r.endedAt - r.startedAt >= cutMs);
    const heldPast = nrJudged.filter((r) => {
      const row = rowsOf.get(r.key)?.requests[0];
      return row !== undefined && row.ended_at - row.started_at > cutMs;
    }).length;
    const clients: ClientCounts = {
      unknownKey: {
        sent: uk.length,
        refused4xx: uk.filter((r) => r.result === 'error' && !r.errorInBand && r.status >= 400 && r.status < 500).length,
        refusedInBand: uk.filter((r) => r.result === 'error' && r.errorInBand).length,
        answered: uk.filter((r) => r.result === 'answer').length,
        noWorker: uk.filter((r) => r.status === 503 || /no worker left|no healthy worker/i.test(r.errorMessage ?? '')).length,
        keys: [...new Set(uk.map((r) => r.unknownKey!))],
      },
      streamInterval: {
        sent: si.length,
        answered: si.filter((r) => r.result === 'answer').length,
        exact: si.filter((r) => r.exact).length,
        tokens: streamIntervalTokens ?? null,
        frameGapMs: streamIntervalTokens ? [streamIntervalTokens[0] * o.tokenIntervalMs, streamIntervalTokens[1] * o.tokenIntervalMs] : null,
        stalledAttempts: si.reduce((n, r) => n + (rowsOf.get(r.key)?.attempts.filter((a) => a.error_kind === 'stalled').length ?? 0), 0),
        unexplained: siUnexplained,
      },
      neverRead: {
        sent: nr.length,
        cutInTime: nrJudged.length - heldPast,
        heldPast,
        notJudged: nr.length - nrJudged.length,
        cutMs,
        writeTimeoutMs: o.clientWriteTimeoutMs,
        routerHasTimeout: ROUTER_HAS_CLIENT_WRITE_TIMEOUT,
        slowestCutMs: nrTook.length > 0 ? Math.max(...nrTook) : null,
      },
      keepAlive: {
        bursts,
        requests: ka.length,
        answered: ka.filter((r) => r.result === 'answer').length,
        exact: ka.filter((r) => r.exact).length,
        brokenAttempts: ka.reduce((n, r) => n + (rowsOf.get(r.key)?.attempts.filter((a) => a.outcome === 'failed' && a.error_kind !== 'http_4xx' && a.error_kind !== 'validation').length ?? 0), 0),
        unexplained: kaUnexplained,
      },
      concurrencyLimit503: limit503,
    };

    const notAdmitted: Partial<Record<TrafficKind, number>> = {};
    for (const r of records) if (!r.admitted) notAdmitted[r.kind] = (notAdmitted[r.kind] ?? 0) + 1;
    const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, injector.injected[k]])) as Record<FaultKind, number>;
    const answeredAdmitted = records.filter((r) => r.admitted && r.result === 'answer');
    const byFormat: Partial<Record<WireFormat, FormatCounts>> = {};
    for (const f of ['sglang', 'vllm'] as const) {
      const of = records.filter((r) => r.format === f);
      const workers = refs.filter((r) => r.format === f).length;
      if (workers === 0 && of.length === 0) continue;
      byFormat[f] = {
        workers,
        requests: of.length,
        admitted: of.filter((r) => r.admitted).length,
        answered: of.filter((r) => r.result === 'answer').length,
        tokenExact: of.filter((r) => r.exact).length,
        migrated: migratedByFormat[f],
      };
    }
    let vllm: VllmCounts | null = null;
    if (nVllm > 0) {
      const answers = records.filter((r) => r.format === 'vllm' && r.result === 'answer');
      const shapeOf = (r: RequestRecord) => specShapes.get(r.key);
      vllm = {
        answers: answers.length,
        exact: answers.filter((r) => r.exact).length,
        unary: answers.filter((r) => !r.stream).length,
        usageFinal: answers.filter((r) => r.stream && shapeOf(r)?.usage === 'final').length,
        usageContinuous: answers.filter((r) => r.stream && shapeOf(r)?.usage === 'continuous').length,
        usageNone: answers.filter((r) => r.stream && shapeOf(r)?.usage === 'none').length,
        logprobs: answers.filter((r) => (shapeOf(r)?.logprobs ?? null) !== null).length,
        spansLastAttemptOnly: spansLastOnly,
      };
    }
    return {
      options: o,
      k8s: k8sReport,
      clients,
      benchings: { total: benchings.length, explained: benchings.length - benchedByClient.length, aftermathMs, eventStreamInterruptions: workerEvents.interruptions },
      routerConfig: { ...routerConfig, adminToken: '(set, redacted)', traceFile: '(temporary file)', workers: workerUrls },
      workerModes: refs.map((r) => `${r.format === 'vllm' ? 'vllm' : r.incremental ? 'incremental' : 'cumulative'}${r.weights === 'other' ? ' other-weights' : ''}${refusingUrls.includes(r.url) ? ' behind-429-proxy' : ''}`),
      workerFormats: refs.map((r) => r.format),
      byFormat,
      vllm,
      otherWeights: { workers: refs.filter((r) => r.weights === 'other').map((r) => r.url), version: OTHER_WEIGHT_VERSION, answers: otherAnswers, attemptsWithTokens: otherAttemptsWithTokens },
      badRequests: {
        sent: records.filter((r) => r.bad).length,
        refusedInBand: records.filter((r) => r.bad && r.result === 'error' && r.errorInBand && r.errorMessage !== null && vocabRefusal(r.format).test(r.errorMessage)).length,
        refused400: records.filter((r) => r.bad && r.result === 'error' && !r.errorInBand && r.status === 400).length,
        otherEnd: records.filter((r) => r.bad && !(r.result === 'error' && r.errorMessage !== null && vocabRefusal(r.format).test(r.errorMessage))).length,
      },
      sharedHeader: {
        groups: new Set(records.filter((r) => r.group?.kind === 'shared_header').map((r) => r.id)).size,
        requests: records.filter((r) => r.group?.kind === 'shared_header').length,
        answered: records.filter((r) => r.group?.kind === 'shared_header' && r.result === 'answer').length,
        exact: records.filter((r) => r.group?.kind === 'shared_header' && r.exact).length,
      },
      prefixRids: {
        groups: new Set(records.filter((r) => r.group?.kind === 'prefix_rids').map((r) => r.group!.name)).size,
        cancelled: records.filter((r) => r.group?.kind === 'prefix_rids' && r.result === 'cancelled').length,
        survivors: records.filter((r) => r.group?.kind === 'prefix_rids' && r.group.member !== r.group.canceller).length,
        survivorsExact: records.filter((r) => r.group?.kind === 'prefix_rids' && r.group.member !== r.group.canceller && r.exact).length,
        sameWorkerAtCancel: prefixColocated,
      },
      continuation4xx: {
        worker: refusingUrl,
        workers: refusingUrls,
        share: o.continuation4xxShare,
        continuations: proxies.reduce((n, p) => n + p.continuations, 0),
        refused: proxies.reduce((n, p) => n + p.refusals.length, 0),
        clientsGot429,
      },
      firstTokenTimeouts: attemptRowList.filter((a) => a.error_kind === 'first_token_timeout').length,
      benchedByClient: benchedByClient.length,
      benchedByClientDetails: benchedByClient.slice(0, 20),
      elapsedS: Math.round((Date.now() - t0) / 100) / 10,
      requests: records.length,
      admitted: records.filter((r) => r.admitted).length,
      notAdmitted,
      answered: records.filter((r) => r.result === 'answer').length,
      tokenExact: records.filter((r) => r.exact).length,
      admittedAnswered: answeredAdmitted.length,
      admittedExact: answeredAdmitted.filter((r) => r.exact).length,
      failedCleanly: {
        admitted: records.filter((r) => r.admitted && r.result === 'error').length,
        notAdmitted: records.filter((r) => !r.admitted && r.result === 'error').length,
      },
      cancelled: records.filter((r) => r.result === 'cancelled').length,
      migratedRequests: migrated,
      migrations,
      migrationsOngoing: ongoing,
      migrationsNewRequest: migrations - ongoing,
      maxAttempts,
      faults,
      faultsTotal: injector.total,
      faultsNotFired: injector.notFired,
      faultsSkipped: injector.skipped,
      faultsPlanned: plan.length,
      traceRows: { attempts: attemptRows, attemptsStarted, requests: requestRows, refusedAtAdmission: unrecorded },
      inFlightAtEnd: { router: routerInFlight, routerWorkers: routerWorkersInFlight, simWorkers: simInFlight },
      memory: mem,
      errorMessages: countMessages(records),
      violationCount: Object.values(byKind).reduce((a, b) => a + b, 0),
      violationsByKind: byKind,
      violations,
    };
  } finally {
    await stopEvents?.().catch(() => undefined);
    await client?.destroy().catch(() => undefined);
    await Promise.all(proxies.map((p) => p.close().catch(() => undefined)));
    await router?.stop().catch(() => undefined);
    await Promise.all(clusters.map((c) => c.stop().catch(() => undefined)));
    await k8s?.finish().catch(() => undefined);
    await k8s?.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
