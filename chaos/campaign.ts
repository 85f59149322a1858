// A chaos campaign: simulated workers (half cumulative, half incremental, so that one request's
// attempts can land on workers of both modes) plus one on other weights, one worker behind a
// proxy that answers 429 to a seeded share of continuations, the router in its own process,
// seeded traffic (with bad requests, shared header ids and prefix-rid cancels) and a seeded fault
// schedule over a duration; then the verdict: every answer against the fault-free reference of
// its weights, every failure and refusal against the rules, the trace rows, workers benched by a
// client's mistake, in-flight counts and the router's memory.
//
// Formats: SGLang workers (the default), vLLM workers (`format: 'vllm'`), or both (`mixed`: half
// the workers each, and traffic of both formats, each request to its format's endpoint). The
// worker on other weights is an SGLang worker (vLLM continuations are pinned to the model, not
// yet to the weights: docs/vllm.md); the 429 proxy stands before one worker of each format.

import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import type { RouterConfig } from '../router/config.ts';
import type { AttemptRow, TraceRow } from '../router/trace/row.ts';
import { DEFAULT_MODEL_PATH, weightsSalt } from '../sim/model.ts';
import { sendRequest, type PromptLists } from './client.ts';
import { FaultInjector, sleep, type WorkerRef } from './faults.ts';
import { ContinuationProxy } from './proxy.ts';
import { referenceAnswer, referenceFor, type Reference } from './reference.ts';
import { startRouterProcess, type MemorySample, type RouterProcess } from './router-proc.ts';
import { FAULT_KINDS, planFaults, type FaultKind, type PlannedFault } from './schedule.ts';
import { planUnit, TRAFFIC_DEFAULTS, vocabRefusal, type CampaignFormat, type TrafficKind, type VllmShape, type WireFormat } from './traffic.ts';
import {
  benchedByClientMistake,
  groupRows,
  judgeClient,
  judgeTrace,
  outages,
  sharedWorkerAtCancel,
  splitShared,
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
}

/** The router settings of a campaign: short timers, so that a 20 s campaign sees faults resolve. */
export function campaignRouterConfig(workers: string[], traceFile: string, adminToken: string): Partial<RouterConfig> {
  return {
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
  /** Workers benched, circuit-open or dead right after a client's refusal with nothing else to explain it: must be 0. */
  benchedByClient: number;
  benchedByClientDetails: ClientMistakeBench[];
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
  traceRows: { attempts: number; attemptsStarted: number; requests: number };
  inFlightAtEnd: { router: number; routerWorkers: number; simWorkers: number };
  memory: MemoryVerdict | null;
  /** The clear errors clients got, by message (numbers blanked), most frequent first. */
  errorMessages: [string, number][];
  violationCount: number;
  violationsByKind: Record<string, number>;
  violations: string[];
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
    const key = `${r.format === 'vllm' ? 'vllm ' : ''}${r.admitted ? 'admitted' : 'not admitted'}: ${r.errorMessage.replace(/https?:\/\/[^\s,)]+/g, '<worker>').replace(/\d+/g, 'N').replace(/\[N(, N)*\]/g, '[...]').replace(/~mN~\w+/g, '~mN~<nonce>').slice(0, 160)}`;
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
  };
  const log = opts.log ?? (() => undefined);
  const durationMs = o.durationS * 1000;
  const dir = mkdtempSync(join(tmpdir(), 'baton-chaos-'));
  const traceFile = join(dir, 'traces.jsonl');
  const adminToken = randomBytes(24).toString('hex');
  const clusters: SimCluster[] = [];
  let router: RouterProcess | null = null;
  let client: Pool | null = null;
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
    for (const [n, incremental] of [[nCum, false], [nInc, true]] as const) {
      if (n === 0) continue;
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
    const otherSalt = weightsSalt(DEFAULT_MODEL_PATH, OTHER_WEIGHT_VERSION);
    const workerUrls = refs.map((r) => r.url);
    const incrementalByUrl = new Map(refs.map((r) => [r.url, r.incremental]));
    const weightsByUrl = new Map(refs.map((r) => [r.url, r.weights]));
    const formatByUrl = new Map(refs.map((r) => [r.url, r.format]));
    const totalWorkers = refs.length;

    // --- router ------------------------------------------------------------------------------
    const routerConfig = campaignRouterConfig(workerUrls, traceFile, adminToken);
    router = await startRouterProcess(routerConfig);
    const url = router.url;
    // Probed: streaming mode known, and each worker's format detected as the one it speaks.
    const ready = await waitFor(async () => {
      const body = (await adminJson(url, '/workers', adminToken)) as { workers: { url: string; health: string; incremental: boolean | null; format?: string | null }[] };
      return body.workers.length === totalWorkers && body.workers.every((w) => w.health === 'healthy' && w.incremental !== null && (w.format ?? 'sglang') === formatByUrl.get(w.url));
    }, 20_000);
    if (!ready) throw new Error('the router did not see every worker healthy and probed (as the format it speaks) within 20 s');
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

    const trafficOpts = {
      seed: o.seed,
      nonMigratableShare: o.nonMigratableShare,
      maxNewTokens: o.maxNewTokens,
      cancelShare: o.cancelShare,
      badShare: o.badShare,
      sharedHeaderShare: o.sharedHeaderShare,
      prefixShare: o.prefixShare,
      format: o.format,
    };
    const hasOther = refs.some((r) => r.weights === 'other');
    // What each vLLM request asked of its answer (usage, logprobs), for the report.
    const specShapes = new Map<string, VllmShape>();
    const loop = async () => {
      while (Date.now() < tEnd && !routerDied) {
        // A unit is one request, or a group sent together (shared header, prefix-sharing rids).
        const unit = planUnit(trafficOpts, next++);
        await Promise.all(
          unit.map(async (spec) => {
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
            const r = await sendRequest(spec, { dispatcher: client!, routerUrl: url, timeoutMs: 60_000, inputs, cancelAfterChunks: spec.cancelAfterChunks });
            inFlight--;
            records.push(judgeClient(r, ref, other));
          }),
        );
        if (!router!.alive()) routerDied = true;
      }
    };
    await Promise.all(Array.from({ length: o.concurrency }, loop));
    const tTrafficEnd = Date.now();
    clearInterval(sampler);
    clearInterval(progress);
    clearInterval(watcher);
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
      writeFileSync(join(opts.keepDir, 'faults.json'), JSON.stringify({ plan, windows: injector.windows, t0, reportedOut, refusals429: proxies.flatMap((p) => p.refusals) }, null, 1));
    }
    const rows: TraceRow[] = fileText.split('\n').filter(Boolean).map((l) => JSON.parse(l) as TraceRow);
    const attemptRows = rows.filter((r) => r.kind === 'attempt').length;
    const requestRows = rows.length - attemptRows;
    if (attemptRows !== attemptsStarted) violate('trace', `trace: ${attemptRows} attempt rows but ${attemptsStarted} attempts started`);
    if (requestRows !== records.length) violate('trace', `trace: ${requestRows} request rows for ${records.length} requests`);
    // Secrets: the admin token must not leak into anything the router writes.
    for (const [where, text] of [['router stdout/stderr', router.output()], ['trace file', fileText], ['CSV export', csvExport]] as const) {
      if (text.includes(adminToken)) violate('secret', `the admin token appears in the ${where}`);
    }

    const grouped = groupRows(rows);
    // A worker's time out lasts past its cause: the bench, an opened breaker, and health checks
    // (threshold x interval, each up to its timeout) before a returning worker is taken back.
    const graceMs = routerConfig.circuitOpenMs! + routerConfig.healthFailureThreshold! * (routerConfig.healthIntervalMs! + routerConfig.healthTimeoutMs!) + 1000;
    const attemptRowList = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
    const faultWindows = injector.windows.map((w) => ({ url: refs[w.worker]!.url, start: w.start, end: w.end }));
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
      for (const m of judgeTrace(rec, g, ctx)) violate(m.split(':')[0]!.split(' (')[0]!, `${label}: ${m}`);
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
    const benchedByClient = benchedByClientMistake(attemptRowList, reportedOut, faultWindows, routerConfig.benchMs!, graceMs);
    for (const b of benchedByClient) {
      violate('benched by a client', `benched by a client: ${b.worker} was ${b.states.join('/')} right after ${b.after} ended with ${b.errorKind}, with no fault or blaming failure on it`);
    }

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
      traceRows: { attempts: attemptRows, attemptsStarted, requests: requestRows },
      inFlightAtEnd: { router: routerInFlight, routerWorkers: routerWorkersInFlight, simWorkers: simInFlight },
      memory: mem,
      errorMessages: countMessages(records),
      violationCount: Object.values(byKind).reduce((a, b) => a + b, 0),
      violationsByKind: byKind,
      violations,
    };
  } finally {
    await client?.destroy().catch(() => undefined);
    await Promise.all(proxies.map((p) => p.close().catch(() => undefined)));
    await router?.stop().catch(() => undefined);
    await Promise.all(clusters.map((c) => c.stop().catch(() => undefined)));
    rmSync(dir, { recursive: true, force: true });
  }
}
