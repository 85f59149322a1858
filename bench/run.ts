// The benchmark run: simulated workers, the targets, the load generator, and the order of runs.
// Every workload runs against every target in the same run, interleaved by rounds whose target
// order rotates, so a machine that gets busier or quieter midway shifts all targets alike.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus as osCpus, loadavg, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { Histogram } from './histogram.ts';
import type { LoadgenCommand, RecordsResult, RequestRecord, RunCommand, RunResult } from './loadgen.ts';
import type { GapRecord, MemReply, ProbeCommand, ProbeReply } from './proxy-probe.ts';
import { findNginx } from './nginx.ts';
import { describeMachine, pinProcess, processTree, procAvailable, treeCpuMicros, treeRssBytes } from './proc.ts';
import { BENCH_DIR, ProcessGroup, waitForMessage, type Proc } from './processes.ts';
import { migrationGap, requestIdOf, traceGaps, type BuildPair, type ContinuationConnections, type MemoryRun, type MigrationGap, type RunInfo, type Sample, type SideBySideRun } from './report.ts';
import { alternateBuilds, direct, isBatonRef, ridTag, startBare, startBaton, startBatonOtel, startNginx, targetLabel, type Target, type TargetName } from './targets.ts';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.ts';
import { prepareRef, type RefBuild } from './ref-build.ts';
import { VLLM_WORKLOADS, workloads, type BaseWorkloadName, type Layout, type PinnedName, type WireFormat, type Workload, type WorkloadName } from './workloads.ts';

export interface BenchOptions {
  quick: boolean;
  /** Worker processes of the cumulative cluster (W1, W2, W4). */
  workers: number;
  /** Worker processes of the incremental cluster (W3). */
  w3Workers: number;
  w3Streams: number;
  w3IntervalMs: number;
  /** Rounds of W1 and W2 (every target once per round). */
  rounds: number;
  w3Rounds: number;
  /** One measured run of W1 or W2. */
  durationMs: number;
  /** One measured run of W3. */
  w3DurationMs: number;
  warmupMs: number;
  /** W4 kills with the workers paced at `w4IntervalMs` (the box has headroom). */
  kills: number;
  /** W4 kills with the workers as fast as they go (the box saturated, as in W1). */
  killsSaturated: number;
  /** Token interval of W4's paced part. */
  w4IntervalMs: number;
  /** Time W4 may take at most (both parts), however many kills fit. */
  w4BudgetMs: number;
  targets: TargetName[];
  /** As `--only` names them; `formats` says in which wire formats they run (vLLM has no W3). */
  workloads: BaseWorkloadName[];
  /** SGLang workers and requests (W1-W4), vLLM ones (W1, W2, W4), or both, one after the other. */
  formats: WireFormat[];
  /**
   * Git revisions of other Baton builds to run beside this checkout's (`--compare-ref`), as
   * targets of their own in SGLang's W1 and W2 (not W3, W4 or vLLM's workloads).
   */
  compareRefs: string[];
  /** With other builds: rounds and warm-up of SGLang's W1 and W2 (the other parts keep `rounds`, `warmupMs`). */
  compareRounds: number;
  compareWarmupMs: number;
  nginxPath: string | undefined;
  /**
   * Where the processes run: `shared` (every process on every CPU), `pinned` (the proxy under test
   * on CPU 1, the rest on the others: the `-pinned` workloads), or both, shared first.
   */
  layouts: Layout[];
  /** Rounds of W1 and W2 (either format) on the pinned layout; W3's pinned rounds are `w3Rounds`. */
  pinnedRounds: number;
}

/** The CPUs of the pinned layout, as taskset takes them. */
export interface Pinning {
  proxy: string;
  others: string;
  all: string;
}

/**
 * The pinned layout on this machine: the proxy under test on CPU 1, every other process of the
 * run on the rest; null (with why) where it cannot be had.
 */
export function pinningFor(cpus: number, tasksetWorks: boolean): Pinning | { missing: string } {
  if (cpus < 2) return { missing: `one CPU only` };
  if (!tasksetWorks) return { missing: 'taskset is not available' };
  return { proxy: '1', others: cpus > 2 ? `0,2-${cpus - 1}` : '0', all: `0-${cpus - 1}` };
}

export interface BenchOutput {
  info: RunInfo;
  samples: Sample[];
  /** W4: saturated (token interval 0) first, then paced; empty when W4 did not run. */
  gaps: MigrationGap[];
  /** W3: memory per in-flight stream, from one run per proxy outside the latency rounds. */
  memory: MemoryRun[];
  /** `--compare-ref`: paired runs of Baton and each other build (one load, requests alternating). */
  buildPairs: BuildPair[];
  /** W1, W2 (either format), shared layout: runs shared by Baton, the bare proxy and nginx. */
  sideBySide: SideBySideRun[];
  nginxPresent: boolean;
  /** The pinned layout was asked for but could not run: why. */
  pinnedMissing?: string;
}

type Log = (line: string) => void;

/** The load generator process, driven over IPC. */
class LoadClient {
  private nextId = 0;
  constructor(readonly proc: Proc) {}

  async run(cmd: Omit<RunCommand, 'type' | 'id'>): Promise<RunResult> {
    const id = ++this.nextId;
    this.send({ type: 'run', id, ...cmd });
    const timeout = cmd.durationMs + 120_000;
    return waitForMessage(this.proc, (m) => ((m as RunResult)?.type === 'result' && (m as RunResult).id === id ? (m as RunResult) : undefined), timeout);
  }

  async records(rids: string[]): Promise<RequestRecord[]> {
    const id = ++this.nextId;
    this.send({ type: 'records', id, rids });
    const r = await waitForMessage(this.proc, (m) => ((m as RecordsResult)?.type === 'records' && (m as RecordsResult).id === id ? (m as RecordsResult) : undefined));
    return r.records;
  }

  halt(): void {
    this.send({ type: 'halt' });
  }

  private send(m: LoadgenCommand): void {
    this.proc.child.send(m);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Warm-up of a pinned phase whose targets already served the same workload (shared layout). */
const PINNED_REWARM_MS = 1500;

/** The router's niceness in W4's diagnostic part (the workers and everything else stay at 0). */
const PRIORITY_NICE = -15;

export class BenchRun {
  private readonly group = new ProcessGroup();
  private readonly clusters = new Set<SimCluster>();
  private readonly tempDirs: string[] = [];
  private readonly t0 = Date.now();
  private readonly samples: Sample[] = [];
  private readonly buildPairs: BuildPair[] = [];
  private readonly sideBySide: SideBySideRun[] = [];
  private cleaned: Promise<void> | null = null;
  /** Where `baton_otel` exports its spans (W1, W2), in this process; null when not running. */
  private otlp: OtlpReceiver | null = null;
  /** Other builds of Baton (`--compare-ref`), worktrees removed by cleanup. */
  private readonly refs: RefBuild[] = [];
  /** The pinned layout's CPUs; null when it is not run. */
  private pins: Pinning | null = null;

  constructor(
    private readonly o: BenchOptions,
    private readonly log: Log,
  ) {}

  private say(line: string): void {
    const s = Math.round((Date.now() - this.t0) / 1000);
    this.log(`[${String(s).padStart(4)}s] ${line}`);
  }

  /** Stops every process the bench started; safe to call more than once and from a signal. */
  cleanup(): Promise<void> {
    this.cleaned ??= (async () => {
      await Promise.allSettled([this.group.stopAll(), ...[...this.clusters].map((c) => c.stop())]);
      for (const d of this.tempDirs) rmSync(d, { recursive: true, force: true });
      for (const r of this.refs) {
        r.remove();
        this.say(`removed the worktree of ${r.rev} (${r.dir})`);
      }
    })();
    return this.cleaned;
  }

  /** Last resort on process exit: no awaiting possible. */
  killNow(): void {
    this.group.killAllNow();
    for (const r of this.refs) r.remove();
  }

  async run(): Promise<BenchOutput> {
    try {
      return await this.runAll();
    } finally {
      await this.cleanup();
    }
  }

  private async runAll(): Promise<BenchOutput> {
    const o = this.o;
    const start = loadavg();
    const nginx = o.targets.includes('nginx') ? findNginx(o.nginxPath) : null;
    const machine = describeMachine(nginx?.version ?? null);
    if (!procAvailable()) this.say('warning: /proc is not available; CPU and memory figures will be missing');
    this.say(`machine: ${machine.cores} cores, ${machine.cpu}, ${machine.memoryGiB} GiB, Node ${machine.node}; load average ${start.map((v) => v.toFixed(2)).join(' ')}`);
    if (start[0]! > machine.cores * 0.5) this.say(`warning: the machine is busy (load ${start[0]!.toFixed(1)} on ${machine.cores} cores): throughput and latency will be noisy; CPU per request less so`);
    if (o.targets.includes('nginx') && !nginx) this.say('nginx: absent (not installed); its rows will be missing');
    const targetsRun = o.targets.filter((t) => t !== 'nginx' || nginx !== null);

    const lgProc = this.group.spawnNode('load generator', join(BENCH_DIR, 'loadgen-main.ts'), []);
    await waitForMessage(lgProc, (m) => ((m as { type?: string })?.type === 'ready' ? true : undefined));
    const lg = new LoadClient(lgProc);
    this.say(`load generator: separate process (pid ${lgProc.pid}), undici dispatch, one connection per concurrent stream`);

    let pinnedMissing: string | undefined;
    if (o.layouts.includes('pinned')) {
      const cpus = osCpus().length;
      const p = pinningFor(cpus, cpus >= 2 && pinProcess(process.pid, `0-${cpus - 1}`));
      if ('missing' in p) {
        pinnedMissing = p.missing;
        this.say(`pinned layout: not run (${p.missing})`);
      } else {
        this.pins = p;
        this.say(`pinned layout: the proxy under test on CPU ${p.proxy}; the workers, the load generator, this process and the idle proxies on CPU ${p.others}`);
      }
    }
    const shared = o.layouts.includes('shared');
    const pinned = this.pins !== null;

    const W = workloads({ streams: o.w3Streams, w3IntervalMs: o.w3IntervalMs });
    const gaps: MigrationGap[] = [];
    const memory: MemoryRun[] = [];
    const sglang = o.formats.includes('sglang');
    const vllm = o.formats.includes('vllm');

    const cumulative = sglang ? o.workloads.filter((w) => w === 'W1' || w === 'W2') : [];
    // Other builds of Baton, for SGLang's W1 and W2: a worktree each, its router a target beside
    // this checkout's, right after it in every round's order.
    let sglangTargets = targetsRun;
    if (o.compareRefs.length > 0) {
      if (cumulative.length === 0 || !targetsRun.includes('baton')) this.say("--compare-ref: ignored (other builds run only in SGLang's W1 and W2, beside Baton)");
      else {
        for (const rev of o.compareRefs) {
          const r = prepareRef(rev);
          this.refs.push(r);
          this.say(`${r.name}: ${rev} (${r.sha}) checked out in ${r.dir}, node_modules linked to this checkout's`);
        }
        const at = targetsRun.indexOf('baton') + 1;
        sglangTargets = [...targetsRun.slice(0, at), ...this.refs.map((r) => r.name), ...targetsRun.slice(at)];
      }
    }
    if (sglang && (cumulative.length > 0 || o.workloads.includes('W4'))) {
      const cluster = await this.cluster(o.workers, 0, false, 'sglang');
      const urls = cluster.workers().map((w) => w.url);
      if (cumulative.length > 0) {
        // Baton with OTLP trace export on runs beside Baton in W1 and W2 (the cost of
        // tracing), exporting to a receiver on loopback in this process.
        this.otlp = targetsRun.includes('baton') ? await startOtlpReceiver({ keep: false }) : null;
        const names: TargetName[] = this.otlp ? [...sglangTargets, 'baton_otel_off', 'baton_otel'] : sglangTargets;
        const targets = await this.startTargets(names, urls, nginx?.path, 4096);
        // Two builds compared need the JIT settled and a median over rounds (--compare-ref's own defaults).
        const compare = this.refs.length > 0;
        if (shared) await this.interleave(lg, cluster, targets, cumulative.map((w) => W[w]), compare ? o.compareRounds : o.rounds, o.durationMs, 0, compare ? o.compareWarmupMs : o.warmupMs);
        // The pinned layout: this checkout's targets only (not the tracing pair, not other builds).
        const solo = targets.filter((t) => t.name === 'direct' || t.name === 'bare' || t.name === 'nginx' || t.name === 'baton');
        if (pinned) await this.interleave(lg, cluster, solo, cumulative.map((w) => W[`${w}-pinned` as PinnedName]), o.pinnedRounds, o.durationMs, 0, shared ? PINNED_REWARM_MS : o.warmupMs, 'pinned', targets);
        await Promise.all(targets.map((t) => t.stop()));
        await this.otlp?.close();
        this.otlp = null;
      }
      if (o.workloads.includes('W4')) {
        // Twice: at W1's pace the workers take every cycle the two cores have, and how soon the
        // router reacts is mostly how soon the scheduler runs it; paced, the box has headroom and
        // the gap is the router's own.
        const total = o.killsSaturated + o.kills;
        if (o.killsSaturated > 0) gaps.push(await this.migrationGap(lg, cluster, W.W4, 0, o.killsSaturated, (o.w4BudgetMs * o.killsSaturated) / total));
        if (o.kills > 0) gaps.push(await this.migrationGap(lg, cluster, W.W4, o.w4IntervalMs, o.kills, (o.w4BudgetMs * o.kills) / total));
        // A diagnostic, shown and not judged: the saturated part again with the router ahead of
        // the workers in the scheduler's queue. What it takes off the saturated p99 is the time the
        // router was runnable and not running (the scheduler's share of that figure).
        if (o.killsSaturated > 0) {
          const g = await this.migrationGap(lg, cluster, W.W4, 0, o.killsSaturated, (o.w4BudgetMs * o.killsSaturated) / total, PRIORITY_NICE);
          if (g) gaps.push(g);
        }
      }
      await this.stopCluster(cluster);
    }
    // vLLM: W1, W2 and W4 again on simulated vLLM workers, vLLM's requests.
    const vCumulative = vllm ? o.workloads.flatMap((w) => (w === 'W1' || w === 'W2' ? [VLLM_WORKLOADS[w]!] : [])) : [];
    if (vllm && (vCumulative.length > 0 || o.workloads.includes('W4'))) {
      const cluster = await this.cluster(o.workers, 0, false, 'vllm');
      const urls = cluster.workers().map((w) => w.url);
      if (vCumulative.length > 0) {
        const targets = await this.startTargets(targetsRun, urls, nginx?.path, 4096);
        if (shared) await this.interleave(lg, cluster, targets, vCumulative.map((w) => W[w]), o.rounds, o.durationMs, 0);
        if (pinned) await this.interleave(lg, cluster, targets, vCumulative.map((w) => W[`${w}-pinned` as PinnedName]), o.pinnedRounds, o.durationMs, 0, shared ? PINNED_REWARM_MS : o.warmupMs, 'pinned');
        await Promise.all(targets.map((t) => t.stop()));
      }
      if (o.workloads.includes('W4')) {
        const w = W['W4-vllm'];
        const total = o.killsSaturated + o.kills;
        if (o.killsSaturated > 0) gaps.push(await this.migrationGap(lg, cluster, w, 0, o.killsSaturated, (o.w4BudgetMs * o.killsSaturated) / total));
        if (o.kills > 0) gaps.push(await this.migrationGap(lg, cluster, w, o.w4IntervalMs, o.kills, (o.w4BudgetMs * o.kills) / total));
      }
      await this.stopCluster(cluster);
    }
    if (vllm && !sglang && o.workloads.includes('W3')) this.say('W3: not run (no vLLM W3; it runs with --format sglang or both)');
    if (sglang && o.workloads.includes('W3')) {
      const cluster = await this.cluster(o.w3Workers, o.w3IntervalMs, true, 'sglang');
      const urls = cluster.workers().map((w) => w.url);
      const targets = await this.startTargets(targetsRun, urls, nginx?.path, o.w3Streams * 2 + 1024);
      // Streams open over a few seconds, not at once: W3 measures streaming, not a connection storm
      // (a burst of thousands of connects overflows a busy Node server's accept queue of 511).
      const rampMs = Math.min(3000, o.w3DurationMs / 3);
      if (shared) await this.interleave(lg, cluster, targets, [W.W3], o.w3Rounds, o.w3DurationMs, rampMs);
      // W3's latency verdict comes from the pinned layout: on the shared one, 2,000 streams fill
      // both CPUs and every target, direct included, measures the scheduler.
      if (pinned) await this.interleave(lg, cluster, targets, [W['W3-pinned']], o.w3Rounds, o.w3DurationMs, rampMs, o.warmupMs, 'pinned');
      for (const t of targets) {
        await this.warmW3(lg, t, W.W3, rampMs);
        const m = await this.memoryRun(lg, t, W.W3, rampMs);
        if (m) memory.push(m);
      }
      await Promise.all(targets.map((t) => t.stop()));
      await this.stopCluster(cluster);
    }

    const info: RunInfo = {
      date: new Date().toISOString(),
      mode: o.quick ? 'quick' : 'full',
      machine,
      loadAverage: { start, end: loadavg() },
      settings: {
        'workers (W1 W2 W4)': o.workers,
        'workers (W3)': o.w3Workers,
        'rounds (W1 W2)': this.refs.length > 0 && o.compareRounds !== o.rounds ? `${o.compareRounds} (SGLang, beside other builds), ${o.rounds} (vLLM)` : o.rounds,
        'rounds (W3)': o.w3Rounds,
        'run (W1 W2)': `${o.durationMs} ms`,
        'run (W3)': `${o.w3DurationMs} ms of new streams, then they finish`,
        'W3 streams': o.w3Streams,
        'W3 token interval': `${o.w3IntervalMs} ms`,
        'warm-up per target and workload': this.refs.length > 0 && o.compareWarmupMs !== o.warmupMs ? `${o.compareWarmupMs} ms (SGLang W1 W2), ${o.warmupMs} ms (the rest)` : `${o.warmupMs} ms`,
        'W4 paced token interval': `${o.w4IntervalMs} ms`,
        'load generator': 'separate process, undici',
        'nginx worker_processes': 1,
        formats: o.formats.join(' + '),
        layouts: [shared ? 'shared' : null, pinned ? `pinned (proxy on CPU ${this.pins!.proxy}, the rest on CPU ${this.pins!.others}; ${o.pinnedRounds} rounds of W1 W2, ${o.w3Rounds} of W3)` : null, pinnedMissing ? `pinned not run: ${pinnedMissing}` : null].filter(Boolean).join(', '),
        ...(this.refs.length > 0 ? { 'other Baton builds (SGLang W1 W2)': this.refs.map((r) => `${r.name.slice('baton@'.length)} (${r.rev})`).join(', ') } : {}),
      },
      workloadTitles: Object.fromEntries(Object.values(W).map((w) => [w.name, w.title])) as Record<WorkloadName, string>,
      compareRefs: this.refs.map((r) => ({ target: r.name, rev: r.rev, sha: r.sha })),
    };
    return { info, samples: this.samples, gaps, memory, buildPairs: this.buildPairs, sideBySide: this.sideBySide, nginxPresent: nginx !== null, pinnedMissing };
  }

  private async cluster(workers: number, tokenIntervalMs: number, incremental: boolean, format: WireFormat): Promise<SimCluster> {
    const c = await startCluster(format === 'vllm' ? { workers, port: 0, tokenIntervalMs, format } : { workers, port: 0, tokenIntervalMs, incremental });
    this.clusters.add(c);
    const chunks = format === 'vllm' ? 'vLLM, delta chunks' : `SGLang, ${incremental ? 'incremental' : 'cumulative'} chunks`;
    this.say(`${workers} simulated workers (${chunks}, token interval ${tokenIntervalMs} ms): ${c.workers().map((w) => w.pid).join(', ')}`);
    return c;
  }

  private async stopCluster(c: SimCluster): Promise<void> {
    await c.stop();
    this.clusters.delete(c);
  }

  private async startTargets(names: TargetName[], urls: string[], nginxPath: string | undefined, connections: number): Promise<Target[]> {
    const out: Target[] = [];
    for (const name of names) {
      if (name === 'direct') out.push(direct(urls));
      else if (name === 'bare') out.push(await startBare(this.group, urls));
      else if (name === 'nginx') out.push(await startNginx(this.group, nginxPath!, urls, connections));
      else if (name === 'baton_otel') out.push(await startBatonOtel(this.group, urls, this.otlp!.url));
      else if (name === 'baton_otel_off') out.push({ ...(await startBaton(this.group, urls)), name: 'baton_otel_off' });
      else if (isBatonRef(name)) {
        const ref = this.refs.find((r) => r.name === name);
        if (!ref) throw new Error(`no worktree for ${name}`);
        out.push({ ...(await startBaton(this.group, urls, { bin: ref.bin })), name });
      } else out.push(await startBaton(this.group, urls));
      const t = out[out.length - 1]!;
      this.say(`target ${targetLabel(name)}: ${t.urls.length === 1 ? t.urls[0] : `${t.urls.length} workers`}${t.proc ? ` (pid ${t.proc.pid})` : ''}`);
    }
    return out;
  }

  /**
   * Warm every target up, then rounds of every workload × target, the target order rotating. On
   * the pinned layout each target's runs (its warm-up too) have CPU 1 to themselves.
   */
  private async interleave(lg: LoadClient, cluster: SimCluster, targets: Target[], ws: Workload[], rounds: number, durationMs: number, rampMs: number, warmupMs = this.o.warmupMs, layout: Layout = 'shared', bystanders: Target[] = []): Promise<void> {
    // Proxies that take no part in these rounds (idle) are kept off the proxy's CPU too.
    const everyone = [...targets, ...bystanders.filter((b) => !targets.includes(b))];
    const place = (t: Target) => (layout === 'pinned' ? this.pinFor(t, everyone, cluster, lg) : undefined);
    try {
      await this.rounds(lg, cluster, targets, ws, rounds, durationMs, rampMs, warmupMs, place);
    } finally {
      if (layout === 'pinned') this.unpin(everyone, cluster, lg);
    }
  }

  /** The pinned layout for a run of `t`: `t` on the proxy's CPU, every other process on the others. */
  private pinFor(t: Target, all: Target[], cluster: SimCluster, lg: LoadClient): void {
    const p = this.pins!;
    const rest = [...cluster.workers().filter((w) => w.alive && w.pid).map((w) => w.pid), lg.proc.pid, process.pid];
    for (const x of all) if (x !== t && x.proc) rest.push(...processTree(x.proc.pid));
    for (const pid of rest) pinProcess(pid, p.others);
    if (t.proc) for (const pid of processTree(t.proc.pid)) pinProcess(pid, p.proxy);
  }

  /** Every process of the run back on every CPU. */
  private unpin(all: Target[], cluster: SimCluster, lg: LoadClient): void {
    const p = this.pins!;
    const pids = [...cluster.workers().filter((w) => w.alive && w.pid).map((w) => w.pid), lg.proc.pid, process.pid];
    for (const x of all) if (x.proc) pids.push(...processTree(x.proc.pid));
    for (const pid of pids) pinProcess(pid, p.all);
  }

  private async rounds(lg: LoadClient, cluster: SimCluster, targets: Target[], ws: Workload[], rounds: number, durationMs: number, rampMs: number, warmupMs: number, place: (t: Target) => void): Promise<void> {
    for (const w of ws) {
      // Warm-up: the JIT and the connection pools of every target.
      for (const t of targets) {
        place(t);
        if (w.name === 'W3' || w.name === 'W3-pinned') await this.warmW3(lg, t, w, rampMs);
        else await lg.run({ urls: t.urls, workload: w, durationMs: warmupMs, rampMs: 0, ridPrefix: `warm-${ridTag(t.name)}`, record: false });
      }
    }
    this.say(`warmed up ${targets.map((t) => t.name).join(', ')} on ${ws.map((w) => w.name).join(', ')}`);
    // Tracing's cost: Baton with export on is not a target of its own in the rotation;
    // each round it shares one run with Baton (export off), so both see the same machine.
    const otelOn = targets.find((t) => t.name === 'baton_otel') ?? null;
    const otelOff = targets.find((t) => t.name === 'baton_otel_off') ?? null;
    const rotation = targets.filter((t) => t.name !== 'baton_otel' && t.name !== 'baton_otel_off');
    for (let round = 1; round <= rounds; round++) {
      for (const w of ws) {
        if (otelOn && otelOff) {
          for (const s of await this.measurePair(lg, otelOff, otelOn, w, round, durationMs, rampMs)) {
            this.samples.push(s);
            this.progress(s, rounds);
          }
        }
        const order = alternateBuilds(rotation.map((_, i) => rotation[(i + round - 1) % rotation.length]!), round);
        for (const t of order) {
          place(t);
          // W3: open (again) every stream's connection just before the run: kept-alive
          // connections idle through the other targets' runs expire (65 s here), and thousands
          // of connects at once would make the run measure the accept queue instead.
          if (w.name === 'W3' || w.name === 'W3-pinned') await this.warmW3(lg, t, w, rampMs);
          const s = await this.measure(lg, cluster, t, w, round, durationMs, rampMs);
          this.samples.push(s);
          this.progress(s, rounds);
        }
        // Baton, the bare proxy and nginx: also one run shared among them, request by request
        // (shared layout; W3 measures latency, not CPU per request).
        const trio = (['baton', 'bare', 'nginx'] as const).map((n) => rotation.find((t) => t.name === n)).filter((t): t is Target => t !== undefined && t.proc !== undefined && t.proc !== null);
        if (!w.name.endsWith('-pinned') && !w.name.startsWith('W3') && trio.length > 1 && trio[0]!.name === 'baton') await this.measureSideBySide(lg, trio, w, round, durationMs, rampMs);
        // Other builds (--compare-ref): also one run shared with Baton, request by request.
        const baton = rotation.find((t) => t.name === 'baton');
        if (baton) for (const other of rotation.filter((t) => isBatonRef(t.name))) await this.measureBuildPair(lg, baton, other, w, round, durationMs, rampMs);
      }
    }
  }

  /**
   * One run whose requests alternate between Baton, the bare proxy and nginx, the workload's
   * streams shared among them: each serves the same rate at the same moments, so their CPU per
   * request compares what each does per request, not how many frames a read brings at the rate
   * each reaches alone. The order rotates by round, so no one always gets the first request.
   */
  private async measureSideBySide(lg: LoadClient, targets: Target[], w: Workload, round: number, durationMs: number, rampMs: number): Promise<void> {
    const order = targets.map((_, i) => targets[(i + round - 1) % targets.length]!);
    const cpu0 = order.map((t) => treeCpuMicros(t.proc!.pid));
    // Each target gets the workload's own streams (W1: 64 each), as when it runs alone: a proxy's
    // CPU per request depends on how many requests it holds at once (fewer, and each turn of its
    // event loop carries fewer to share the turn's fixed cost).
    const shared: Workload = { ...w, concurrency: w.concurrency * order.length };
    const r = await lg.run({ urls: order.map((t) => t.urls[0]!), workload: shared, durationMs, rampMs, ridPrefix: `${w.name}-side-${round}`, record: false });
    const run: SideBySideRun = {
      workload: w.name,
      round,
      targets: order.map((t, i) => {
        const c = r.byUrl?.[i];
        return { target: t.name, cpuUs: treeCpuMicros(t.proc!.pid) - cpu0[i]!, ok: c?.ok ?? 0, errors: (c?.requests ?? 0) - (c?.ok ?? 0) };
      }),
    };
    this.sideBySide.push(run);
    const us = (q: SideBySideRun['targets'][number]) => (q.ok > 0 ? Math.round(q.cpuUs / q.ok) : NaN);
    this.say(`${w.name} round ${round} side by side: ${run.targets.map((q) => `${targetLabel(q.target)} ${us(q)} µs/req (${q.ok} requests${q.errors ? `, ${q.errors} errors` : ''})`).join(', ')}`);
  }

  /**
   * `--compare-ref`: one run whose requests alternate between this checkout's Baton and another
   * build, so both see the same load at the same moments; each one's CPU per request from /proc.
   * Each serves half the run's streams (W1: 32 each), the same for both.
   */
  private async measureBuildPair(lg: LoadClient, baton: Target, other: Target, w: Workload, round: number, durationMs: number, rampMs: number): Promise<void> {
    const procs = [baton.proc!, other.proc!];
    // The order of the two alternates too, so neither always gets the run's first request.
    const flip = round % 2 === 0;
    const urls = flip ? [other.urls[0]!, baton.urls[0]!] : [baton.urls[0]!, other.urls[0]!];
    const cpu0 = procs.map((p) => treeCpuMicros(p.pid));
    const r = await lg.run({ urls, workload: w, durationMs, rampMs, ridPrefix: `${w.name}-pair${ridTag(other.name)}-${round}`, record: false });
    const cpu = procs.map((p, i) => treeCpuMicros(p.pid) - cpu0[i]!);
    const counts = r.byUrl ?? [];
    const [mine, theirs] = flip ? [counts[1], counts[0]] : [counts[0], counts[1]];
    const pair: BuildPair = {
      workload: w.name,
      round,
      ref: other.name as BuildPair['ref'],
      baton: { cpuUs: cpu[0]!, ok: mine?.ok ?? 0, errors: (mine?.requests ?? 0) - (mine?.ok ?? 0) },
      other: { cpuUs: cpu[1]!, ok: theirs?.ok ?? 0, errors: (theirs?.requests ?? 0) - (theirs?.ok ?? 0) },
    };
    this.buildPairs.push(pair);
    const us = (x: { cpuUs: number; ok: number }) => (x.ok > 0 ? Math.round(x.cpuUs / x.ok) : NaN);
    this.say(
      `${w.name} round ${round} paired: Baton ${us(pair.baton)} µs/req, ${targetLabel(other.name)} ${us(pair.other)} µs/req ` +
        `(${(us(pair.baton) / us(pair.other)).toFixed(3)}×; ${pair.baton.ok} + ${pair.other.ok} requests, errors ${pair.baton.errors + pair.other.errors})`,
    );
  }

  /**
   * One run whose requests alternate between Baton with export off and Baton with export on:
   * the same load, the same moment, so the CPU per request of the two processes compares the
   * export and nothing else (on a shared machine, runs minutes apart differ by more than 10 %).
   * Latency histograms are of both together; each sample has its own counts and CPU.
   */
  private async measurePair(lg: LoadClient, off: Target, on: Target, w: Workload, round: number, durationMs: number, rampMs: number): Promise<Sample[]> {
    const otlp = this.otlp;
    const procs = [off.proc!, on.proc!];
    const cpu0 = procs.map((p) => treeCpuMicros(p.pid));
    const spans0 = otlp?.stats.spans ?? 0;
    const r = await lg.run({ urls: [off.urls[0]!, on.urls[0]!], workload: w, durationMs, rampMs, ridPrefix: `${w.name}-pair-${round}`, record: false });
    const spans = otlp ? otlp.stats.spans - spans0 : null;
    return (['baton_otel_off', 'baton_otel'] as const).map((target, i) => {
      const c = r.byUrl?.[i] ?? { requests: r.requests / 2, ok: r.ok / 2, tokens: r.tokens / 2, bytes: r.bytes / 2 };
      return {
        workload: w.name,
        target,
        round,
        wallMs: r.wallMs,
        requests: c.requests,
        ok: c.ok,
        errors: c.requests - c.ok,
        errorSamples: r.errorSamples,
        tokens: c.tokens,
        bytes: c.bytes,
        chunks: r.bytes > 0 ? Math.round((r.chunks * c.bytes) / r.bytes) : 0,
        ttft: r.ttft,
        gap: r.gap,
        proxyCpuUs: treeCpuMicros(procs[i]!.pid) - cpu0[i]!,
        rssIdleBytes: null,
        rssPeakBytes: null,
        concurrency: w.concurrency,
        tokenIntervalMs: w.tokenIntervalMs,
        workersCpuUs: 0,
        loadgenCpuUs: r.cpuUs / 2,
        otlpSpans: target === 'baton_otel' ? spans : null,
      };
    });
  }

  /** Every W3 stream once, with short answers (no waiting out long streams), at the measured pace. */
  private async warmW3(lg: LoadClient, t: Target, w: Workload, rampMs: number): Promise<void> {
    const warm = { ...w, newTokens: 16 };
    await lg.run({ urls: t.urls, workload: warm, durationMs: Math.max(this.o.warmupMs, rampMs + 1000), rampMs, ridPrefix: `warm-${ridTag(t.name)}`, record: false });
  }

  private progress(s: Sample, rounds: number): void {
    const sec = s.wallMs / 1000;
    const ttft = Histogram.from(s.ttft);
    const gap = Histogram.from(s.gap);
    const cpu = s.proxyCpuUs === null || s.ok === 0 ? '' : `  CPU ${Math.round(s.proxyCpuUs / s.ok)} µs/req`;
    const mem = s.rssPeakBytes !== null && s.rssIdleBytes !== null ? `  +${Math.round((s.rssPeakBytes - s.rssIdleBytes) / 1024 / s.concurrency)} KiB/stream` : '';
    this.say(
      `${s.workload} round ${s.round}/${rounds} ${targetLabel(s.target).padEnd(15)} ${Math.round(s.ok / sec)} req/s  ${Math.round(s.tokens / sec)} tok/s${cpu}` +
        `  TTFT p50 ${(ttft.percentile(50) / 1000).toFixed(2)} ms  gap p99 ${(gap.percentile(99) / 1000).toFixed(2)} ms${mem}  errors ${s.errors}` +
        `${s.errorSamples.length ? ` (${s.errorSamples[0]})` : ''}` +
        `${s.otlpSpans != null && s.ok > 0 ? `  spans exported ${(s.otlpSpans / s.ok).toFixed(2)}/req` : ''}`,
    );
  }

  private async measure(lg: LoadClient, cluster: SimCluster, t: Target, w: Workload, round: number, durationMs: number, rampMs: number): Promise<Sample> {
    const pid = t.proc?.pid ?? null;
    const workerPids = cluster.workers().map((x) => x.pid);
    const workersCpu = () => workerPids.reduce((n, p) => n + treeCpuMicros(p), 0);
    const rssIdle = pid === null ? null : treeRssBytes(pid);
    let rssPeak = rssIdle;
    const sampler = pid === null ? null : setInterval(() => (rssPeak = Math.max(rssPeak ?? 0, treeRssBytes(pid))), 100);
    const cpu0 = pid === null ? null : treeCpuMicros(pid);
    const w0 = workersCpu();
    let r: RunResult;
    try {
      r = await lg.run({ urls: t.urls, workload: w, durationMs, rampMs, ridPrefix: `${w.name}-${ridTag(t.name)}-${round}`, record: false });
    } finally {
      if (sampler) clearInterval(sampler);
    }
    const cpu1 = pid === null ? null : treeCpuMicros(pid);
    return {
      workload: w.name,
      target: t.name,
      round,
      wallMs: r.wallMs,
      requests: r.requests,
      ok: r.ok,
      errors: r.errors,
      errorSamples: r.errorSamples,
      tokens: r.tokens,
      bytes: r.bytes,
      chunks: r.chunks,
      ttft: r.ttft,
      gap: r.gap,
      proxyCpuUs: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0,
      rssIdleBytes: rssIdle,
      rssPeakBytes: rssPeak,
      concurrency: w.concurrency,
      tokenIntervalMs: w.tokenIntervalMs,
      workersCpuUs: workersCpu() - w0,
      loadgenCpuUs: r.cpuUs,
    };
  }

  /**
   * W3's memory per in-flight stream, in a run of its own (a full GC would show in the latency
   * figures): the proxy's memory with no stream, then once every stream has started and none has
   * ended (a stream lasts newTokens × the token interval, longer than the ramp). RSS for every
   * proxy; for the Node proxies also what they retain after a full GC, since their RSS holds
   * garbage not yet collected (up to the young generation's size, tens of MB).
   */
  private async memoryRun(lg: LoadClient, t: Target, w: Workload, rampMs: number): Promise<MemoryRun | null> {
    const proc = t.proc;
    if (!proc) return null;
    const node = t.name !== 'nginx';
    const ask = () => (node ? this.askMem(proc) : Promise.resolve(null));
    const idle = await ask();
    // A Node proxy's RSS is read right after its GC (the probe's reply), nginx's from /proc.
    const rssIdle = idle?.rss ?? treeRssBytes(proc.pid);
    const settleMs = 1000;
    if (w.newTokens * w.tokenIntervalMs < rampMs + settleMs) this.say(`warning: W3 streams end before the memory reading; memory per stream will under-report`);
    const load = lg.run({ urls: t.urls, workload: w, durationMs: rampMs + settleMs / 2, rampMs, ridPrefix: `mem-${ridTag(t.name)}`, record: false });
    await sleep(rampMs + settleMs);
    const steady = await ask();
    const rssSteady = steady?.rss ?? treeRssBytes(proc.pid);
    await load;
    const kib = (a: number, b: number) => (a - b) / 1024 / w.concurrency;
    const m: MemoryRun = {
      target: t.name,
      streams: w.concurrency,
      rssKiBPerStream: kib(rssSteady, rssIdle),
      retainedKiBPerStream: idle && steady && idle.gc ? kib(steady.retained, idle.retained) : null,
    };
    this.say(
      `W3 memory ${targetLabel(t.name)}: RSS +${m.rssKiBPerStream!.toFixed(1)} KiB/stream` +
        (m.retainedKiBPerStream === null ? '' : `, retained after GC +${m.retainedKiBPerStream.toFixed(1)} KiB/stream`),
    );
    return m;
  }

  private askMem(proc: Proc): Promise<MemReply> {
    const m: ProbeCommand = { type: 'mem' };
    proc.child.send(m);
    return waitForMessage(proc, (r) => ((r as MemReply)?.type === 'mem' ? (r as MemReply) : undefined));
  }

  /**
   * W4: W1's load on Baton while workers are killed one after another (each restarted and back
   * in the pool before the next kill). Baton runs with a short health interval and bench time so
   * a restarted worker rejoins within a few hundred ms; the probe inside it times each migration.
   * `intervalMs` > 0 paces the workers (the `slow` fault, applied again after each restart).
   */
  private async migrationGap(lg: LoadClient, cluster: SimCluster, w: Workload, intervalMs: number, maxKills: number, budgetMs: number): Promise<MigrationGap>;
  private async migrationGap(lg: LoadClient, cluster: SimCluster, w: Workload, intervalMs: number, maxKills: number, budgetMs: number, nice: number): Promise<MigrationGap | null>;
  private async migrationGap(lg: LoadClient, cluster: SimCluster, w: Workload, intervalMs: number, maxKills: number, budgetMs: number, nice?: number): Promise<MigrationGap | null> {
    const o = this.o;
    const urls = cluster.workers().map((x) => x.url);
    const pace = async (i: number) => {
      if (intervalMs > 0) await cluster.fault(i, { kind: 'slow', intervalMs });
    };
    for (let i = 0; i < urls.length; i++) await pace(i);
    const dir = mkdtempSync(join(tmpdir(), 'baton-bench-w4-'));
    this.tempDirs.push(dir);
    const traceFile = join(dir, 'traces.jsonl');
    const baton = await startBaton(this.group, urls, {
      flags: ['--health-interval-ms', '100', '--bench-ms', '200', '--trace-file', traceFile, '--trace-ring-size', '1000'],
      env: { BATON_CIRCUIT_OPEN_MS: '200' },
    });
    // Paced, the router gets CPU 0 to itself and everything else of the run (workers, load
    // generator, this process) the other CPUs: as deployed, where the workers are on GPU hosts of
    // their own. On a shared box, how soon the router reacts is otherwise how soon the scheduler
    // gives it a CPU: a time slice of another process (a few ms) lands in the tail.
    if (nice !== undefined) {
      try {
        setPriority(baton.proc!.pid, nice);
      } catch (err) {
        // Raising a priority takes root (or CAP_SYS_NICE): without it the diagnostic is left out.
        this.say(`W4 (router at nice ${nice}): not run: ${(err as Error).message}`);
        await baton.stop();
        return null;
      }
    }
    const cpus = osCpus().length;
    const others = cpus > 2 ? `1-${cpus - 1}` : '1';
    const everyone = `0-${cpus - 1}`;
    const pinOthers = (cpuList: string) => {
      for (const w of cluster.workers()) if (w.alive && w.pid) pinProcess(w.pid, cpuList);
      pinProcess(lg.proc.pid, cpuList);
      pinProcess(process.pid, cpuList);
    };
    const ownCpu = intervalMs > 0 && cpus >= 2 && pinProcess(baton.proc!.pid, '0');
    if (ownCpu) pinOthers(others);
    const how = (w.format === 'vllm' ? 'vLLM, ' : '') + (intervalMs > 0 ? `workers paced at ${intervalMs} ms a token` : 'workers as fast as they go') + (ownCpu ? ', router on CPU 0, the rest on the others' : '') + (nice !== undefined ? `, router at nice ${nice}` : '');
    this.say(`W4 (${how}): Baton with fast recovery settings (pid ${baton.proc!.pid}), ${maxKills} kills or ${Math.round(budgetMs / 1000)} s, whichever comes first`);
    await lg.run({ urls: baton.urls, workload: w, durationMs: o.warmupMs, rampMs: 0, ridPrefix: `warm-${w.name}`, record: false });

    const probe = baton.proc!;
    const send = (m: ProbeCommand) => probe.child.send(m);
    send({ type: 'probe', on: true });
    const deadline = Date.now() + budgetMs;
    const load = lg.run({ urls: baton.urls, workload: w, durationMs: budgetMs + 60_000, rampMs: 0, ridPrefix: `${w.name}-${intervalMs}${nice !== undefined ? `-nice${-nice}` : ''}`, record: true });
    let kills = 0;
    try {
      await sleep(300);
      while (kills < maxKills && Date.now() < deadline - 1000) {
        const i = kills % urls.length;
        await cluster.kill(i);
        kills++;
        await cluster.restart(i);
        if (ownCpu) pinProcess(cluster.workers()[i]!.pid, others);
        await pace(i);
        await this.waitHealthy(baton.urls[0]!, urls[i]!);
        // Let the restarted worker take its share of streams before the next kill.
        await sleep(intervalMs > 0 ? 300 : 100);
        if (kills % 10 === 0 || kills === maxKills) this.say(`W4 (${how}): ${kills} kills`);
      }
    } finally {
      lg.halt();
      if (ownCpu) pinOthers(everyone); // the measurement is over, even when it failed
    }
    const result = await load;
    send({ type: 'probe', on: false });
    const reply = await waitForMessage(probe, (m) => ((m as ProbeReply)?.type === 'probe-records' ? (m as ProbeReply) : undefined));
    const records: GapRecord[] = reply.records;
    if (process.env.BENCH_TEE_DIR) writeFileSync(join(process.env.BENCH_TEE_DIR, `w4-${w.format}-${how.replace(/\W+/g, '_')}-records.json`), JSON.stringify(records));
    const bases = [...new Set(records.map((r) => requestIdOf(r.rid)))];
    const client = new Map((await lg.records(bases)).map((r) => [r.rid, { ok: r.ok, maxWaitUs: r.maxWaitUs }]));
    const connections = await continuationConnections(baton.urls[0]!);
    await baton.stop();
    let traceText = '';
    try {
      traceText = readFileSync(traceFile, 'utf8');
    } catch {
      // No trace file: the cross-check is left out.
    }
    if (intervalMs > 0) for (let i = 0; i < urls.length; i++) await cluster.fault(i, { kind: 'clear' });
    const g = migrationGap({
      format: w.format,
      tokenIntervalMs: intervalMs,
      ownCpu,
      nice: nice ?? null,
      kills,
      records,
      client,
      traceGapsMs: traceText ? traceGaps(traceText) : null,
      requests: result.requests,
      ok: result.ok,
      errors: result.errors,
      errorSamples: result.errorSamples,
      connections,
    });
    this.say(
      `W4 (${how}): ${kills} kills, ${g.continuations} continuations; failure → continuation p50 ${(g.gapUs.p50 / 1000).toFixed(2)} ms p99 ${(g.gapUs.p99 / 1000).toFixed(2)} ms; ` +
        `stall − survivor TTFT p99 ${(g.stallMinusTtftUs.p99 / 1000).toFixed(2)} ms; client errors ${g.errors}`,
    );
    return g;
  }

  /** Until Baton lists `worker` as healthy again (it rejoins after its bench time and a health check). */
  private async waitHealthy(router: string, worker: string): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      try {
        const res = await fetch(`${router}/workers`);
        const body = (await res.json()) as { workers: { url: string; health: string }[] };
        if (body.workers.find((w) => w.url === worker)?.health === 'healthy') return;
      } catch {
        // The router is busy; ask again.
      }
      await sleep(25);
    }
    throw new Error(`W4: Baton did not see ${worker} healthy again within 15 s of its restart`);
  }
}

/** How many continuations Baton sent on a spare connection, an idle keep-alive one and a new one, from its /metrics. */
async function continuationConnections(router: string): Promise<ContinuationConnections | null> {
  try {
    const text = await (await fetch(`${router}/metrics`)).text();
    const sum = (source: string) => {
      let n = 0;
      for (const m of text.matchAll(new RegExp(`^baton_continuation_connections_total\\{[^}]*source="${source}"[^}]*\\} (\\d+)$`, 'gm'))) n += Number(m[1]);
      return n;
    };
    return { spare: sum('spare'), keepalive: sum('keepalive'), new: sum('new') };
  } catch {
    return null;
  }
}
