// From raw runs to the figures of docs/benchmarks.md: per target and workload, ratios of Baton to nginx and
// to the bare proxy, the targets met or missed, and the markdown table. Pure functions over plain
// data, so the maths is testable without starting a process.
import { Histogram, percentileOf, type HistogramData } from './histogram.ts';
import type { Machine } from './proc.ts';
import { isBatonRef, targetLabel, type BatonRefName, type TargetName } from './targets.ts';
import type { WireFormat, WorkloadName } from './workloads.ts';
import { parseUpstreamRid } from '../router/migration/rid.ts';

/** The logical request id of an upstream rid (the rid itself when it is not one of Baton's). */
export function requestIdOf(rid: string): string {
  return parseUpstreamRid(rid)?.id ?? rid;
}

/** One measured run of one workload against one target. */
export interface Sample {
  workload: WorkloadName;
  target: TargetName;
  round: number;
  wallMs: number;
  requests: number;
  ok: number;
  errors: number;
  errorSamples: string[];
  tokens: number;
  bytes: number;
  chunks: number;
  ttft: HistogramData;
  gap: HistogramData;
  /** The proxy's CPU (utime + stime, all its processes) during the run; null for direct. */
  proxyCpuUs: number | null;
  /** The proxy's RSS just before the run, and the highest seen while streams were in flight. */
  rssIdleBytes: number | null;
  rssPeakBytes: number | null;
  concurrency: number;
  /** The workers' token interval during the run. */
  tokenIntervalMs: number;
  workersCpuUs: number;
  loadgenCpuUs: number;
  /** `baton_otel` only: spans its receiver got during the run (the batch processor lags by up to one batch). */
  otlpSpans?: number | null;
}

export interface Figures {
  workload: WorkloadName;
  target: TargetName;
  runs: number;
  wallS: number;
  requests: number;
  ok: number;
  errors: number;
  errorSamples: string[];
  rps: number;
  tokensPerS: number;
  mbPerS: number;
  cpuUsPerRequest: number | null;
  cpuUsPerToken: number | null;
  /** Cores the proxy kept busy on average. */
  proxyCores: number | null;
  ttftMs: { p50: number; p99: number };
  gapMs: { p50: number; p99: number };
  /** Versus direct, same workload; null for direct itself or when direct did not run. */
  addedTtftMs: { p50: number; p99: number } | null;
  addedGapMs: { p50: number; p99: number } | null;
  /**
   * (peak RSS − idle RSS) / streams in flight, KiB; the largest over rounds, because a process
   * keeps the heap it grew, so later rounds start from a higher "idle" and would under-report.
   */
  memKiBPerStream: number | null;
  workersCores: number;
  loadgenCores: number;
}

/** Sum the runs of one (workload, target) and merge their histograms. */
export function figuresOf(samples: Sample[], directFigures: Figures | null): Figures {
  const first = samples[0];
  if (!first) throw new Error('figuresOf needs at least one sample');
  const sum = (f: (s: Sample) => number) => samples.reduce((n, s) => n + f(s), 0);
  const wallS = sum((s) => s.wallMs) / 1000;
  const ok = sum((s) => s.ok);
  const tokens = sum((s) => s.tokens);
  const hasCpu = samples.every((s) => s.proxyCpuUs !== null);
  const cpu = hasCpu ? sum((s) => s.proxyCpuUs!) : null;
  const ttft = new Histogram();
  const gap = new Histogram();
  for (const s of samples) {
    ttft.merge(s.ttft);
    gap.merge(s.gap);
  }
  const ms = (h: Histogram, p: number) => (h.n === 0 ? NaN : h.percentile(p) / 1000);
  const ttftMs = { p50: ms(ttft, 50), p99: ms(ttft, 99) };
  const gapMs = { p50: ms(gap, 50), p99: ms(gap, 99) };
  const mem = samples
    .filter((s) => s.rssIdleBytes !== null && s.rssPeakBytes !== null && s.concurrency > 0)
    .map((s) => (s.rssPeakBytes! - s.rssIdleBytes!) / 1024 / s.concurrency);
  const vsDirect = first.target !== 'direct' && directFigures !== null;
  const errorSamples = [...new Set(samples.flatMap((s) => s.errorSamples))].slice(0, 5);
  return {
    workload: first.workload,
    target: first.target,
    runs: samples.length,
    wallS,
    requests: sum((s) => s.requests),
    ok,
    errors: sum((s) => s.errors),
    errorSamples,
    rps: wallS > 0 ? ok / wallS : 0,
    tokensPerS: wallS > 0 ? tokens / wallS : 0,
    mbPerS: wallS > 0 ? sum((s) => s.bytes) / 1e6 / wallS : 0,
    cpuUsPerRequest: cpu !== null && ok > 0 ? cpu / ok : null,
    cpuUsPerToken: cpu !== null && tokens > 0 ? cpu / tokens : null,
    proxyCores: cpu !== null && wallS > 0 ? cpu / 1e6 / wallS : null,
    ttftMs,
    gapMs,
    addedTtftMs: vsDirect ? { p50: ttftMs.p50 - directFigures.ttftMs.p50, p99: ttftMs.p99 - directFigures.ttftMs.p99 } : null,
    addedGapMs: vsDirect ? { p50: gapMs.p50 - directFigures.gapMs.p50, p99: gapMs.p99 - directFigures.gapMs.p99 } : null,
    memKiBPerStream: first.target === 'direct' || mem.length === 0 ? null : Math.max(...mem),
    workersCores: wallS > 0 ? sum((s) => s.workersCpuUs) / 1e6 / wallS : 0,
    loadgenCores: wallS > 0 ? sum((s) => s.loadgenCpuUs) / 1e6 / wallS : 0,
  };
}

/** Figures for every (workload, target) that ran, direct first so the others can be compared to it. */
export function summarize(samples: Sample[]): Figures[] {
  const out: Figures[] = [];
  const workloadsRun = [...new Set(samples.map((s) => s.workload))];
  // Other Baton builds (`--compare-ref`) right after this checkout's.
  const refs = [...new Set(samples.map((s) => s.target).filter(isBatonRef))];
  const order: TargetName[] = ['direct', 'bare', 'nginx', 'baton', ...refs, 'baton_otel_off', 'baton_otel'];
  for (const w of workloadsRun) {
    let directFigures: Figures | null = null;
    for (const t of order) {
      const mine = samples.filter((s) => s.workload === w && s.target === t);
      if (mine.length === 0) continue;
      const f = figuresOf(mine, directFigures);
      if (t === 'direct') directFigures = f;
      out.push(f);
    }
  }
  return out;
}

/** W3: memory per in-flight stream of one proxy, from a run of its own. */
export interface MemoryRun {
  target: TargetName;
  streams: number;
  /** (RSS with every stream in flight − RSS with none) / streams, KiB. */
  rssKiBPerStream: number | null;
  /** Node proxies: the same for V8 heap in use + external memory, each read after a full GC. */
  retainedKiBPerStream: number | null;
}

/** W4: what a migration costs in time, from Baton's side and from the client's. */
export interface MigrationGap {
  /** The wire format of the workers and requests (absent in results from before vLLM: SGLang). */
  format?: WireFormat;
  /** The workers' token interval while this part ran: 0 is W1's pace (the box saturated). */
  tokenIntervalMs: number;
  /** The router ran on a CPU of its own (every other process of the run pinned to the others). */
  ownCpu?: boolean;
  /** The router's niceness when the bench raised its priority (a diagnostic part, not judged); null or absent: 0. */
  nice?: number | null;
  kills: number;
  /** Continuations seen by the probe. */
  continuations: number;
  /** Continuations whose failed attempt was seen failing (the dead worker's connection closing). */
  matched: number;
  /** failure seen → continuation written, µs. */
  gapUs: { p50: number; p99: number; max: number };
  /** …of which: failure seen → continuation handed to the upstream client (the router's loop), and handed → written (connection). */
  loopUs: { p50: number; p99: number };
  connectUs: { p50: number; p99: number };
  /** continuation written → survivor's first chunk, µs. */
  survivorTtftUs: { p50: number; p99: number };
  /** Client's longest wait in a migrated request minus the survivor's TTFT, µs (single-migration requests). */
  stallMinusTtftUs: { p50: number; p99: number; n: number };
  /** Cross-check from trace rows (ms clock): failed attempt's ended_at → continuation's started_at. */
  traceGapMs: { p50: number; p99: number; n: number } | null;
  requests: number;
  ok: number;
  errors: number;
  errorSamples: string[];
  /** Where the continuations were sent (Baton's /metrics); null if unread. */
  connections: ContinuationConnections | null;
}

/** Continuations sent on a spare connection, on an idle keep-alive one, on a new one. */
export interface ContinuationConnections {
  spare: number;
  keepalive: number;
  new: number;
}

export interface GapInput {
  format?: WireFormat;
  tokenIntervalMs: number;
  kills: number;
  records: { rid: string; failedUs: number | null; createdUs: number | null; sentUs: number; firstChunkUs: number | null }[];
  /** Client view per base request id. */
  client: Map<string, { ok: boolean; maxWaitUs: number }>;
  traceGapsMs: number[] | null;
  requests: number;
  ok: number;
  errors: number;
  errorSamples: string[];
  connections?: ContinuationConnections | null;
  ownCpu?: boolean;
  nice?: number | null;
}

export function migrationGap(input: GapInput): MigrationGap {
  const gaps: number[] = [];
  const loops: number[] = [];
  const connects: number[] = [];
  const ttfts: number[] = [];
  const stalls: number[] = [];
  const perBase = new Map<string, number>();
  for (const r of input.records) {
    const base = requestIdOf(r.rid);
    perBase.set(base, (perBase.get(base) ?? 0) + 1);
  }
  for (const r of input.records) {
    if (r.failedUs !== null) gaps.push(r.sentUs - r.failedUs);
    if (r.failedUs !== null && r.createdUs !== null) loops.push(r.createdUs - r.failedUs);
    if (r.createdUs !== null) connects.push(r.sentUs - r.createdUs);
    if (r.firstChunkUs === null) continue;
    const ttft = r.firstChunkUs - r.sentUs;
    ttfts.push(ttft);
    const base = requestIdOf(r.rid);
    const c = input.client.get(base);
    if (c && c.ok && perBase.get(base) === 1) stalls.push(c.maxWaitUs - ttft);
  }
  const p = (xs: number[], q: number) => percentileOf(xs, q);
  const t = input.traceGapsMs;
  return {
    format: input.format ?? 'sglang',
    tokenIntervalMs: input.tokenIntervalMs,
    ownCpu: input.ownCpu ?? false,
    nice: input.nice ?? null,
    kills: input.kills,
    continuations: input.records.length,
    matched: gaps.length,
    gapUs: { p50: p(gaps, 50), p99: p(gaps, 99), max: gaps.length ? Math.max(...gaps) : NaN },
    loopUs: { p50: p(loops, 50), p99: p(loops, 99) },
    connectUs: { p50: p(connects, 50), p99: p(connects, 99) },
    survivorTtftUs: { p50: p(ttfts, 50), p99: p(ttfts, 99) },
    stallMinusTtftUs: { p50: p(stalls, 50), p99: p(stalls, 99), n: stalls.length },
    traceGapMs: t && t.length ? { p50: p(t, 50), p99: p(t, 99), n: t.length } : null,
    requests: input.requests,
    ok: input.ok,
    errors: input.errors,
    errorSamples: input.errorSamples,
    connections: input.connections ?? null,
  };
}

/** Trace rows (JSON Lines) → ms from each failed attempt's end to its continuation's start. */
export function traceGaps(jsonl: string): number[] {
  const attempts = new Map<string, { attempt: number; started_at: number; ended_at: number; outcome: string }[]>();
  for (const line of jsonl.split('\n')) {
    if (!line.trim()) continue;
    let row: { kind?: string; request_id?: string; attempt?: number; started_at?: number; ended_at?: number; outcome?: string };
    try {
      row = JSON.parse(line);
    } catch {
      continue;
    }
    if (row.kind !== 'attempt' || typeof row.request_id !== 'string') continue;
    const list = attempts.get(row.request_id) ?? [];
    list.push({ attempt: row.attempt ?? 0, started_at: row.started_at ?? 0, ended_at: row.ended_at ?? 0, outcome: row.outcome ?? '' });
    attempts.set(row.request_id, list);
  }
  const gaps: number[] = [];
  for (const list of attempts.values()) {
    list.sort((a, b) => a.attempt - b.attempt);
    for (let i = 1; i < list.length; i++) {
      if (list[i - 1]!.outcome === 'failed' && list[i]!.attempt === list[i - 1]!.attempt + 1) gaps.push(list[i]!.started_at - list[i - 1]!.ended_at);
    }
  }
  return gaps;
}

// --- ratios and targets --------------------------------------------------------------------

export interface Check {
  workload: WorkloadName;
  what: string;
  limit: string;
  value: string;
  /** null: could not be judged (nginx absent, workload not run). */
  met: boolean | null;
}

function find(fs: Figures[], w: WorkloadName, t: TargetName): Figures | undefined {
  return fs.find((f) => f.workload === w && f.target === t);
}

export function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  if (a === null || a === undefined || b === null || b === undefined || !(b > 0) || !Number.isFinite(a)) return null;
  return a / b;
}

export interface Ratios {
  workload: WorkloadName;
  /** Which Baton: this checkout's (`baton`), or another build (`baton@<sha>`, `--compare-ref`). */
  target: TargetName;
  versus: 'nginx' | 'bare';
  cpuPerRequest: number | null;
  /**
   * The same ratio taken round by round (the two runs of a round are minutes apart at most) and
   * its median: on a machine whose load changes during the run it moves less than the pooled one.
   */
  cpuPerRequestByRound: number[];
  cpuPerRequestMedian: number | null;
  cpuPerToken: number | null;
  rps: number | null;
  tokensPerS: number | null;
  memPerStream: number | null;
}

function cpuPerRequest(s: Sample | undefined): number | null {
  return s && s.proxyCpuUs !== null && s.ok > 0 ? s.proxyCpuUs / s.ok : null;
}

/** Median of a list; null when empty. */
export function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Every Baton build's ratios to nginx and to the bare proxy: this checkout's first, then the others (`--compare-ref`). */
export function ratios(fs: Figures[], samples: Sample[] = []): Ratios[] {
  const out: Ratios[] = [];
  const builds: TargetName[] = ['baton', ...new Set(fs.map((f) => f.target).filter(isBatonRef))];
  for (const w of [...new Set(fs.map((f) => f.workload))]) {
    for (const target of builds) {
      const b = find(fs, w, target);
      if (!b) continue;
      for (const versus of ['nginx', 'bare'] as const) {
        const o = find(fs, w, versus);
        const rounds = [...new Set(samples.filter((s) => s.workload === w).map((s) => s.round))].sort((x, y) => x - y);
        const byRound = rounds
          .map((r) => {
            const at = (t: TargetName) => cpuPerRequest(samples.find((s) => s.workload === w && s.round === r && s.target === t));
            return ratio(at(target), at(versus));
          })
          .filter((v): v is number => v !== null);
        out.push({
          workload: w,
          target,
          versus,
          cpuPerRequest: ratio(b.cpuUsPerRequest, o?.cpuUsPerRequest),
          cpuPerRequestByRound: byRound,
          cpuPerRequestMedian: median(byRound),
          cpuPerToken: ratio(b.cpuUsPerToken, o?.cpuUsPerToken),
          rps: ratio(b.rps, o?.rps),
          tokensPerS: ratio(b.tokensPerS, o?.tokensPerS),
          memPerStream: ratio(b.memKiBPerStream, o?.memKiBPerStream),
        });
      }
    }
  }
  return out;
}

/**
 * One run whose requests alternate between Baton, the bare Node proxy and nginx (whichever ran),
 * the workload's streams shared among them: every proxy serves the same rate at the same moments.
 */
export interface SideBySideRun {
  workload: WorkloadName;
  round: number;
  targets: { target: TargetName; cpuUs: number; ok: number; errors: number }[];
}

/** Baton against the other proxies in the side-by-side runs of one workload. */
export interface SideBySide {
  workload: WorkloadName;
  /** CPU per request over all rounds (pooled), by target. */
  usPerRequest: { target: TargetName; us: number | null }[];
  vsBareByRound: number[];
  vsBareMedian: number | null;
  vsNginxByRound: number[];
  vsNginxMedian: number | null;
  /** The bare Node proxy / nginx, median of the rounds: the Node floor against nginx, which bounds what Baton / nginx can be. */
  bareVsNginxMedian: number | null;
}

export function sideBySide(runs: SideBySideRun[]): SideBySide[] {
  const out: SideBySide[] = [];
  for (const w of [...new Set(runs.map((r) => r.workload))]) {
    const mine = runs.filter((r) => r.workload === w).sort((a, b) => a.round - b.round);
    const us = (r: SideBySideRun, t: TargetName) => {
      const x = r.targets.find((q) => q.target === t);
      return x && x.ok > 0 ? x.cpuUs / x.ok : null;
    };
    const byRound = (t: TargetName, of: TargetName = 'baton') => mine.map((r) => ratio(us(r, of), us(r, t))).filter((v): v is number => v !== null);
    const totals = new Map<TargetName, { cpuUs: number; ok: number }>();
    for (const r of mine) {
      for (const q of r.targets) {
        const t = totals.get(q.target) ?? { cpuUs: 0, ok: 0 };
        t.cpuUs += q.cpuUs;
        t.ok += q.ok;
        totals.set(q.target, t);
      }
    }
    const bare = byRound('bare');
    const nginx = byRound('nginx');
    out.push({ workload: w, usPerRequest: [...totals].map(([target, t]) => ({ target, us: t.ok > 0 ? t.cpuUs / t.ok : null })), vsBareByRound: bare, vsBareMedian: median(bare), vsNginxByRound: nginx, vsNginxMedian: median(nginx), bareVsNginxMedian: median(byRound('nginx', 'bare')) });
  }
  return out;
}

/** `--compare-ref`: one run shared by this checkout's Baton and another build, request by request. */
export interface BuildPair {
  workload: WorkloadName;
  round: number;
  ref: BatonRefName;
  baton: { cpuUs: number; ok: number; errors: number };
  other: { cpuUs: number; ok: number; errors: number };
}

/**
 * Two Baton builds in the same run (`--compare-ref`): this checkout's against another commit's,
 * per workload both ran. The bar for a change ("the SGLang ratios do not regress by more
 * than 5 %") compares each build's ratio to the same bare proxy; within one round that is the
 * two builds' CPU per request divided, so `byRound` is Baton / Baton@ref round by round.
 */
export interface BuildComparison {
  workload: WorkloadName;
  ref: BatonRefName;
  /** This checkout's Baton, then the other build. */
  builds: { target: TargetName; cpuUsPerRequest: number | null; vsBareByRound: number[]; vsBareMedian: number | null; vsNginxMedian: number | null }[];
  /** Baton / Baton@ref, CPU per request, round by round, and the median. */
  byRound: number[];
  median: number | null;
  /** Pooled over the rounds. */
  pooled: number | null;
  /** median(Baton / bare) ÷ median(Baton@ref / bare). */
  ratioChange: number | null;
  /** From the paired runs (one load shared request by request): Baton / Baton@ref per round, and the median. */
  pairedByRound: number[];
  pairedMedian: number | null;
}

export function buildComparisons(fs: Figures[], samples: Sample[], pairs: BuildPair[] = []): BuildComparison[] {
  const out: BuildComparison[] = [];
  const rs = ratios(fs, samples);
  const refs = [...new Set(fs.map((f) => f.target).filter(isBatonRef))];
  for (const w of [...new Set(fs.map((f) => f.workload))]) {
    const mine = find(fs, w, 'baton');
    if (!mine) continue;
    for (const ref of refs) {
      const theirs = find(fs, w, ref);
      if (!theirs) continue;
      const rounds = [...new Set(samples.filter((s) => s.workload === w).map((s) => s.round))].sort((a, b) => a - b);
      const at = (r: number, t: TargetName) => cpuPerRequest(samples.find((s) => s.workload === w && s.round === r && s.target === t));
      const byRound = rounds.map((r) => ratio(at(r, 'baton'), at(r, ref))).filter((v): v is number => v !== null);
      const build = (t: TargetName) => {
        const bare = rs.find((q) => q.workload === w && q.target === t && q.versus === 'bare');
        const nginx = rs.find((q) => q.workload === w && q.target === t && q.versus === 'nginx');
        const byR = bare?.cpuPerRequestByRound ?? [];
        return {
          target: t,
          cpuUsPerRequest: find(fs, w, t)?.cpuUsPerRequest ?? null,
          vsBareByRound: byR,
          vsBareMedian: byR.length > 0 ? median(byR) : (bare?.cpuPerRequest ?? null),
          vsNginxMedian: nginx && nginx.cpuPerRequestByRound.length > 0 ? median(nginx.cpuPerRequestByRound) : (nginx?.cpuPerRequest ?? null),
        };
      };
      const builds = [build('baton'), build(ref)];
      const perReq = (x: { cpuUs: number; ok: number }) => (x.ok > 0 ? x.cpuUs / x.ok : null);
      const paired = pairs
        .filter((p) => p.workload === w && p.ref === ref)
        .sort((a, b) => a.round - b.round)
        .map((p) => ratio(perReq(p.baton), perReq(p.other)))
        .filter((v): v is number => v !== null);
      out.push({
        workload: w,
        ref,
        builds,
        byRound,
        median: median(byRound),
        pooled: ratio(mine.cpuUsPerRequest, theirs.cpuUsPerRequest),
        ratioChange: ratio(builds[0]!.vsBareMedian, builds[1]!.vsBareMedian),
        pairedByRound: paired,
        pairedMedian: median(paired),
      });
    }
  }
  return out;
}

const x = (r: number | null) => (r === null ? 'n/a' : `${r.toFixed(2)}×`);

/** Fewer paired requests than this and the tracing ratio is shown, not judged. */
const MIN_PAIRED_REQUESTS = 50;

/**
 * Tracing's cost: Baton's CPU per request with OTLP trace export on against off, per workload, from the
 * paired runs (both processes under one load at once: `baton_otel_off`, `baton_otel`).
 */
export interface TracingCost {
  workload: WorkloadName;
  offUsPerRequest: number | null;
  onUsPerRequest: number | null;
  /** on / off, pooled over the rounds. */
  ratio: number | null;
  byRound: number[];
  median: number | null;
  /** Requests the process with export on served in the paired runs. */
  requests: number;
  /**
   * Spans the receiver got per request served with export on, over every paired run of W1 and W2
   * together (3 for a request that did not migrate; the batch processor holds spans for up to 5 s,
   * so a run's spans may arrive during the next one).
   */
  spansPerRequest: number | null;
}

export function tracingCost(fs: Figures[], samples: Sample[]): TracingCost[] {
  const out: TracingCost[] = [];
  for (const w of [...new Set(fs.map((f) => f.workload))]) {
    const off = find(fs, w, 'baton_otel_off');
    const on = find(fs, w, 'baton_otel');
    if (!off || !on) continue;
    const rounds = [...new Set(samples.filter((s) => s.workload === w).map((s) => s.round))].sort((a, b) => a - b);
    const at = (r: number, t: TargetName) => cpuPerRequest(samples.find((s) => s.workload === w && s.round === r && s.target === t));
    const byRound = rounds.map((r) => ratio(at(r, 'baton_otel'), at(r, 'baton_otel_off'))).filter((v): v is number => v !== null);
    const mine = samples.filter((s) => s.target === 'baton_otel' && s.otlpSpans != null);
    const ok = mine.reduce((n, s) => n + s.ok, 0);
    out.push({
      workload: w,
      requests: on.ok,
      offUsPerRequest: off.cpuUsPerRequest,
      onUsPerRequest: on.cpuUsPerRequest,
      ratio: ratio(on.cpuUsPerRequest, off.cpuUsPerRequest),
      byRound,
      median: median(byRound),
      spansPerRequest: ok > 0 ? mine.reduce((n, s) => n + (s.otlpSpans ?? 0), 0) / ok : null,
    });
  }
  return out;
}

export function checks(fs: Figures[], gaps: MigrationGap[], nginxPresent: boolean, samples: Sample[] = [], memory: MemoryRun[] = [], pairs: BuildPair[] = [], pinnedMissing?: string, sideRuns: SideBySideRun[] = []): Check[] {
  const out: Check[] = [];
  const rs = ratios(fs, samples);
  const r = (w: WorkloadName, v: 'nginx' | 'bare') => rs.find((q) => q.workload === w && q.target === 'baton' && q.versus === v);
  const le = (v: number | null, lim: number) => (v === null ? null : v <= lim);
  const ge = (v: number | null, lim: number) => (v === null ? null : v >= lim);
  const absent = (v: number | null, needsNginx: boolean) => (v === null && needsNginx && !nginxPresent ? 'nginx absent' : x(v));

  // CPU ratios: the median of the per-round ratios when there are three rounds or more (robust to
  // a machine whose load changes during the run), else the pooled ratio.
  const alone = (w: WorkloadName, v: 'nginx' | 'bare') => {
    const q = r(w, v);
    if (!q) return { v: null, how: '' };
    if (q.cpuPerRequestByRound.length >= 3) return { v: q.cpuPerRequestMedian, how: ` (median of ${q.cpuPerRequestByRound.length} rounds)` };
    return { v: q.cpuPerRequest, how: '' };
  };
  // Judged side by side when the run has them (one load shared by the proxies, each with the
  // workload's own streams: the same rate at the same moments), else on the runs alone. The
  // figure alone is shown beside it: alone, each proxy serves the rate it reaches by itself, and
  // a proxy that serves more requests a second gets more frames per read and write.
  const sbs = sideBySide(sideRuns);
  const cpu = (w: WorkloadName, v: 'nginx' | 'bare') => {
    const a = alone(w, v);
    const c = sbs.find((q) => q.workload === w);
    const byRound = c ? (v === 'bare' ? c.vsBareByRound : c.vsNginxByRound) : [];
    if (!c || byRound.length === 0) return { v: a.v, how: `${a.how}, each proxy alone`, also: '' };
    const m = v === 'bare' ? c.vsBareMedian : c.vsNginxMedian;
    const how = byRound.length > 1 ? ` (median of ${byRound.length} rounds)` : '';
    // Against nginx, the Node floor beside it: Baton builds on Node's HTTP server as the bare proxy does.
    const floor = v === 'nginx' && c.bareVsNginxMedian !== null ? `; the bare Node proxy / nginx ${x(c.bareVsNginxMedian)}` : '';
    return { v: m, how: `, side by side${how}`, also: a.v === null ? floor : ` (alone${a.how}: ${x(a.v)}${floor})` };
  };
  // Only the workloads that ran (a --format vllm run has no SGLang figures to judge).
  const ran = (w: WorkloadName) => fs.some((f) => f.workload === w);
  // CPU per request is judged on the shared layout (every target alike, the box saturated: the
  // cost of a request, whoever runs when); throughput and latency on the pinned one, where the
  // proxy has a CPU of its own as deployed, and what it costs shows as its own delay rather than
  // as CPU taken from the workers.
  const notPinned = pinnedMissing ? `pinned layout not run: ${pinnedMissing}` : 'pinned layout not run';
  if (ran('W1')) {
    const w1b = cpu('W1', 'bare');
    const w1n = cpu('W1', 'nginx');
    out.push({ workload: 'W1', what: `CPU per request, Baton / bare proxy${w1b.how}, shared layout`, limit: '≤ 1.15×', value: x(w1b.v) + w1b.also, met: le(w1b.v, 1.15) });
    out.push({ workload: 'W1', what: `CPU per request, Baton / nginx${w1n.how}, shared layout`, limit: '≤ 1.8×', value: absent(w1n.v, true) + (w1n.v === null ? '' : w1n.also), met: le(w1n.v, 1.8) });
  }
  if (ran('W2')) {
    const w2b = cpu('W2', 'bare');
    out.push({ workload: 'W2', what: `CPU per request, Baton / bare proxy${w2b.how}, shared layout`, limit: '≤ 1.5×', value: x(w2b.v) + w2b.also, met: le(w2b.v, 1.5) });
  }
  if (ran('W2') || ran('W2-pinned')) {
    const w2n = r('W2-pinned', 'nginx')?.tokensPerS ?? null;
    const shared = r('W2', 'nginx')?.tokensPerS ?? null;
    const value = ran('W2-pinned') ? absent(w2n, true) : `n/a (${notPinned}; shared layout: ${absent(shared, true)}, not judged)`;
    out.push({ workload: 'W2-pinned', what: 'throughput (tokens/s), Baton / nginx, pinned layout', limit: '≥ 0.9×', value, met: ran('W2-pinned') ? ge(w2n, 0.9) : null });
  }
  if (ran('W3') || ran('W3-pinned')) {
    // When direct calls alone miss the token interval by half again at p99, the box cannot carry
    // the streams: every target then measures the scheduler, and the difference says nothing.
    const judged: WorkloadName = ran('W3-pinned') ? 'W3-pinned' : 'W3';
    const w3 = find(fs, judged, 'baton');
    const added = w3?.addedGapMs?.p99 ?? null;
    const d3 = find(fs, judged, 'direct');
    const interval = info3(samples);
    const saturated = d3 !== undefined && interval !== null && d3.gapMs.p99 > interval * 1.5;
    const streams = w3?.runs ? samples.find((s) => s.workload === judged && s.target === 'baton')?.concurrency : undefined;
    const figure = added === null ? 'n/a' : `${added.toFixed(2)} ms`;
    const value = judged === 'W3'
      ? `n/a (${notPinned}; shared layout: ${figure}, not judged)`
      : `${figure}${streams ? ` at ${streams} streams` : ''}${saturated ? ` (not judged: direct's own p99 is ${d3!.gapMs.p99.toFixed(0)} ms at a ${interval} ms interval, CPU 0 is saturated: the workers used ${d3!.workersCores.toFixed(2)} of a core and the load generator ${d3!.loadgenCores.toFixed(2)} in direct's rounds)` : ''}`;
    out.push({ workload: 'W3-pinned', what: 'added p99 inter-frame latency vs direct, pinned layout', limit: '≤ 10 ms', value, met: judged === 'W3' || saturated ? null : le(added, 10) });
  }
  const w3 = find(fs, 'W3', 'baton') ?? find(fs, 'W3-pinned', 'baton');
  // Memory: what Baton retains after a full GC when its memory run has it (its RSS also holds
  // garbage not yet collected), else RSS growth.
  const mr = memory.find((m) => m.target === 'baton');
  const mem = mr?.retainedKiBPerStream ?? mr?.rssKiBPerStream ?? w3?.memKiBPerStream ?? null;
  const memHow = mr?.retainedKiBPerStream != null ? ' (retained after GC)' : mr ? ' (RSS growth)' : ' (RSS growth during the rounds)';
  if (ran('W3') || memory.length > 0) out.push({ workload: 'W3', what: `memory per in-flight stream${memHow}`, limit: '≤ 32 KiB', value: mem === null ? 'n/a' : `${mem.toFixed(1)} KiB`, met: le(mem, 32) });
  for (const c of tracingCost(fs, samples)) {
    const v = c.byRound.length >= 3 ? c.median : c.ratio;
    const how = c.byRound.length >= 3 ? ` (median of ${c.byRound.length} rounds)` : '';
    // A W2 request costs tens of ms of CPU and tracing tens of µs: a ratio over a handful of
    // requests per process measures the machine, not the export.
    const few = c.requests < MIN_PAIRED_REQUESTS;
    out.push({
      workload: c.workload,
      what: `CPU per request, Baton with OTLP export on / off${how}`,
      limit: '≤ 1.10×',
      value: few ? `${x(v)} (not judged: ${c.requests} requests with export on, fewer than ${MIN_PAIRED_REQUESTS})` : x(v),
      met: few ? null : le(v, 1.1),
    });
  }
  // Other builds (`--compare-ref`): this checkout's CPU per request at most 5 % above theirs.
  for (const c of buildComparisons(fs, samples, pairs)) {
    const v = c.byRound.length >= 3 ? c.median : c.pooled;
    const how = c.byRound.length >= 3 ? `median of ${c.byRound.length} rounds` : c.byRound.length > 1 ? `pooled over ${c.byRound.length} rounds` : 'one round';
    out.push({ workload: c.workload, what: `CPU per request, Baton / ${targetLabel(c.ref)}, runs of their own in each round (${how})`, limit: '≤ 1.05×', value: x(v), met: le(v, 1.05) });
    if (c.pairedByRound.length > 0) {
      out.push({ workload: c.workload, what: `CPU per request, Baton / ${targetLabel(c.ref)}, paired runs (median of ${c.pairedByRound.length})`, limit: '≤ 1.05×', value: x(c.pairedMedian), met: le(c.pairedMedian, 1.05) });
    }
  }
  if (gaps.length === 0) out.push({ workload: 'W4', what: 'p99 gap, failure detected → continuation sent', limit: '≤ 5 ms', value: 'n/a', met: null });
  for (const gap of gaps) {
    const g = gap.matched > 0 ? gap.gapUs.p99 / 1000 : null;
    // The raised-priority part is a diagnostic of the saturated one, not a layout: shown, not judged.
    const diagnostic = gap.nice ? ' (a diagnostic, not judged: the saturated part with the router ahead in the scheduler\'s queue)' : '';
    out.push({ workload: gap.format === 'vllm' ? 'W4-vllm' : 'W4', what: `p99 gap, failure detected → continuation sent (${gapLabel(gap)})`, limit: '≤ 5 ms', value: g === null ? 'n/a' : `${g.toFixed(2)} ms${diagnostic}`, met: gap.nice ? null : le(g, 5) });
  }
  return out;
}

/** W3's token interval, as recorded with its samples. */
function info3(samples: Sample[]): number | null {
  return samples.find((s) => s.workload === 'W3' || s.workload === 'W3-pinned')?.tokenIntervalMs ?? null;
}

/** One line per target of `checks`, for a terminal: met / missed / not judged, the figure and the limit. */
export function verdictLines(cs: Check[]): string[] {
  return cs.map((c) => `verdict: ${c.met === null ? 'n/a   ' : c.met ? 'met   ' : 'MISSED'}  ${c.workload.padEnd(9)} ${c.what}: ${c.value} (target ${c.limit})`);
}

// --- markdown ------------------------------------------------------------------------------

export function gapLabel(g: MigrationGap): string {
  const pace = (g.format === 'vllm' ? 'vLLM workers, ' : '') + (g.tokenIntervalMs > 0 ? `workers paced at ${g.tokenIntervalMs} ms a token` : 'workers as fast as they go, box saturated');
  const where = g.ownCpu ? `${pace}, router on a CPU of its own` : pace;
  return g.nice ? `${where}, router at nice ${g.nice}` : where;
}

export interface RunInfo {
  date: string;
  mode: 'full' | 'quick';
  machine: Machine;
  loadAverage: { start: number[]; end: number[] };
  settings: Record<string, string | number>;
  /** Results from before vLLM name only W1-W4. */
  workloadTitles: Partial<Record<WorkloadName, string>>;
  /** Other Baton builds in the run (`--compare-ref`). */
  compareRefs?: { target: BatonRefName; rev: string; sha: string }[];
}

const num = (v: number | null | undefined, digits = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits));
const signed = (v: number | null | undefined, digits = 2) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : `${v >= 0 ? '+' : ''}${v.toFixed(digits)}`);

export function markdown(info: RunInfo, fs: Figures[], gaps: MigrationGap[], nginxPresent: boolean, samples: Sample[] = [], memory: MemoryRun[] = [], pairs: BuildPair[] = [], pinnedMissing?: string, sideRuns: SideBySideRun[] = []): string {
  const m = info.machine;
  const lines: string[] = [];
  lines.push(`Run of ${info.date} (${info.mode}): ${m.cores} cores, ${m.cpu}, ${m.memoryGiB} GiB, Node ${m.node}, ${m.os}; nginx ${m.nginx ?? 'absent'}.`);
  lines.push(`Load average at start ${info.loadAverage.start.map((v) => v.toFixed(2)).join(' / ')}, at end ${info.loadAverage.end.map((v) => v.toFixed(2)).join(' / ')}.`);
  lines.push(`Settings: ${Object.entries(info.settings).map(([k, v]) => `${k} ${v}`).join('; ')}.`);
  lines.push(`Layouts: rows without a suffix ran on the shared layout (every process on every CPU, the box saturated as the scheduler has it); \`-pinned\` rows on the pinned layout (the proxy under test alone on CPU 1; the workers, the load generator and the bench on CPU 0: as deployed, where the workers have hosts of their own)${pinnedMissing ? ` — not run here: ${pinnedMissing}` : ''}. W4's two parts are its own layouts (saturated: shared; paced: the router on a CPU of its own).`);
  lines.push('');
  lines.push('| workload | target | req/s | tokens/s | MB/s | CPU µs/req | CPU µs/token | proxy cores | TTFT p50 / p99 ms | +TTFT p50 / p99 ms | inter-frame p50 / p99 ms | +inter-frame p50 / p99 ms | KiB/stream | errors |');
  lines.push('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const f of fs) {
    const added = (a: { p50: number; p99: number } | null) => (a ? `${signed(a.p50)} / ${signed(a.p99)}` : '–');
    lines.push(
      `| ${f.workload} ${info.workloadTitles[f.workload] ?? ''} | ${targetLabel(f.target)} | ${num(f.rps)} | ${num(f.tokensPerS)} | ${num(f.mbPerS, 1)} | ${num(f.cpuUsPerRequest)} | ${num(f.cpuUsPerToken, 2)} | ${num(f.proxyCores, 2)} | ${num(f.ttftMs.p50, 2)} / ${num(f.ttftMs.p99, 2)} | ${added(f.addedTtftMs)} | ${num(f.gapMs.p50, 3)} / ${num(f.gapMs.p99, 2)} | ${added(f.addedGapMs)} | ${num(f.memKiBPerStream, 1)} | ${f.errors} |`,
    );
  }
  if (!nginxPresent) lines.push('', 'nginx: absent on this machine (not installed); its rows and the ratios against it are missing.');
  lines.push('');
  lines.push('Ratios, Baton / other (CPU: lower is better; throughput: higher is better):');
  lines.push('');
  lines.push('| workload | versus | CPU/req | CPU/req by round (median) | CPU/token | req/s | tokens/s | memory/stream |');
  lines.push('|---|---|--:|--:|--:|--:|--:|--:|');
  for (const r of ratios(fs, samples).filter((q) => q.target === 'baton')) {
    const byRound = r.cpuPerRequestByRound.length > 1 ? `${r.cpuPerRequestByRound.map((v) => v.toFixed(2)).join(', ')} (${x(r.cpuPerRequestMedian)})` : '–';
    lines.push(`| ${r.workload} | ${r.versus === 'bare' ? 'bare Node proxy' : 'nginx'} | ${x(r.cpuPerRequest)} | ${byRound} | ${x(r.cpuPerToken)} | ${x(r.rps)} | ${x(r.tokensPerS)} | ${x(r.memPerStream)} |`);
  }
  lines.push('');
  const sbs = sideBySide(sideRuns);
  if (sbs.length > 0) {
    lines.push(
      'Side by side (shared layout): each round also has one run whose requests alternate between Baton, the bare Node proxy and nginx, ' +
        "each with the workload's own streams (W1: 64 each), so every proxy serves the same rate at the same moments (CPU per request from /proc, pooled over the rounds). " +
        'The CPU targets are judged on these (the ratios of the runs above, each proxy alone at the rate it reaches by itself, are shown beside each verdict):',
    );
    lines.push('');
    lines.push('| workload | Baton µs/req | bare Node proxy µs/req | nginx µs/req | Baton / bare, by round (median) | Baton / nginx, by round (median) |');
    lines.push('|---|--:|--:|--:|--:|--:|');
    const byRound = (xs: number[], m: number | null) => (xs.length > 1 ? `${xs.map((v) => v.toFixed(2)).join(', ')} (${x(m)})` : x(m));
    for (const c of sbs) {
      const u = (t: TargetName) => num(c.usPerRequest.find((q) => q.target === t)?.us);
      lines.push(`| ${c.workload} | ${u('baton')} | ${u('bare')} | ${u('nginx')} | ${byRound(c.vsBareByRound, c.vsBareMedian)} | ${byRound(c.vsNginxByRound, c.vsNginxMedian)} |`);
    }
    lines.push('');
  }
  const tc = tracingCost(fs, samples);
  if (tc.length > 0) {
    lines.push('Tracing: Baton with OTLP export on (every request sampled, protobuf, the SDK\'s batching, to a receiver on loopback that decodes it) against off, two Baton processes sharing each paired run\'s load request by request:');
    lines.push('');
    lines.push('| workload | CPU µs/req off | CPU µs/req on | on / off | by round (median) | spans exported / request (W1 and W2) |');
    lines.push('|---|--:|--:|--:|--:|--:|');
    for (const c of tc) {
      const byRound = c.byRound.length > 1 ? `${c.byRound.map((v) => v.toFixed(2)).join(', ')} (${x(c.median)})` : '–';
      lines.push(`| ${c.workload} | ${num(c.offUsPerRequest)} | ${num(c.onUsPerRequest)} | ${x(c.ratio)} | ${byRound} | ${num(c.spansPerRequest, 2)} |`);
    }
    lines.push('');
  }
  const bc = buildComparisons(fs, samples, pairs);
  if (bc.length > 0) {
    const refs = info.compareRefs ?? [];
    const revs = refs.map((r) => `${targetLabel(r.target)} = ${r.rev === r.sha.slice(0, r.rev.length) ? r.sha : `${r.rev} (${r.sha})`}`).join('; ');
    lines.push(
      `Baton builds side by side (\`--compare-ref\`${revs ? `: ${revs}` : ''}; each build its own process, the same workers, load generator and rounds; ` +
        'Baton is this checkout as it was on disk). Each round every build has a run of its own in the rotation, and a paired run shares one load with Baton request by request:',
    );
    lines.push('');
    lines.push('| workload | build | CPU µs/req | / bare Node proxy, by round (median) | / nginx (median) | Baton / this build, by round (median) | change of the ratio to bare | paired runs: Baton / this build (median) |');
    lines.push('|---|---|--:|--:|--:|--:|--:|--:|');
    const seen = new Set<string>();
    for (const c of bc) {
      for (const b of c.builds) {
        const key = `${c.workload} ${b.target}`;
        if (b.target === 'baton' && seen.has(key)) continue;
        seen.add(key);
        const byBare = b.vsBareByRound.length > 1 ? `${b.vsBareByRound.map((v) => v.toFixed(2)).join(', ')} (${x(b.vsBareMedian)})` : x(b.vsBareMedian);
        const vsMe = b.target === 'baton' ? '–' : c.byRound.length > 1 ? `${c.byRound.map((v) => v.toFixed(2)).join(', ')} (${x(c.median)})` : x(c.median);
        const change = b.target === 'baton' || c.ratioChange === null ? '–' : `${c.ratioChange >= 1 ? '+' : ''}${((c.ratioChange - 1) * 100).toFixed(1)} %`;
        const paired = b.target === 'baton' || c.pairedByRound.length === 0 ? '–' : c.pairedByRound.length > 1 ? `${c.pairedByRound.map((v) => v.toFixed(2)).join(', ')} (${x(c.pairedMedian)})` : x(c.pairedMedian);
        lines.push(`| ${c.workload} | ${b.target === 'baton' ? 'Baton (this checkout)' : targetLabel(b.target)} | ${num(b.cpuUsPerRequest)} | ${byBare} | ${x(b.vsNginxMedian)} | ${vsMe} | ${change} | ${paired} |`);
      }
    }
    lines.push('');
  }
  if (memory.length > 0) {
    lines.push(`W3 memory per in-flight stream (a run of its own per proxy, ${memory[0]!.streams} streams in flight):`);
    lines.push('');
    lines.push('| target | RSS growth KiB/stream | retained after a full GC KiB/stream |');
    lines.push('|---|--:|--:|');
    // A Node proxy's RSS between two full GCs moves with what V8 gives back, not with the streams.
    for (const m of memory) lines.push(`| ${targetLabel(m.target)} | ${m.retainedKiBPerStream === null ? num(m.rssKiBPerStream, 1) : '(GC)'} | ${num(m.retainedKiBPerStream, 1)} |`);
    lines.push('');
  }
  for (const gap of gaps) {
    const ms = (us: number) => num(us / 1000, 2);
    const conns = gap.connections ? `; ${gap.connections.spare} sent on a spare connection, ${gap.connections.keepalive} on an idle keep-alive one, ${gap.connections.new} on a new one` : '';
    lines.push(`W4 migration gap (Baton, ${gap.format === 'vllm' ? "W1's load in vLLM's format" : "W1's load"}, ${gapLabel(gap)}; ${gap.kills} worker kills, ${gap.continuations} continuations, ${gap.matched} matched to the failed connection${conns}):`);
    lines.push('');
    lines.push('| measure | p50 ms | p99 ms | max ms | n |');
    lines.push('|---|--:|--:|--:|--:|');
    lines.push(`| failure detected → continuation written (router clock, µs resolution) | ${ms(gap.gapUs.p50)} | ${ms(gap.gapUs.p99)} | ${ms(gap.gapUs.max)} | ${gap.matched} |`);
    lines.push(`| … of which failure → continuation handed to the upstream client (the migration loop) | ${ms(gap.loopUs.p50)} | ${ms(gap.loopUs.p99)} | – | ${gap.matched} |`);
    lines.push(`| … of which handed to the client → written (connection to the survivor) | ${ms(gap.connectUs.p50)} | ${ms(gap.connectUs.p99)} | – | ${gap.continuations} |`);
    if (gap.traceGapMs) lines.push(`| same, from trace rows (ended_at → next started_at, ms resolution) | ${num(gap.traceGapMs.p50, 0)} | ${num(gap.traceGapMs.p99, 0)} | – | ${gap.traceGapMs.n} |`);
    lines.push(`| survivor's time to first token | ${ms(gap.survivorTtftUs.p50)} | ${ms(gap.survivorTtftUs.p99)} | – | ${gap.continuations} |`);
    lines.push(`| client-visible stall minus survivor's TTFT | ${ms(gap.stallMinusTtftUs.p50)} | ${ms(gap.stallMinusTtftUs.p99)} | – | ${gap.stallMinusTtftUs.n} |`);
    lines.push('');
    lines.push(`W4 client side: ${gap.requests} requests, ${gap.ok} complete with the full budget, ${gap.errors} errors${gap.errorSamples.length ? ` (${gap.errorSamples.join('; ')})` : ''}.`);
    lines.push('');
  }
  lines.push('Targets:');
  lines.push('');
  lines.push('| workload | target | limit | measured | met |');
  lines.push('|---|---|--:|--:|:-:|');
  for (const c of checks(fs, gaps, nginxPresent, samples, memory, pairs, pinnedMissing, sideRuns)) lines.push(`| ${c.workload} | ${c.what} | ${c.limit} | ${c.value} | ${c.met === null ? 'n/a' : c.met ? 'yes' : '**no**'} |`);
  return lines.join('\n');
}

/** Replace the text between the bench markers in `doc` (or append a marked section). */
export function spliceIntoDoc(doc: string, table: string): string {
  const BEGIN = '<!-- bench:begin -->';
  const END = '<!-- bench:end -->';
  const block = `${BEGIN}\n${table}\n${END}`;
  const i = doc.indexOf(BEGIN);
  const j = doc.indexOf(END);
  if (i >= 0 && j > i) return doc.slice(0, i) + block + doc.slice(j + END.length);
  return `${doc.trimEnd()}\n\n${block}\n`;
}
