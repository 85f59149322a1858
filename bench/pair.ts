// Paired runs: several proxies behind the same simulated workers, under ONE load whose requests
// alternate between them, so every proxy sees the same machine at the same moments. On a shared
// 2-core box, runs seconds apart differ by more than the few per cent a change to the router is
// worth; runs of one load, request by request, do not (an A/A pair of one build agrees within ~1-2 %).
//
//   node --import tsx bench/pair.ts [options]
//
// Targets: this checkout's Baton (`baton`, always), other builds (`--ref REV`, a temporary git
// worktree each, as `npm run bench -- --compare-ref` makes them), and the bare undici proxy
// (`--bare`). Each run prints every target's CPU per request (utime + stime from /proc, all its
// threads) and its ratio to the first target; the end, the medians over the runs.
// `--profile DIR` writes a CPU profile of each Node target covering the measured runs only (the
// probe preloaded into it starts and stops V8's sampling profiler on command), and prints the top
// of each with bench/profile-top.ts. Profiling costs every target alike, a little: compare ratios
// from profiled runs with ratios from profiled runs.
// `--solo` runs each target alone in turn instead, with the workload's whole load, as the bench's
// own runs do, and prints each target's read and write system calls per request beside its CPU.
//
// A caution (docs/benchmarks.md, "The outputs ring keeps copies"): a router
// settles in one of two GC modes, and the first one started took the heavy one more often than
// the others, at 4-7 % of its CPU (this checkout's router is started first): a few per cent
// between two builds needs runs both ways round (each build once as the checkout, once as --ref).
//
// Not the bench: no nginx, no latency verdicts, no table in the docs. It answers "is this change
// cheaper than that build, per request, under W1's (or W2's) load", which the bench's own runs
// (each target alone, minutes apart) answer only within ±10-30 % here.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import type { RunCommand, RunResult } from './loadgen.ts';
import { pinProcess, syscalls, treeCpuMicros } from './proc.ts';
import { BENCH_DIR, ProcessGroup, waitForMessage, type Proc } from './processes.ts';
import type { ProbeCommand, ProfileReply } from './proxy-probe.ts';
import { median } from './report.ts';
import { prepareRef, type RefBuild } from './ref-build.ts';
import { startBare, startBaton, type Target } from './targets.ts';
import { workloads, type Workload, type WorkloadName } from './workloads.ts';
import { formatHeapTop, formatTop, summarizeHeapProfile, summarizeProfile } from './profile-top.ts';

const USAGE = `usage: node --import tsx bench/pair.ts [options]

  --ref REV            another Baton build beside this checkout's (repeatable; 6f100f1, HEAD, ...);
                       REV+--flag=value+...: with router flags of its own, REV+node:--flag with
                       Node flags of its own; '.': this checkout (e.g. --ref .+--spare-connections=0)
  --bare               the bare undici proxy too (bench/bare-proxy.ts)
  --bare-node-flag F   a Node flag for the bare proxy (repeatable; e.g. --bare-node-flag=--no-parallel-scavenge)
  --workload W         W1 (default), W2, W1-vllm, W2-vllm
  --runs N             measured paired runs (default 8)
  --run-ms T           one run (default 2500)
  --warmup-ms T        paired warm-up before the runs (default 12000; the JIT settles over ~10 s)
  --workers N          simulated workers (default 3)
  --streams N          concurrent streams per target (default: the workload's, W1 64)
  --pin                the proxies on CPU 1, workers and load generator on CPU 0 (taskset)
  --solo               each target alone in turn with the workload's whole load (as the bench's own
                       runs), rotating the order every round; prints system calls per request too
  --profile DIR        CPU profiles of the measured runs, one per Node target, and their top
  --heap-profile       with --profile: sampled allocations instead (.heapprofile, garbage included)
  --baton-flag F       a flag for every Baton router (repeatable; e.g. --baton-flag=--spare-connections=0)
  --node-flag F        a Node flag for every Baton router (repeatable; e.g. --node-flag=--max-semi-space-size=32)
  -h, --help`;

const { values: v } = parseArgs({
  options: {
    ref: { type: 'string', multiple: true, default: [] },
    bare: { type: 'boolean', default: false },
    'bare-node-flag': { type: 'string', multiple: true, default: [] },
    workload: { type: 'string', default: 'W1' },
    runs: { type: 'string', default: '8' },
    'run-ms': { type: 'string', default: '2500' },
    'warmup-ms': { type: 'string', default: '12000' },
    workers: { type: 'string', default: '3' },
    streams: { type: 'string' },
    pin: { type: 'boolean', default: false },
    solo: { type: 'boolean', default: false },
    profile: { type: 'string' },
    'heap-profile': { type: 'boolean', default: false },
    'baton-flag': { type: 'string', multiple: true, default: [] },
    'node-flag': { type: 'string', multiple: true, default: [] },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (v.help) {
  console.log(USAGE);
  process.exit(0);
}

const W = workloads({ streams: 400, w3IntervalMs: 40 });
const wname = v.workload as WorkloadName;
const base = W[wname];
if (!base || !['W1', 'W2', 'W1-vllm', 'W2-vllm'].includes(wname)) throw new Error(`--workload takes W1, W2, W1-vllm or W2-vllm, got ${v.workload}`);
const runs = Number(v.runs);
const runMs = Number(v['run-ms']);
const warmupMs = Number(v['warmup-ms']);
const say = (s: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

interface Named {
  label: string;
  target: Target;
}

const group = new ProcessGroup();
const refs: RefBuild[] = [];
let cluster: SimCluster | null = null;

async function cleanup(): Promise<void> {
  await group.stopAll();
  await cluster?.stop();
  for (const r of refs) r.remove();
}
process.on('SIGINT', () => void cleanup().finally(() => process.exit(130)));

function send(p: Proc, m: ProbeCommand): void {
  p.child.send(m);
}

async function main(): Promise<void> {
  cluster = await startCluster(base.format === 'vllm' ? { workers: Number(v.workers), port: 0, tokenIntervalMs: 0, format: 'vllm' } : { workers: Number(v.workers), port: 0, tokenIntervalMs: 0, incremental: base.incremental });
  const urls = cluster.workers().map((w) => w.url);
  const lgProc = group.spawnNode('load generator', join(BENCH_DIR, 'loadgen-main.ts'), []);
  await waitForMessage(lgProc, (m) => ((m as { type?: string })?.type === 'ready' ? true : undefined));

  const targets: Named[] = [];
  const flags = v['baton-flag'];
  const nodeFlags = v['node-flag'];
  targets.push({ label: 'baton', target: await startBaton(group, urls, { flags, nodeFlags }) });
  for (const spec of v.ref) {
    // REV, or REV+--flag+--flag=value: that build with flags of its own; `.` is this checkout.
    // REV+node:--flag: a Node flag of its own.
    const [rev, ...extra] = spec.split('+');
    const own = extra.filter((f) => !f.startsWith('node:'));
    const ownNode = extra.filter((f) => f.startsWith('node:')).map((f) => f.slice('node:'.length));
    const label = (name: string) => (extra.length > 0 ? `${name} ${extra.join(' ')}` : name);
    if (rev === '.') {
      targets.push({ label: label('baton'), target: await startBaton(group, urls, { flags: [...flags, ...own], nodeFlags: [...nodeFlags, ...ownNode] }) });
      continue;
    }
    const r = prepareRef(rev!);
    refs.push(r);
    targets.push({ label: label(`baton@${r.sha.slice(0, 7)}`), target: await startBaton(group, urls, { bin: r.bin, flags: [...flags, ...own], nodeFlags: [...nodeFlags, ...ownNode] }) });
  }
  if (v.bare) {
    const bareFlags = v['bare-node-flag'];
    targets.push({ label: bareFlags.length > 0 ? `bare ${bareFlags.join(' ')}` : 'bare', target: await startBare(group, urls, bareFlags) });
  }
  say(`${base.name}: ${targets.map((t) => `${t.label} (pid ${t.target.proc!.pid})`).join(', ')}; workers ${cluster.workers().map((w) => w.pid).join(', ')}`);
  if (v.pin) {
    for (const t of targets) pinProcess(t.target.proc!.pid, '1');
    for (const w of cluster.workers()) pinProcess(w.pid, '0');
    pinProcess(lgProc.pid, '0');
    pinProcess(process.pid, '0');
    say('pinned: proxies on CPU 1; workers, load generator and this process on CPU 0');
  }

  const perTarget = v.streams ? Number(v.streams) : base.concurrency;
  const w: Workload = { ...base, concurrency: v.solo ? perTarget : perTarget * targets.length };
  let id = 0;
  const run = async (order: Named[], durationMs: number, prefix: string): Promise<RunResult> => {
    const cmd: RunCommand = { type: 'run', id: ++id, urls: order.map((t) => t.target.urls[0]!), workload: w, durationMs, rampMs: 0, ridPrefix: prefix, record: false };
    lgProc.child.send(cmd);
    return waitForMessage(lgProc, (m) => ((m as RunResult)?.type === 'result' && (m as RunResult).id === cmd.id ? (m as RunResult) : undefined), durationMs + 120_000);
  };
  if (v.solo) return solo(targets, run);

  say(`paired warm-up ${warmupMs} ms, ${perTarget} streams per target`);
  await run(targets, warmupMs, 'warm');

  const profDir = startProfiles(targets);
  const perRun: number[][] = targets.map(() => []);
  const pooled = targets.map(() => ({ cpuUs: 0, ok: 0 }));
  for (let r = 0; r < runs; r++) {
    // Rotate which target gets each run's first request.
    const order = targets.map((_, i) => targets[(i + r) % targets.length]!);
    const cpu0 = order.map((t) => treeCpuMicros(t.target.proc!.pid));
    const io0 = order.map((t) => syscalls(t.target.proc!.pid));
    const res = await run(order, runMs, `pair-${r}`);
    // Reads and writes a request (all system calls of each kind, /proc/PID/io): how many frames
    // each one carried at this rate.
    const sys = order.map((t, i) => {
      const a = io0[i];
      const b = syscalls(t.target.proc!.pid);
      const ok = res.byUrl?.[i]?.ok ?? 0;
      return a && b && ok > 0 ? `${((b.reads - a.reads) / ok).toFixed(1)}+${((b.writes - a.writes) / ok).toFixed(1)}` : '?';
    });
    const us = order.map((t, i) => {
      const c = res.byUrl?.[i];
      const cpu = treeCpuMicros(t.target.proc!.pid) - cpu0[i]!;
      const p = pooled[targets.indexOf(t)]!;
      p.cpuUs += cpu;
      p.ok += c?.ok ?? 0;
      return c && c.ok > 0 ? cpu / c.ok : NaN;
    });
    const byTarget = targets.map((t) => us[order.indexOf(t)]!);
    byTarget.forEach((x, i) => perRun[i]!.push(x));
    const errors = res.errors ? `, errors ${res.errors} (${res.errorSamples[0]})` : '';
    say(`run ${r + 1}/${runs}: ${targets.map((t, i) => `${t.label} ${byTarget[i]!.toFixed(0)} µs/req (${sys[order.indexOf(t)]} reads+writes/req)`).join(', ')}; ` +
      `${targets.slice(1).map((t, i) => `baton / ${t.label} ${(byTarget[0]! / byTarget[i + 1]!).toFixed(3)}`).join(', ')}; ${res.ok} requests${errors}`);
  }
  console.log('');
  console.log(`${base.name}, ${runs} paired runs of ${runMs} ms, ${perTarget} streams per target${v.pin ? ', proxies pinned to CPU 1' : ''}:`);
  for (let i = 0; i < targets.length; i++) {
    const m = median(perRun[i]!);
    const pooledUs = (p: { cpuUs: number; ok: number }) => p.cpuUs / p.ok;
    const vs = i === 0 ? '' : `${versusBaton(targets, perRun, i)}, pooled ${(pooledUs(pooled[0]!) / pooledUs(pooled[i]!)).toFixed(3)})`;
    console.log(`  ${targets[i]!.label.padEnd(16)} median ${m?.toFixed(0)} µs/req, pooled ${pooledUs(pooled[i]!).toFixed(0)} (${pooled[i]!.ok} requests)${vs}`);
  }
  await stopProfiles(targets, profDir);
}

/** `; baton / <target i>: <run ratios> (median <m>` — the caller closes the parenthesis. */
function versusBaton(targets: Named[], perRun: number[][], i: number): string {
  const r = perRun[0]!.map((x, k) => x / perRun[i]![k]!);
  return `; baton / ${targets[i]!.label}: ${r.map((x) => x.toFixed(3)).join(', ')} (median ${median(r)!.toFixed(3)}`;
}

function startProfiles(targets: Named[]): string | null {
  const profDir = v.profile ? resolve(v.profile) : null;
  if (profDir) {
    mkdirSync(profDir, { recursive: true });
    for (const t of targets) send(t.target.proc!, { type: 'profile', on: true, heap: v['heap-profile'] });
  }
  return profDir;
}

async function stopProfiles(targets: Named[], profDir: string | null): Promise<void> {
  if (!profDir) return;
  for (const t of targets) {
    const file = join(profDir, `${base.name}-${t.label.replace(/[^A-Za-z0-9._-]+/g, '-')}.${v['heap-profile'] ? 'heapprofile' : 'cpuprofile'}`);
    send(t.target.proc!, { type: 'profile', on: false, file });
    const reply = await waitForMessage(t.target.proc!, (m) => ((m as ProfileReply)?.type === 'profile' ? (m as ProfileReply) : undefined), 60_000);
    if (!reply.file) {
      say(`${t.label}: no profile (${reply.error ?? 'none running'})`);
      continue;
    }
    console.log(`\n${t.label}: ${reply.file}`);
    console.log(v['heap-profile'] ? formatHeapTop(summarizeHeapProfile(reply.file), 30) : formatTop(summarizeProfile(reply.file), 25));
  }
}

/**
 * `--solo`: every target alone in turn under the workload's load, as the bench's own runs measure
 * them. A proxy's CPU per request depends on its rate (at a higher rate a read brings more frames
 * and a write carries more), so solo ratios differ from paired ones, which give every target the
 * same rate; the system calls per request (/proc/PID/io, reads and writes of every kind) show it.
 */
async function solo(targets: Named[], run: (order: Named[], ms: number, prefix: string) => Promise<RunResult>): Promise<void> {
  say(`solo warm-up ${warmupMs} ms per target, ${v.streams ?? base.concurrency} streams`);
  for (const t of targets) await run([t], warmupMs, `warm-${t.label}`);
  const profDir = startProfiles(targets);
  const perRun: number[][] = targets.map(() => []);
  for (let r = 0; r < runs; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length]!);
    const line: string[] = [];
    for (const t of order) {
      const pid = t.target.proc!.pid;
      const cpu0 = treeCpuMicros(pid);
      const io0 = syscalls(pid);
      const res = await run([t], runMs, `solo-${r}`);
      const cpu = treeCpuMicros(pid) - cpu0;
      const io1 = syscalls(pid);
      const us = res.ok > 0 ? cpu / res.ok : NaN;
      perRun[targets.indexOf(t)]!.push(us);
      const sys = io0 && io1 ? `, ${((io1.reads - io0.reads) / res.ok).toFixed(1)} reads + ${((io1.writes - io0.writes) / res.ok).toFixed(1)} writes a request` : '';
      line.push(`${t.label} ${us.toFixed(0)} µs/req (${(res.ok / (runMs / 1000)).toFixed(0)} req/s${sys})`);
    }
    say(`round ${r + 1}/${runs}: ${line.join('; ')}`);
  }
  console.log('');
  console.log(`${base.name}, ${runs} rounds of ${runMs} ms, each target alone, ${v.streams ?? base.concurrency} streams:`);
  for (let i = 0; i < targets.length; i++) {
    const vs = i === 0 ? '' : `${versusBaton(targets, perRun, i)})`;
    console.log(`  ${targets[i]!.label.padEnd(16)} median ${median(perRun[i]!)?.toFixed(0)} µs/req${vs}`);
  }
  await stopProfiles(targets, profDir);
}

try {
  await main();
} finally {
  await cleanup();
}
