// A chaos campaign's run (chaos/campaign.ts): the seeded fault schedule (and the pod schedule
// with `--discovery k8s`) applied over the duration while the seeded traffic and the special
// clients drive the router; meanwhile the router's memory is sampled, its own view of its workers
// polled, and progress logged. Every request is judged against its reference as it ends.

import { Pool } from 'undici';
import { holdUnread, sendRequest, type ClientResult } from './client.ts';
import { adminJson, metric, type CampaignResources, type CampaignRouter, type CampaignWorkers } from './campaign-cluster.ts';
import type { CampaignSettings } from './campaign-config.ts';
import { FaultInjector, sleep } from './faults.ts';
import type { K8sChaos } from './k8s.ts';
import { referenceAnswer, referenceFor, type Reference } from './reference.ts';
import type { MemorySample, RouterProcess } from './router-proc.ts';
import { planFaults, type PlannedFault } from './schedule.ts';
import type { PromptLists } from './sglang-client.ts';
import { planKeepAliveBurst, planNeverReader, planUnit, TRAFFIC_DEFAULTS, type RequestSpec, type TrafficOptions, type VllmShape } from './traffic.ts';
import { judgeClient, type ReportedWindow, type RequestRecord } from './verify.ts';

export type ReportedOut = ReportedWindow & { states: string[] };

/** What the run leaves for the verdict and the report. */
export interface CampaignRun {
  plan: PlannedFault[];
  injector: FaultInjector;
  t0: number;
  tTrafficEnd: number;
  records: RequestRecord[];
  memory: MemorySample[];
  /** The windows in which the router reported a worker anything but healthy. */
  reportedOut: ReportedOut[];
  /** Keep-alive bursts sent. */
  bursts: number;
  /** What each vLLM request asked of its answer (usage, logprobs), for the report. */
  specShapes: Map<string, VllmShape>;
  /** The stream_interval values of the stream_interval clients (none without a token interval). */
  streamIntervalTokens: [number, number] | undefined;
  routerDied: boolean;
}

/** Applies the faults and sends the traffic over the campaign's duration; returns once the traffic has ended. */
export async function driveCampaign(
  o: CampaignSettings,
  workers: CampaignWorkers,
  rt: CampaignRouter,
  res: CampaignResources,
  run: { adminToken: string; log: (line: string) => void; verbose: boolean; progressEveryMs: number },
): Promise<CampaignRun> {
  const { adminToken, log, verbose } = run;
  const { refs, totalWorkers } = workers;
  const { router, url, routerConfig } = rt;
  const durationMs = o.durationS * 1000;
  const plan: PlannedFault[] = planFaults({ seed: o.seed, durationMs, workers: totalWorkers, faultRate: o.faultRate, interTokenTimeoutMs: routerConfig.interTokenTimeoutMs!, formats: refs.map((r) => r.format) });
  log(`seed ${o.seed}: ${plan.length} faults planned over ${o.durationS} s, concurrency ${o.concurrency}`);
  const injector = new FaultInjector(refs);
  // A traffic unit may be a group of up to four requests sent together.
  const client = (res.client = new Pool(url, { connections: o.concurrency * 4 + 8, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 }));

  const memory: MemorySample[] = [];
  const t0 = Date.now();
  const tEnd = t0 + durationMs;
  injector.start(plan, t0);
  if (res.k8s) runPodSchedule(res.k8s, injector, workers, { url, adminToken, seed: o.seed, t0, tEnd });
  const sampler = sampleMemory(router, memory, Math.max(500, Math.min(2000, durationMs / 40)));
  const watcher = watchReportedOut(url, adminToken, verbose ? (line, now) => log(`t=${((now - t0) / 1000).toFixed(1)}s ${line}`) : null);
  if (verbose) injector.onApply = (f, phase) => log(`t=${((Date.now() - t0) / 1000).toFixed(1)}s fault ${f.kind} worker ${f.worker} (${refs[f.worker]!.url}) ${phase}`);
  const traffic = new CampaignTraffic(o, workers, rt, client, tEnd);
  let lastMigrations = 0;
  const progress = setInterval(() => {
    void metric(url, 'baton_migrations_total').then((m) => (lastMigrations = m), () => undefined).finally(() => {
      const records = traffic.records;
      const done = records.length;
      const exact = records.filter((r) => r.exact).length;
      const bad = records.reduce((n, r) => n + r.violations.length, 0);
      log(`t=${Math.round((Date.now() - t0) / 1000)}s requests ${done + traffic.inFlight} (in flight ${traffic.inFlight}) answered ${records.filter((r) => r.result === 'answer').length} exact ${exact} migrations ${lastMigrations} faults ${injector.total} violations ${bad}`);
    });
  }, run.progressEveryMs);

  await traffic.run();
  const tTrafficEnd = Date.now();
  await res.k8s?.finish();
  clearInterval(sampler);
  clearInterval(progress);
  clearInterval(watcher.timer);
  await rt.workerEvents.stop();
  return {
    plan,
    injector,
    t0,
    tTrafficEnd,
    records: traffic.records,
    memory,
    reportedOut: watcher.reportedOut,
    bursts: traffic.bursts,
    specShapes: traffic.specShapes,
    streamIntervalTokens: traffic.streamIntervalTokens,
    routerDied: traffic.routerDied,
  };
}

/** Shares the fault injector's workers with the pod schedule, and runs the pod schedule. */
function runPodSchedule(k8s: K8sChaos, injector: FaultInjector, workers: CampaignWorkers, at: { url: string; adminToken: string; seed: number; t0: number; tEnd: number }): void {
  const { refs, podUrls } = workers;
  const indexOf = (u: string) => refs.findIndex((r) => r.url === u);
  const podIdx = new Set(podUrls.map(indexOf));
  k8s.gate = { hold: (u) => injector.hold(indexOf(u)), release: (u) => injector.release(indexOf(u)), out: () => [...injector.busyWorkers()].filter((i) => podIdx.has(i)).length };
  k8s.health = async (u) => ((await adminJson(at.url, '/workers', at.adminToken)) as { workers: { url: string; health: string }[] }).workers.find((w) => w.url === u)?.health;
  k8s.run(at.seed, at.t0, at.tEnd);
}

/** Samples the router process's memory every `everyMs` while it is alive. */
function sampleMemory(router: RouterProcess, memory: MemorySample[], everyMs: number): NodeJS.Timeout {
  return setInterval(() => {
    if (!router.alive()) return;
    router.memory().then((m) => memory.push(m), () => undefined);
  }, everyMs);
}

/**
 * The router's own view of its workers, polled: when it reports a worker anything but healthy
 * (benched, dead, unhealthy after failed health checks, breaker open), that worker is out for a
 * reason the verifier accepts. The state may have changed any time since the last poll, so an
 * out-window opens at the previous poll and closes at the first healthy one. `changed` hears each
 * worker's change of state (verbose).
 */
function watchReportedOut(url: string, adminToken: string, changed: ((line: string, now: number) => void) | null): { reportedOut: ReportedOut[]; timer: NodeJS.Timeout } {
  const reportedOut: ReportedOut[] = [];
  const openOut = new Map<string, ReportedOut>();
  const seen = new Map<string, string>();
  let lastPoll = Date.now();
  let polling = false;
  const timer = setInterval(() => {
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
        if (changed && seen.get(w.url) !== state) changed(`worker ${w.url} ${seen.get(w.url) ?? '?'} -> ${state} (in flight ${w.in_flight})`, now);
        seen.set(w.url, state);
      }
    }, () => undefined).finally(() => (polling = false));
  }, 100);
  return { reportedOut, timer };
}

/**
 * The campaign's traffic until its end: `concurrency` loops of seeded units, keep-alive bursts and
 * never-reading clients (with the special clients). Each request is sent, read, and judged against
 * its reference (of either weights) into `records`.
 */
class CampaignTraffic {
  readonly records: RequestRecord[] = [];
  readonly specShapes = new Map<string, VllmShape>();
  readonly streamIntervalTokens: [number, number] | undefined;
  inFlight = 0;
  bursts = 0;
  routerDied = false;
  private next = 0;
  private readonly opts: TrafficOptions;
  private readonly sglangClients: boolean;
  private readonly hasOther: boolean;

  constructor(
    private readonly o: CampaignSettings,
    private readonly workers: CampaignWorkers,
    private readonly rt: CampaignRouter,
    private readonly client: Pool,
    private readonly tEnd: number,
  ) {
    this.sglangClients = o.clients && o.format !== 'vllm';
    // stream_interval values whose frames come 0.8–1.5 inter-token deadlines apart at the
    // workers' token interval (none without one).
    const deadline = rt.routerConfig.interTokenTimeoutMs!;
    this.streamIntervalTokens =
      this.sglangClients && o.tokenIntervalMs > 0 ? [Math.ceil((deadline * 0.8) / o.tokenIntervalMs), Math.ceil((deadline * 1.5) / o.tokenIntervalMs)] : undefined;
    this.opts = {
      seed: o.seed,
      nonMigratableShare: o.nonMigratableShare,
      maxNewTokens: o.maxNewTokens,
      cancelShare: o.cancelShare,
      badShare: o.badShare,
      sharedHeaderShare: o.sharedHeaderShare,
      prefixShare: o.prefixShare,
      format: o.format,
      unknownKeyShare: this.sglangClients ? TRAFFIC_DEFAULTS.unknownKeyShare : 0,
      streamIntervalShare: TRAFFIC_DEFAULTS.streamIntervalShare,
      streamIntervalTokens: this.streamIntervalTokens,
      keepAliveBurst: rt.keepAliveBurst,
    };
    this.hasOther = workers.refs.some((r) => r.weights === 'other');
  }

  async run(): Promise<void> {
    await Promise.all([...Array.from({ length: this.o.concurrency }, () => this.loop()), ...(this.o.clients ? [this.keepAlive()] : []), ...(this.sglangClients ? [this.neverReaders()] : [])]);
  }

  /** One request: sent, read, judged against its reference (of either weights). */
  private async one(spec: RequestSpec, send: (spec: RequestSpec, inputs: PromptLists) => Promise<ClientResult>): Promise<void> {
    if (spec.vllm) this.specShapes.set(spec.key, spec.vllm);
    const ref = referenceFor(spec);
    // The other weights' worker is an SGLang worker: only SGLang answers may be of its weights.
    const other = this.hasOther && spec.format === 'sglang' ? referenceAnswer(spec, this.workers.otherSalt) : undefined;
    const inputs: PromptLists = {};
    if (spec.format === 'sglang') for (const key of ['input_token_logprobs', 'input_top_logprobs'] as const) {
      const texts = [ref as Reference, other].filter((x): x is Reference => x?.[key] !== undefined).map((x) => JSON.stringify(x[key]));
      if (texts.length > 0) inputs[key] = texts;
    }
    this.inFlight++;
    const r = await send(spec, inputs);
    this.inFlight--;
    this.records.push(judgeClient(r, ref, other));
  }

  private readonly read = (spec: RequestSpec, inputs: PromptLists) =>
    sendRequest(spec, { dispatcher: this.client, routerUrl: this.rt.url, timeoutMs: 60_000, inputs, cancelAfterChunks: spec.cancelAfterChunks });

  private async loop(): Promise<void> {
    while (Date.now() < this.tEnd && !this.routerDied) {
      // A unit is one request, or a group sent together (shared header, prefix-sharing rids).
      const unit = planUnit(this.opts, this.next++);
      // A stream_interval stream runs for seconds: none is started that would outlast the
      // traffic (the campaign lasts its duration; the unit is skipped, not changed).
      const si = unit[0]!.client === 'stream_interval' ? unit[0]!.decode.max_new_tokens * this.o.tokenIntervalMs * 1.5 : 0;
      if (si > 0 && Date.now() + si > this.tEnd) continue;
      await Promise.all(unit.map((spec) => this.one(spec, this.read)));
      if (!this.rt.router.alive()) this.routerDied = true;
    }
  }

  /** Keep-alive bursts: each 4.8–5.2 s after the previous one ended. */
  private async keepAlive(): Promise<void> {
    for (let k = 0; ; k++) {
      const burst = planKeepAliveBurst(this.opts, k);
      await sleep(burst.gapMs);
      if (Date.now() >= this.tEnd || this.routerDied) return;
      this.bursts++;
      await Promise.all(burst.specs.map((spec) => this.one(spec, this.read)));
    }
  }

  /**
   * Never-reading clients, 3–5 s apart, each holding its unread stream past the longest the
   * router may keep it; none opened too late to be held that long before the traffic ends.
   */
  private async neverReaders(): Promise<void> {
    const holdMs = this.rt.cutMs + 3000;
    const open: Promise<void>[] = [];
    let at = Date.now();
    for (let k = 0; ; k++) {
      const nr = planNeverReader(this.opts, k);
      at += nr.gapMs;
      if (at + holdMs > this.tEnd) break;
      await sleep(at - Date.now());
      if (this.routerDied) break;
      open.push(this.one(nr.spec, (spec) => holdUnread(spec, this.rt.url, holdMs)));
    }
    await Promise.all(open);
  }
}
