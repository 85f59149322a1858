// `baton chaos --replicas N`: the router as `baton router --replicas N` (router/replicas/), seeded
// SGLang traffic judged token by token against the fault-free reference (chaos/verify.ts
// judgeClient), workers killed (kill -9) and restarted, and one replica SIGKILLed mid-traffic.
//
// What it holds (docs/replicas.md "Chaos"):
// - the dead replica's clients get a connection error or an in-band error, never a hang: every
//   request has a client deadline, and a request that reaches it is a violation;
// - every other request ends as the single-router campaign demands (0 violations);
// - the primary restarts the replica (a new pid and epoch) within RESTART_LIMIT_MS;
// - after each worker kill, the continuations each survivor received (the herding figure).
// The dashboard hub's checks plug in through `hooks` (ReplicaCampaignHooks).
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { sendRequest } from './client.ts';
import { judgeClient, type RequestRecord } from './verify.ts';
import { planUnit, type TrafficOptions } from './traffic.ts';
import { referenceFor } from './reference.ts';
import { Rng } from './rng.ts';
import type { ReplicaEntry } from '../router/replicas/identity.ts';
import type { AttemptRow } from '../router/trace/row.ts';

const BIN = fileURLToPath(new URL('../bin/baton.js', import.meta.url));
/** A request still open after this long hangs: the router failed to end it. */
const CLIENT_TIMEOUT_MS = 60_000;
/** The primary must have the replica back within this long. */
const RESTART_LIMIT_MS = 30_000;
/** Connection errors ending this long after a replica's SIGKILL are that replica's clients'. */
const KILL_WINDOW_MS = 2_000;
/**
 * A request sent this soon after the SIGKILL may still go out on a keep-alive connection the dead
 * replica held: the kernel has reset it, but the client learns so only when it writes (ECONNRESET).
 * That client is the dead replica's too.
 */
const SEND_RACE_MS = 500;
/** Continuations started this long after a worker kill make up its burst. */
const BURST_WINDOW_MS = 2_000;

export interface ReplicaCampaignOptions {
  durationS: number;
  workers: number;
  replicas: number;
  concurrency: number;
  seed: number;
  tokenIntervalMs: number;
  maxNewTokens: number;
  /** Worker kills over the run (kill -9, restarted 2 s later). */
  workerKills: number;
  log(line: string): void;
  hooks?: ReplicaCampaignHooks;
}

/**
 * Where the dashboard hub's checks plug in (it is built on its own): told the router's shared url
 * at the start and each replica SIGKILL as it happens, and asked at the end for its own
 * findings (e.g. "marked lost within 2 s", "merged counts equal the replicas' /traces"), which
 * the report carries and whose violations count.
 */
export interface ReplicaCampaignHooks {
  start?(routerUrl: string): Promise<void> | void;
  replicaKilled?(replica: ReplicaEntry, at: number): void;
  finish?(replicasAtEnd: ReplicaEntry[]): Promise<{ checks: Record<string, unknown>; violations: string[] }>;
}

export interface ContinuationBurst {
  /** The worker killed, and when. */
  killed: string;
  at: number;
  /** Continuations each survivor received within BURST_WINDOW_MS, by worker url. */
  bySurvivor: Record<string, number>;
  /** The largest survivor's share over an even share (1: perfectly even). */
  peakOverEven: number;
}

export interface ReplicaCampaignReport {
  options: Omit<ReplicaCampaignOptions, 'log' | 'hooks'>;
  requests: number;
  answered: number;
  tokenExact: number;
  errors: number;
  cancelled: number;
  /** Requests that reached the client deadline: must be 0. */
  hangs: number;
  replicaKill: { index: number; id: string; pid: number; epochBefore: number; epochAfter: number | null; restartedAfterMs: number | null; connectionErrors: number; inBandErrors: number } | null;
  workerKills: number;
  bursts: ContinuationBurst[];
  hub: Record<string, unknown> | null;
  violationCount: number;
  violations: string[];
}

export async function runReplicaCampaign(o: ReplicaCampaignOptions): Promise<ReplicaCampaignReport> {
  const violations: string[] = [];
  const cluster: SimCluster = await startCluster({ workers: o.workers, port: 0, tokenIntervalMs: o.tokenIntervalMs });
  let router: { url: string; proc: ChildProcess; output: string[] } | null = null;
  let client: Pool | null = null;
  try {
    router = await spawnReplicas(o.replicas, cluster.workers().map((w) => w.url));
    const url = router.url;
    const initial = await replicas(url);
    o.log(`router ${url}: ${initial.length} replicas (${initial.map((r) => `${r.index}: pid ${r.pid}`).join(', ')}); workers ${cluster.workers().map((w) => w.url).join(', ')}`);
    await o.hooks?.start?.(url);
    client = new Pool(url, { connections: o.concurrency * 2, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
    const traffic: TrafficOptions = { seed: o.seed, nonMigratableShare: 0.05, maxNewTokens: o.maxNewTokens, cancelShare: 0.05, badShare: 0, sharedHeaderShare: 0, prefixShare: 0, format: 'sglang' };
    const rng = new Rng(o.seed, 0x7e91ca5);
    const durationMs = o.durationS * 1000;
    const t0 = Date.now();
    const tEnd = t0 + durationMs;
    const records: RequestRecord[] = [];
    const transports = new Map<RequestRecord, string | null>();
    let next = 0;

    const loop = async () => {
      while (Date.now() < tEnd) {
        for (const spec of planUnit(traffic, next++)) {
          const r = await sendRequest(spec, { dispatcher: client!, routerUrl: url, timeoutMs: CLIENT_TIMEOUT_MS, inputs: {}, cancelAfterChunks: spec.cancelAfterChunks });
          const rec = judgeClient(r, referenceFor(spec));
          transports.set(rec, r.transport ?? null);
          records.push(rec);
        }
      }
    };

    // Worker kills, evenly over the run (never the last alive one), each restarted 2 s later.
    const kills: { url: string; at: number }[] = [];
    const workerFaults = (async () => {
      for (let k = 0; k < o.workerKills; k++) {
        await sleepUntil(t0 + (durationMs * (k + 1)) / (o.workerKills + 1) - 400);
        const alive = cluster.workers().filter((w) => w.alive);
        if (alive.length < 2 || Date.now() >= tEnd) continue;
        const w = alive[rng.int(0, alive.length - 1)]!;
        kills.push({ url: w.url, at: Date.now() });
        o.log(`t=${((Date.now() - t0) / 1000).toFixed(1)}s kill -9 worker ${w.index} (${w.url})`);
        await cluster.kill(w.index);
        await sleepUntil(Date.now() + 2_000);
        await cluster.restart(w.index);
      }
    })();

    // One replica SIGKILLed halfway, and its return awaited.
    let replicaKill: ReplicaCampaignReport['replicaKill'] = null;
    const replicaFault = (async () => {
      await sleepUntil(t0 + durationMs / 2);
      const list = await replicas(url);
      const victim = list[rng.int(0, list.length - 1)]!;
      const at = Date.now();
      process.kill(victim.pid, 'SIGKILL');
      o.hooks?.replicaKilled?.(victim, at);
      o.log(`t=${((at - t0) / 1000).toFixed(1)}s SIGKILL replica ${victim.index} (id ${victim.id}, pid ${victim.pid})`);
      replicaKill = { index: victim.index, id: victim.id, pid: victim.pid, epochBefore: victim.epoch, epochAfter: null, restartedAfterMs: null, connectionErrors: 0, inBandErrors: 0 };
      while (Date.now() - at < RESTART_LIMIT_MS) {
        await sleepUntil(Date.now() + 100);
        const back = (await replicas(url).catch(() => []))[victim.index];
        if (back && back.state === 'up' && back.pid !== victim.pid) {
          replicaKill.epochAfter = back.epoch;
          replicaKill.restartedAfterMs = Date.now() - at;
          o.log(`replica ${victim.index} back after ${replicaKill.restartedAfterMs} ms: pid ${back.pid}, epoch ${back.epoch}`);
          break;
        }
      }
      return at;
    })();

    await Promise.all([...Array.from({ length: o.concurrency }, loop), workerFaults]);
    const killedAt = await replicaFault;

    // --- judge ---------------------------------------------------------------------------------
    let hangs = 0;
    for (const rec of records) {
      const transport = transports.get(rec);
      if (transport?.startsWith('no end after')) {
        hangs++;
        violations.push(`${rec.key}: hung (${transport}); a client of a dead replica must get an error`);
        continue;
      }
      // The dead replica's clients: their connection was reset, or an in-band error ended them.
      const inKill = rec.endedAt >= killedAt && rec.endedAt <= killedAt + KILL_WINDOW_MS && rec.startedAt <= killedAt + SEND_RACE_MS;
      if (inKill && replicaKill && rec.result === 'broken') {
        (replicaKill as { connectionErrors: number }).connectionErrors++;
        continue;
      }
      if (inKill && replicaKill && rec.result === 'error' && rec.errorInBand) (replicaKill as { inBandErrors: number }).inBandErrors++;
      for (const v of rec.violations) violations.push(`${rec.key}: ${v}`);
    }
    const rk = replicaKill as ReplicaCampaignReport['replicaKill'];
    if (!rk) violations.push('no replica was killed');
    else if (rk.restartedAfterMs === null) violations.push(`replica ${rk.index} was not back within ${RESTART_LIMIT_MS} ms of its SIGKILL`);
    else if (rk.epochAfter !== rk.epochBefore + 1) violations.push(`replica ${rk.index} came back with epoch ${rk.epochAfter}, not ${rk.epochBefore + 1}`);

    // --- herding: continuations per survivor after each worker kill (the live replicas' rows) ----
    const end = await replicas(url);
    const rows: AttemptRow[] = [];
    for (const r of end) if (r.state === 'up') rows.push(...(await attemptRows(r.url)));
    const bursts = kills.map((k) => burstOf(k, rows, cluster.workers().map((w) => w.url)));

    let hub: ReplicaCampaignReport['hub'] = null;
    if (o.hooks?.finish) {
      const h = await o.hooks.finish(end);
      hub = h.checks;
      violations.push(...h.violations.map((v) => `hub: ${v}`));
    }
    return {
      options: { durationS: o.durationS, workers: o.workers, replicas: o.replicas, concurrency: o.concurrency, seed: o.seed, tokenIntervalMs: o.tokenIntervalMs, maxNewTokens: o.maxNewTokens, workerKills: o.workerKills },
      requests: records.length,
      answered: records.filter((r) => r.result === 'answer').length,
      tokenExact: records.filter((r) => r.exact).length,
      errors: records.filter((r) => r.result === 'error').length,
      cancelled: records.filter((r) => r.result === 'cancelled').length,
      hangs,
      replicaKill: rk,
      workerKills: kills.length,
      bursts,
      hub,
      violationCount: violations.length,
      violations,
    };
  } finally {
    await client?.close().catch(() => undefined);
    if (router) await stopProc(router.proc);
    await cluster.stop();
  }
}

/** The continuations started on each survivor within BURST_WINDOW_MS of a worker kill. */
export function burstOf(kill: { url: string; at: number }, rows: readonly AttemptRow[], workers: readonly string[]): ContinuationBurst {
  const survivors = workers.filter((w) => w !== kill.url);
  const bySurvivor: Record<string, number> = Object.fromEntries(survivors.map((w) => [w, 0]));
  for (const r of rows) {
    if (r.attempt > 0 && r.started_at >= kill.at && r.started_at < kill.at + BURST_WINDOW_MS && r.worker in bySurvivor) bySurvivor[r.worker]!++;
  }
  const counts = Object.values(bySurvivor);
  const total = counts.reduce((a, b) => a + b, 0);
  const peakOverEven = total === 0 ? 0 : Math.round((Math.max(...counts) / (total / counts.length)) * 100) / 100;
  return { killed: kill.url, at: kill.at, bySurvivor, peakOverEven };
}

export function formatReplicaSummary(r: ReplicaCampaignReport): string {
  const lines = [
    `chaos --replicas ${r.options.replicas}: seed ${r.options.seed}, ${r.options.durationS} s, ${r.options.workers} workers, concurrency ${r.options.concurrency}`,
    `requests ${r.requests}: answered ${r.answered} (token-exact ${r.tokenExact}), errors ${r.errors}, cancelled ${r.cancelled}, hangs ${r.hangs}`,
  ];
  const k = r.replicaKill;
  if (k) lines.push(`replica ${k.index} (id ${k.id}) SIGKILLed: its clients got ${k.connectionErrors} connection errors and ${k.inBandErrors} in-band errors; back ${k.restartedAfterMs === null ? 'NEVER' : `after ${k.restartedAfterMs} ms with epoch ${k.epochAfter}`}`);
  lines.push(`worker kills ${r.workerKills}; continuation burst per survivor (${BURST_WINDOW_MS} ms after each kill):`);
  for (const b of r.bursts) lines.push(`  ${b.killed} killed: ${Object.entries(b.bySurvivor).map(([w, n]) => `${w} ${n}`).join(', ')} (peak / even ${b.peakOverEven})`);
  if (r.hub) lines.push(`hub: ${JSON.stringify(r.hub)}`);
  lines.push(`violations: ${r.violationCount}`);
  for (const v of r.violations.slice(0, 20)) lines.push(`  ${v}`);
  return lines.join('\n');
}

async function spawnReplicas(n: number, workers: string[]): Promise<{ url: string; proc: ChildProcess; output: string[] }> {
  const args = [BIN, 'router', '--port', '0', '--replicas', String(n), '--health-interval-ms', '500', '--inter-token-timeout-ms', '3000', '--first-token-timeout-ms', '10000', '--bench-ms', '2000', ...workers.flatMap((w) => ['--worker', w])];
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the router did not start within 60 s:\n${output.join('')}`)), 60_000);
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      output.push(line);
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => reject(new Error(`the router exited with ${code}:\n${output.join('\n')}`)));
  });
  return { url, proc, output };
}

async function replicas(url: string): Promise<ReplicaEntry[]> {
  const res = await fetch(`${url}/replicas`, { signal: AbortSignal.timeout(5_000) });
  return ((await res.json()) as { replicas: ReplicaEntry[] }).replicas;
}

async function attemptRows(url: string): Promise<AttemptRow[]> {
  const text = await (await fetch(`${url}/traces?format=jsonl&kind=attempt`)).text();
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as AttemptRow);
}

async function stopProc(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const forced = setTimeout(() => proc.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(forced);
}

function sleepUntil(t: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));
}
