// A chaos campaign's cluster (chaos/campaign.ts): the simulated workers (SGLang's cumulative and
// incremental side by side, vLLM's, or both; one on other weights), the 429 proxy before one
// worker of each format, the fake Kubernetes API server with `--discovery k8s`, and the router in
// its own process, started and waited for until it sees every worker healthy and probed.

import { join } from 'node:path';
import type { Pool } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import type { RouterConfig } from '../router/config.ts';
import { DEFAULT_MODEL_PATH, weightsSalt } from '../sim/model.ts';
import { campaignRouterConfig, neverReaderCutMs, OTHER_WEIGHT_VERSION, ROUTER_HAS_CLIENT_WRITE_TIMEOUT, type CampaignSettings } from './campaign-config.ts';
import { sleep, type WorkerRef } from './faults.ts';
import { K8sChaos, K8S_LABELS, K8S_NAMESPACE, K8S_RELIST_MS, K8S_WATCHDOG_MS } from './k8s.ts';
import { ContinuationProxy } from './proxy.ts';
import { startRouterProcess, type RouterProcess } from './router-proc.ts';
import { TRAFFIC_DEFAULTS, type WireFormat } from './traffic.ts';
import type { Weights } from './verify.ts';
import { watchWorkerEvents, type WorkerEventsWatch } from './worker-events.ts';

/** What the campaign started and must stop, whichever phase fails: filled in as each starts. */
export interface CampaignResources {
  clusters: SimCluster[];
  proxies: ContinuationProxy[];
  k8s: K8sChaos | null;
  router: RouterProcess | null;
  client: Pool | null;
  stopEvents: (() => Promise<void>) | null;
}

export type CampaignWorkerRef = WorkerRef & { weights: Weights; format: WireFormat };

/** The campaign's workers as the router reaches them (a proxied worker: by its proxy's URL). */
export interface CampaignWorkers {
  refs: CampaignWorkerRef[];
  nVllm: number;
  /** The 429 proxies' URLs, one per format; refusingUrl: the first. */
  refusingUrls: string[];
  refusingUrl: string | null;
  /** The pods' URLs with `--discovery k8s` (the router finds them; the rest are given to it). */
  podUrls: string[];
  otherSalt: number;
  workerUrls: string[];
  incrementalByUrl: Map<string, boolean>;
  weightsByUrl: Map<string, Weights>;
  formatByUrl: Map<string, WireFormat>;
  totalWorkers: number;
}

/** The router of a campaign, running, with every worker healthy and probed. */
export interface CampaignRouter {
  router: RouterProcess;
  url: string;
  routerConfig: Partial<RouterConfig>;
  /** The longest a never-reading client may stay open (neverReaderCutMs). */
  cutMs: number;
  keepAliveBurst: number;
  maxConcurrentRequests: number;
  workerEvents: WorkerEventsWatch;
}

export async function adminJson(url: string, path: string, token: string): Promise<unknown> {
  const res = await fetch(url + path, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return res.json();
}

export async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(url + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name + ' ') || line.startsWith(name + '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

export async function waitFor(what: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
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

/** Starts the workers, the 429 proxies and (k8s) the fake API server, each into `res` as it starts. */
export async function startWorkers(o: CampaignSettings, res: CampaignResources, log: (line: string) => void, verbose: boolean): Promise<CampaignWorkers> {
  const format = o.format;
  const k8sMode = o.discovery === 'k8s';
  const { clusters, proxies } = res;
  // --- workers: SGLang's cumulative and incremental side by side, vLLM's, or both -------------
  const nVllm = format === 'vllm' ? o.workers : format === 'mixed' ? Math.floor(o.workers / 2) : 0;
  const nSglang = o.workers - nVllm;
  const nInc = Math.floor(nSglang / 2);
  const nCum = nSglang - nInc;
  const refs: CampaignWorkerRef[] = [];
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
  const podUrls = k8sMode ? refs.filter((r) => r.weights === 'default').map((r) => r.url) : [];
  if (k8sMode) {
    const k8s = await K8sChaos.start(refs.filter((r) => podUrls.includes(r.url)).map((r) => ({ url: r.url, host: new URL(r.url).hostname, cluster: r.cluster, local: r.local })), o.seed, verbose ? log : () => undefined);
    res.k8s = k8s;
    log(`fake Kubernetes API server ${k8s.fake.url}: ${podUrls.length} pods in namespace ${K8S_NAMESPACE}, watches faulted on a seeded schedule`);
  }
  return {
    refs,
    nVllm,
    refusingUrls,
    refusingUrl: refusingUrls[0] ?? null,
    podUrls,
    otherSalt: weightsSalt(DEFAULT_MODEL_PATH, OTHER_WEIGHT_VERSION),
    workerUrls: refs.map((r) => r.url),
    incrementalByUrl: new Map(refs.map((r) => [r.url, r.incremental])),
    weightsByUrl: new Map(refs.map((r) => [r.url, r.weights])),
    formatByUrl: new Map(refs.map((r) => [r.url, r.format])),
    totalWorkers: refs.length,
  };
}

/**
 * Starts the router on the campaign's settings (into `res`), waits until it sees every worker
 * healthy and probed as the format it speaks, and starts watching its worker_state events.
 */
export async function startCampaignRouter(
  o: CampaignSettings,
  workers: CampaignWorkers,
  res: CampaignResources,
  run: { dir: string; traceFile: string; adminToken: string; log: (line: string) => void },
): Promise<CampaignRouter> {
  const { dir, traceFile, adminToken, log } = run;
  const { refs, podUrls, workerUrls, formatByUrl, totalWorkers } = workers;
  const k8s = res.k8s;
  // The router's concurrency limit: the most requests the campaign ever has open while the
  // router cuts never-reading clients in time (a loop's unit is at most 4 requests; one
  // keep-alive burst at a time; never-readers 3–5 s apart, each open at most neverReaderCutMs),
  // and a margin. A router that keeps cut clients' slots runs into it: a 503 is a violation.
  const probeConfig = campaignRouterConfig([], '', '');
  const cutMs = neverReaderCutMs({ firstTokenTimeoutMs: probeConfig.firstTokenTimeoutMs! }, o.clientWriteTimeoutMs);
  const keepAliveBurst = TRAFFIC_DEFAULTS.keepAliveBurst;
  const maxConcurrentRequests = o.concurrency * 4 + (o.clients ? keepAliveBurst + Math.ceil(cutMs / 3000) + 1 : 0) + 8;
  const routerConfig = campaignRouterConfig(workerUrls.filter((u) => !podUrls.includes(u)), traceFile, adminToken, { clientWriteTimeoutMs: o.clientWriteTimeoutMs, maxConcurrentRequests });
  let router: RouterProcess;
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
      router = res.router = await startRouterProcess(routerConfig);
    } finally {
      if (prev === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = prev;
    }
  } else {
    router = res.router = await startRouterProcess(routerConfig);
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
  res.stopEvents = () => workerEvents.stop();
  if (o.clients && !ROUTER_HAS_CLIENT_WRITE_TIMEOUT) log(`this router has no --client-write-timeout-ms: never-reading clients are judged against ${o.clientWriteTimeoutMs} ms all the same`);
  log(`router ${url} (pid ${router.pid}); workers ${refs.map((r) => `${r.url} ${r.format === 'vllm' ? 'vllm' : r.incremental ? 'incremental' : 'cumulative'}${r.weights === 'other' ? ` weight_version ${OTHER_WEIGHT_VERSION}` : ''}`).join(', ')}`);
  return { router, url, routerConfig, cutMs, keepAliveBurst, maxConcurrentRequests, workerEvents };
}
