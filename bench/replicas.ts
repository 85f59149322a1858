// The replicas bench (issue 31), apart from `baton bench`'s workloads: `baton bench --only replicas`.
//
//   W1 (64-token prompts, 32 tokens, 64 concurrent, workers as fast as they go) through
//   `baton router --replicas 1` and `--replicas 2`, alternating in the same run:
//   - the router's CPU per request (the primary and its replicas, every process of the tree):
//     2 replicas must cost within 1.1x of 1 (no cross-replica work on the request path);
//   - requests/s with the router the bottleneck, and each replica's share of them;
//   - the projection per router core: 1e6 / (CPU µs per request) requests/s;
//   - each layout's CPU while idle (health checks, load readings, spare-connection upkeep, the
//     metrics' event-loop sampling: per process, whatever the traffic), and the CPU per request
//     less that idle rate over the run, which is what a request itself costs.
//
//   node --import tsx bench/replicas.ts [--quick] [--out FILE]
import { writeFileSync, mkdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { startCluster } from '../sim/cluster.ts';
import { BATON_BIN, BENCH_DIR, ProcessGroup, waitForLine, waitForMessage } from './processes.ts';
import type { Target } from './targets.ts';
import { treeCpuMicros } from './proc.ts';
import { workloads } from './workloads.ts';
import type { LoadgenCommand, RunCommand, RunResult } from './loadgen.ts';
import { join } from 'node:path';

const { values: args } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
const quick = args.quick ?? false;
const say = (s: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

export interface ReplicasRow {
  replicas: number;
  cpuUsPerRequest: number;
  requestsPerS: number;
  requests: number;
  errors: number;
  /** Requests each replica served (its own /metrics), in index order. */
  perReplica: number[];
  /** The router's CPU while no request runs, µs per second. */
  idleUsPerS: number;
  /** CPU per request less the idle rate over the run's wall time. */
  cpuUsPerRequestLessIdle: number;
}

async function requestsServed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const line of text.split('\n')) if (line.startsWith('baton_requests_total{')) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}

async function replicaUrls(url: string): Promise<string[]> {
  return ((await (await fetch(`${url}/replicas`)).json()) as { replicas: { url: string }[] }).replicas.map((r) => r.url);
}

async function run(): Promise<ReplicasRow[]> {
  const group = new ProcessGroup();
  const cluster = await startCluster({ workers: 3, tokenIntervalMs: 0 });
  const lg = group.spawnNode('load generator', join(BENCH_DIR, 'loadgen-main.ts'), []);
  const counts = [1, 2];
  const routers = new Map<number, Target>();
  try {
    await waitForMessage(lg, (m) => ((m as { type?: string })?.type === 'ready' ? true : undefined));
    let id = 0;
    const load = async (cmd: Omit<RunCommand, 'type' | 'id'>) => {
      const msg: LoadgenCommand = { type: 'run', id: ++id, ...cmd };
      lg.child.send(msg);
      return waitForMessage(lg, (m) => ((m as RunResult)?.type === 'result' && (m as RunResult).id === msg.id ? (m as RunResult) : undefined), cmd.durationMs + 120_000);
    };
    const w1 = workloads({ streams: 1, w3IntervalMs: 1 }).W1;
    const urls = cluster.workers().map((w) => w.url);
    for (const n of counts) {
      // As targets.ts startBaton, with a longer start: each replica loads the sources through
      // tsx, which took over 30 s for two on a loaded 2-core machine.
      const proc = group.spawnNode('baton router', BATON_BIN, ['router', '--port', '0', '--replicas', String(n), ...urls.flatMap((w) => ['--worker', w])], { nodeFlags: ['--expose-gc'], stdout: true });
      const url = await waitForLine(proc, (line) => /listening on (http:\/\/\S+)/.exec(line)?.[1], 120_000);
      routers.set(n, { name: 'baton', urls: [url], proc, stop: () => group.stop(proc) });
    }
    const totals = new Map(counts.map((n) => [n, { cpu: 0, requests: 0, errors: 0, wallMs: 0, perReplica: new Array<number>(n).fill(0), idleUsPerS: 0 }]));
    const rounds = quick ? 2 : 4;
    const durationMs = quick ? 2500 : 5000;
    for (const n of counts) {
      say(`W1 warm-up, ${n} replica(s)`);
      await load({ urls: routers.get(n)!.urls, workload: w1, durationMs: quick ? 2000 : 6000, rampMs: 0, ridPrefix: `warm-r${n}`, record: false });
    }
    const idleMs = quick ? 2000 : 4000;
    for (const n of counts) {
      const t = routers.get(n)!;
      const cpu0 = treeCpuMicros(t.proc!.pid);
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, idleMs));
      totals.get(n)!.idleUsPerS = (treeCpuMicros(t.proc!.pid) - cpu0) / ((performance.now() - t0) / 1000);
      say(`idle, ${n} replica(s): ${totals.get(n)!.idleUsPerS.toFixed(0)} µs CPU/s`);
    }
    for (let r = 0; r < rounds; r++) {
      for (const n of r % 2 === 0 ? counts : [...counts].reverse()) {
        const t = routers.get(n)!;
        const own = n > 1 ? await replicaUrls(t.urls[0]!) : t.urls;
        const served0 = await Promise.all(own.map(requestsServed));
        const cpu0 = treeCpuMicros(t.proc!.pid);
        const res = await load({ urls: t.urls, workload: w1, durationMs, rampMs: 0, ridPrefix: `w1-r${n}-${r}`, record: false });
        const cpu = treeCpuMicros(t.proc!.pid) - cpu0;
        const served = (await Promise.all(own.map(requestsServed))).map((v, i) => v - served0[i]!);
        const tot = totals.get(n)!;
        tot.cpu += cpu;
        tot.requests += res.ok;
        tot.errors += res.errors;
        tot.wallMs += res.wallMs;
        served.forEach((v, i) => (tot.perReplica[i]! += v));
        say(`W1 round ${r}, ${n} replica(s): ${res.ok} requests, ${(res.ok / (res.wallMs / 1000)).toFixed(0)} req/s, ${(cpu / Math.max(1, res.ok)).toFixed(0)} µs CPU/request, per replica ${served.join(' / ')}`);
      }
    }
    return counts.map((n) => {
      const t = totals.get(n)!;
      const cpuLessIdle = t.cpu - (t.idleUsPerS * t.wallMs) / 1000;
      return { replicas: n, cpuUsPerRequest: t.cpu / Math.max(1, t.requests), requestsPerS: t.requests / (t.wallMs / 1000), requests: t.requests, errors: t.errors, perReplica: t.perReplica, idleUsPerS: t.idleUsPerS, cpuUsPerRequestLessIdle: cpuLessIdle / Math.max(1, t.requests) };
    });
  } finally {
    for (const t of routers.values()) await t.stop();
    await group.stop(lg);
    await cluster.stop();
  }
}

export function replicasTable(rows: ReplicasRow[], cores: number): string {
  const one = rows.find((r) => r.replicas === 1)!;
  const lines = [
    `W1 through \`baton router --replicas N\` (3 simulated workers, 64 concurrent requests, ${cores} cores shared by the load generator, the workers and the router):`,
    '',
    '| replicas | router CPU µs/request | vs 1 replica | idle CPU µs/s | µs/request less idle | vs 1 replica | requests/s | requests per replica | projection per router core (req/s) | errors |',
    '|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|',
  ];
  for (const r of rows) {
    lines.push(`| ${r.replicas} | ${r.cpuUsPerRequest.toFixed(0)} | ${(r.cpuUsPerRequest / one.cpuUsPerRequest).toFixed(2)}x | ${r.idleUsPerS.toFixed(0)} | ${r.cpuUsPerRequestLessIdle.toFixed(0)} | ${(r.cpuUsPerRequestLessIdle / one.cpuUsPerRequestLessIdle).toFixed(2)}x | ${r.requestsPerS.toFixed(0)} | ${r.perReplica.join(' / ')} | ${(1e6 / r.cpuUsPerRequestLessIdle).toFixed(0)} | ${r.errors} |`);
  }
  return lines.join('\n');
}

export function replicasVerdict(rows: ReplicasRow[]): string {
  const one = rows.find((r) => r.replicas === 1)!;
  const two = rows.find((r) => r.replicas === 2)!;
  const ratio = two.cpuUsPerRequest / one.cpuUsPerRequest;
  const less = two.cpuUsPerRequestLessIdle / one.cpuUsPerRequestLessIdle;
  return `replicas: CPU per request with 2 replicas ${ratio.toFixed(2)}x of 1 (target <= 1.1x): ${ratio <= 1.1 ? 'PASS' : 'FAIL'}; less the idle rate ${less.toFixed(2)}x: ${less <= 1.1 ? 'PASS' : 'FAIL'}; throughput ${(two.requestsPerS / one.requestsPerS).toFixed(2)}x`;
}

const rows = await run();
const table = replicasTable(rows, cpus().length);
console.log(`\n${table}\n\n${replicasVerdict(rows)}`);
if (args.out) {
  mkdirSync(join(args.out, '..'), { recursive: true });
  writeFileSync(args.out, JSON.stringify({ date: new Date().toISOString(), quick, rows }, null, 1));
}
if (rows.some((r) => r.errors > 0)) process.exitCode = 1;
