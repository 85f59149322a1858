// The replicas bench, apart from `baton bench`'s workloads: `baton bench --only replicas`.
//
// A Node process's CPU per request depends on its own load: the busier it is, the more frames
// share each wake-up, read and `writev`. So the two questions are asked apart:
//
//   - Cross-replica cost (the target: 2 replicas within 1.1x of 1): the same load per replica.
//     The workers pace their tokens (2 ms apart) so that nothing saturates; 1 replica carries 16
//     concurrent W1 requests, 2 replicas carry 2 x 16. Any work a replica does because another
//     exists shows as CPU per request above 1 replica's. The same 16 requests split over 2
//     replicas (8 each) are measured too: that costs more per request by the batching alone.
//   - Throughput with the router the bottleneck: workers as fast as they go, 64 concurrent,
//     through 1 and 2 replicas, with each replica's share; the projection per router core is
//     1e6 / (CPU µs per request) at 1 replica's saturation.
//
// The router's CPU is read over its whole process tree (the primary and its replicas), in rounds
// that alternate the layouts after a warm-up. Each layout's idle CPU (no traffic, after the
// warm-up has settled) is reported beside it: every router process has work of its own whatever
// the traffic (health checks, load readings, spare-connection upkeep, event-loop sampling).
//
// With `--policy cache_aware`, 2 replicas also share their prefixes (docs/replicas.md, "What
// replicas share"): the paced ratio of 2 replicas to 1 then includes that cost.
//
//   node --import tsx bench/replicas.ts [--quick] [--out FILE] [--policy NAME] [--phase paced|saturated]
import { writeFileSync, mkdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { startCluster } from '../sim/cluster.ts';
import { BATON_BIN, BENCH_DIR, ProcessGroup, waitForLine, waitForMessage } from './processes.ts';
import { startBare, type Target } from './targets.ts';
import { treeCpuMicros } from './proc.ts';
import { workloads } from './workloads.ts';
import type { LoadgenCommand, RunCommand, RunResult } from './loadgen.ts';

const { values: args } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' }, policy: { type: 'string' }, phase: { type: 'string' } } });
const quick = args.quick ?? false;
if (args.phase !== undefined && args.phase !== 'paced' && args.phase !== 'saturated') throw new Error(`--phase must be paced or saturated, got ${args.phase}`);
/** The router's --policy (its default when not given). */
const policyArgs = args.policy === undefined ? [] : ['--policy', args.policy];
const say = (s: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

/** One measured layout: a router of `replicas` processes under `concurrency` W1 requests. */
export interface ReplicasRow {
  phase: 'paced' | 'saturated';
  target: Layout['target'];
  replicas: number;
  concurrency: number;
  cpuUsPerRequest: number;
  requestsPerS: number;
  requests: number;
  errors: number;
  /** Requests each replica served (its own /metrics), in index order. */
  perReplica: number[];
  /** The router's CPU while no request runs, µs per second. */
  idleUsPerS: number;
}

interface Layout {
  /** `bare`: bare Node proxies (bench/targets.ts), one per "replica", sharing nothing: the control. */
  target: 'baton' | 'bare';
  replicas: number;
  concurrency: number;
}

const PACED_MS = 2;
const PACED: Layout[] = [
  { target: 'baton', replicas: 1, concurrency: 16 },
  { target: 'baton', replicas: 2, concurrency: 32 },
  { target: 'baton', replicas: 2, concurrency: 16 },
  { target: 'bare', replicas: 1, concurrency: 16 },
];
const SATURATED: Layout[] = [
  { target: 'baton', replicas: 1, concurrency: 64 },
  { target: 'baton', replicas: 2, concurrency: 64 },
  { target: 'bare', replicas: 1, concurrency: 64 },
  { target: 'bare', replicas: 2, concurrency: 64 },
];

const keyOf = (l: Layout) => `${l.target}${l.replicas}`;

async function requestsServed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const line of text.split('\n')) if (line.startsWith('baton_requests_total{')) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}

async function replicaUrls(url: string): Promise<string[]> {
  return ((await (await fetch(`${url}/replicas`)).json()) as { replicas: { url: string }[] }).replicas.map((r) => r.url);
}

async function phase(group: ProcessGroup, lg: ReturnType<ProcessGroup['spawnNode']>, nextId: () => number, name: ReplicasRow['phase'], layouts: Layout[]): Promise<ReplicasRow[]> {
  const tokenIntervalMs = name === 'paced' ? PACED_MS : 0;
  const cluster = await startCluster({ workers: 3, tokenIntervalMs });
  const targets = new Map<string, Target[]>();
  try {
    const load = async (cmd: Omit<RunCommand, 'type' | 'id'>) => {
      const msg: LoadgenCommand = { type: 'run', id: nextId(), ...cmd };
      lg.child.send(msg);
      return waitForMessage(lg, (m) => ((m as RunResult)?.type === 'result' && (m as RunResult).id === msg.id ? (m as RunResult) : undefined), cmd.durationMs + 120_000);
    };
    const base = workloads({ streams: 1, w3IntervalMs: 1 }).W1;
    const workload = (l: Layout) => ({ ...base, concurrency: l.concurrency, tokenIntervalMs });
    const urls = cluster.workers().map((w) => w.url);
    for (const l of layouts) {
      if (targets.has(keyOf(l))) continue;
      if (l.target === 'bare') {
        targets.set(keyOf(l), await Promise.all(Array.from({ length: l.replicas }, () => startBare(group, urls))));
        continue;
      }
      // As targets.ts startBaton, with a longer start: each replica loads the sources through
      // tsx, which took over 30 s for two on a loaded 2-core machine.
      const proc = group.spawnNode('baton router', BATON_BIN, ['router', '--port', '0', '--replicas', String(l.replicas), ...policyArgs, ...urls.flatMap((w) => ['--worker', w])], { nodeFlags: ['--expose-gc'], stdout: true });
      const url = await waitForLine(proc, (line) => /listening on (http:\/\/\S+)/.exec(line)?.[1], 120_000);
      targets.set(keyOf(l), [{ name: 'baton', urls: [url], proc, stop: () => group.stop(proc) }]);
    }
    // Paced, the load goes to each replica's own URL (GET /replicas; each serves the data plane
    // too), round-robin: exactly 1 replica's load each. On the shared port node:cluster's shared
    // accept queue (Node 20) spreads a few keep-alive connections unevenly (docs/replicas.md).
    const own = new Map<string, string[]>();
    for (const l of layouts) if (l.target === 'baton' && l.replicas > 1) own.set(keyOf(l), await replicaUrls(targets.get(keyOf(l))![0]!.urls[0]!));
    const urlsOf = (l: Layout) => (name === 'paced' && own.has(keyOf(l)) ? own.get(keyOf(l))! : targets.get(keyOf(l))!.flatMap((t) => t.urls));
    const cpuOf = (l: Layout) => targets.get(keyOf(l))!.reduce((n, t) => n + treeCpuMicros(t.proc!.pid), 0);
    const rows = layouts.map((l) => ({ phase: name, ...l, cpu: 0, requests: 0, errors: 0, wallMs: 0, perReplica: new Array<number>(l.target === 'bare' ? 0 : l.replicas).fill(0), idleUsPerS: 0 }));
    for (const l of layouts) {
      say(`${name}: warm-up, ${keyOf(l)}, ${l.concurrency} concurrent`);
      await load({ urls: urlsOf(l), workload: workload(l), durationMs: quick ? 2000 : 6000, rampMs: 0, ridPrefix: `warm-${name}-${keyOf(l)}-c${l.concurrency}`, record: false });
    }
    // Idle: after the warm-up has settled (its garbage collected, its compilations done).
    await new Promise((r) => setTimeout(r, 2000));
    const idle = new Map<string, number>();
    for (const l of layouts) {
      if (idle.has(keyOf(l))) continue;
      const cpu0 = cpuOf(l);
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, quick ? 2000 : 4000));
      idle.set(keyOf(l), (cpuOf(l) - cpu0) / ((performance.now() - t0) / 1000));
      say(`${name}: idle, ${keyOf(l)}: ${idle.get(keyOf(l))!.toFixed(0)} µs CPU/s`);
    }
    const rounds = quick ? 2 : 4;
    const durationMs = quick ? 2500 : 5000;
    for (let r = 0; r < rounds; r++) {
      for (const i of r % 2 === 0 ? layouts.keys() : [...layouts.keys()].reverse()) {
        const l = layouts[i]!;
        const counted = l.target === 'bare' ? [] : (own.get(keyOf(l)) ?? urlsOf(l));
        const served0 = await Promise.all(counted.map(requestsServed));
        const cpu0 = cpuOf(l);
        const res = await load({ urls: urlsOf(l), workload: workload(l), durationMs, rampMs: 0, ridPrefix: `${name}-${keyOf(l)}-c${l.concurrency}-${r}`, record: false });
        const cpu = cpuOf(l) - cpu0;
        const served = (await Promise.all(counted.map(requestsServed))).map((v, j) => v - served0[j]!);
        const row = rows[i]!;
        row.cpu += cpu;
        row.requests += res.ok;
        row.errors += res.errors;
        row.wallMs += res.wallMs;
        served.forEach((v, j) => (row.perReplica[j]! += v));
        say(`${name} round ${r}, ${keyOf(l)}, ${l.concurrency} concurrent: ${res.ok} requests, ${(res.ok / (res.wallMs / 1000)).toFixed(0)} req/s, ${(cpu / Math.max(1, res.ok)).toFixed(0)} µs CPU/request, per replica ${served.join(' / ')}`);
      }
    }
    return rows.map((t) => ({ phase: t.phase, target: t.target, replicas: t.replicas, concurrency: t.concurrency, cpuUsPerRequest: t.cpu / Math.max(1, t.requests), requestsPerS: t.requests / (t.wallMs / 1000), requests: t.requests, errors: t.errors, perReplica: t.perReplica, idleUsPerS: idle.get(keyOf(t))! }));
  } finally {
    for (const ts of targets.values()) for (const t of ts) await t.stop();
    await cluster.stop();
  }
}

async function run(): Promise<ReplicasRow[]> {
  const group = new ProcessGroup();
  const lg = group.spawnNode('load generator', join(BENCH_DIR, 'loadgen-main.ts'), []);
  let id = 0;
  try {
    await waitForMessage(lg, (m) => ((m as { type?: string })?.type === 'ready' ? true : undefined));
    const rows: ReplicasRow[] = [];
    if (args.phase !== 'saturated') rows.push(...(await phase(group, lg, () => ++id, 'paced', PACED)));
    if (args.phase !== 'paced') rows.push(...(await phase(group, lg, () => ++id, 'saturated', SATURATED)));
    return rows;
  } finally {
    await group.stop(lg);
  }
}

const find = (rows: ReplicasRow[], p: ReplicasRow['phase'], target: Layout['target'], replicas: number, concurrency: number) =>
  rows.find((r) => r.phase === p && r.target === target && r.replicas === replicas && r.concurrency === concurrency)!;
const has = (rows: ReplicasRow[], p: ReplicasRow['phase']) => rows.some((r) => r.phase === p);

export function replicasTable(rows: ReplicasRow[], cores: number): string {
  const lines = [
    `W1 (64-token prompts, 32 tokens) through \`baton router --replicas N${policyArgs.length ? ` ${policyArgs.join(' ')}` : ''}\` and through N bare Node proxies (3 simulated workers; ${cores} cores shared by the load generator, the workers and the proxies):`,
    '',
    '| workers | proxy | processes | concurrent (per process) | CPU µs/request | vs 1 process | requests/s | vs 1 process | requests per replica | idle CPU µs/s | errors |',
    '|---|---|--:|--:|--:|--:|--:|--:|---|--:|--:|',
  ];
  for (const r of rows) {
    const one = r.phase === 'paced' ? find(rows, 'paced', r.target, 1, 16) : find(rows, 'saturated', r.target, 1, 64);
    const proxy = r.target === 'baton' ? 'baton --replicas' : 'bare Node';
    lines.push(`| ${r.phase === 'paced' ? `paced, ${PACED_MS} ms/token` : 'as fast as they go'} | ${proxy} | ${r.replicas} | ${r.concurrency} (${r.concurrency / r.replicas}) | ${r.cpuUsPerRequest.toFixed(0)} | ${(r.cpuUsPerRequest / one.cpuUsPerRequest).toFixed(2)}x | ${r.requestsPerS.toFixed(0)} | ${(r.requestsPerS / one.requestsPerS).toFixed(2)}x | ${r.perReplica.join(' / ') || '-'} | ${r.idleUsPerS.toFixed(0)} | ${r.errors} |`);
  }
  if (has(rows, 'saturated')) {
    const sat = find(rows, 'saturated', 'baton', 1, 64);
    lines.push('', `Projection per router core at 1 replica's saturation: ${(1e6 / sat.cpuUsPerRequest).toFixed(0)} W1 requests/s (1e6 / ${sat.cpuUsPerRequest.toFixed(0)} µs).`);
  }
  return lines.join('\n');
}

export function replicasVerdict(rows: ReplicasRow[]): string {
  const ratio = (p: ReplicasRow['phase'], t: Layout['target'], n: number, c: number, c1: number) => find(rows, p, t, n, c).cpuUsPerRequest / find(rows, p, t, 1, c1).cpuUsPerRequest;
  const out: string[] = [];
  if (has(rows, 'paced')) {
    const same = ratio('paced', 'baton', 2, 32, 16);
    out.push(`replicas: CPU per request with 2 replicas, each at 1 replica's load, ${same.toFixed(2)}x of 1 (target <= 1.1x, no cross-replica cost): ${same <= 1.1 ? 'PASS' : 'FAIL'}`);
  }
  if (has(rows, 'paced') && has(rows, 'saturated')) {
    const tput = find(rows, 'saturated', 'baton', 2, 64).requestsPerS / find(rows, 'saturated', 'baton', 1, 64).requestsPerS;
    out.push(`replicas: the same load split over 2 processes, CPU per request: paced ${ratio('paced', 'baton', 2, 16, 16).toFixed(2)}x; saturated ${ratio('saturated', 'baton', 2, 64, 64).toFixed(2)}x for baton, ${ratio('saturated', 'bare', 2, 64, 64).toFixed(2)}x for bare Node proxies that share nothing (the control); throughput with 2 replicas ${tput.toFixed(2)}x`);
  }
  return out.join('\n');
}

const rows = await run();
const table = replicasTable(rows, cpus().length);
console.log(`\n${table}\n\n${replicasVerdict(rows)}`);
if (args.out) {
  mkdirSync(join(args.out, '..'), { recursive: true });
  writeFileSync(args.out, JSON.stringify({ date: new Date().toISOString(), quick, rows }, null, 1));
}
if (rows.some((r) => r.errors > 0)) process.exitCode = 1;
