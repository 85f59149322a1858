// A P/D chaos campaign (`baton chaos --pd`): simulated SGLang workers in P/D roles (prefill and
// decode, sim/pd.ts), the router in its own process in P/D mode (docs/pd.md), seeded traffic, and
// a seeded schedule of faults over both legs: a prefill killed or hung before its rooms transfer,
// reset or refusing; a decode killed mid-stream, crashing after some tokens, reset, hung or slow.
// At most one worker of each role is faulty at a time, so every request has a pair to go on to.
// The verdict: every answer equals the fault-free reference and every request is answered (an
// error or a broken answer is a violation here), no room is ever seen twice by any worker (every
// worker's rooms, read from /_sim/rooms while it runs and just before each kill), no worker exits
// that no fault killed (a duplicate room crashes a worker, sglang#40125), no room issued twice in
// the trace rows, and each failed attempt blames the leg the fault hit.

import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import type { Fault } from '../sim/faults.ts';
import type { AttemptRow, RequestRow, TraceRow } from '../router/trace/row.ts';
import { campaignRouterConfig } from './campaign.ts';
import { sendRequest } from './client.ts';
import { sleep } from './faults.ts';
import { referenceAnswer, type Reference } from './reference.ts';
import { Rng } from './rng.ts';
import { startRouterProcess, type RouterProcess } from './router-proc.ts';
import type { PromptLists } from './sglang-client.ts';
import { planRequest, type RequestSpec } from './traffic.ts';
import { judgeClient, type RequestRecord } from './verify.ts';

export interface PdCampaignOptions {
  durationS: number;
  prefill: number;
  decode: number;
  concurrency: number;
  seed: number;
  /** Mean faults per second. */
  faultRate: number;
  tokenIntervalMs: number;
  maxNewTokens: number;
  /** The router's P/D first-token deadline in the campaign (docs/pd.md). */
  pdFirstTokenTimeoutMs?: number;
  log?: (line: string) => void;
  verbose?: boolean;
  keepDir?: string;
}

export type PdFaultKind = 'kill' | 'crash' | 'hang' | 'reset' | 'reject' | 'slow';

export interface PdFault {
  at: number;
  worker: number;
  role: 'prefill' | 'decode';
  kind: PdFaultKind;
  /** How long the fault lasts (a restart or a clear after it), ms. */
  forMs: number;
  /** crash: after this many more tokens. */
  afterTokens?: number;
}

export interface PdCampaignReport {
  options: PdCampaignOptions;
  elapsedS: number;
  requests: number;
  answered: number;
  tokenExact: number;
  errors: number;
  broken: number;
  migratedRequests: number;
  migrations: number;
  attempts: number;
  failedLeg: { prefill: number; decode: number };
  faults: Record<string, number>;
  /** Planned faults that could not start before the end (their role's workers still coming back). */
  faultsSkipped: number;
  rooms: { issued: number; seenByPrefills: number; seenByDecodes: number; duplicates: number; unplannedExits: number };
  violations: string[];
  violationCount: number;
}

/** After a fault's worker is back, the next fault of its role waits this long (health probes, an open circuit). */
const RECOVERY_MS = 3000;

/** SGLang's timeouts on the sim workers: far above the router's P/D deadline, so that the router's bound is what acts. */
const SIM_PD_TIMEOUT_MS = 20_000;

/** Faults by role: what can go wrong with a prefill before its rooms transfer, and with a decode mid-stream. */
const PREFILL_FAULTS: readonly PdFaultKind[] = ['kill', 'kill', 'hang', 'hang', 'reset', 'reject'];
const DECODE_FAULTS: readonly PdFaultKind[] = ['kill', 'kill', 'crash', 'reset', 'hang', 'slow'];

export function planPdFaults(o: Pick<PdCampaignOptions, 'seed' | 'durationS' | 'faultRate' | 'prefill' | 'decode'>): PdFault[] {
  const rng = new Rng(o.seed, 0x5d7a11);
  const out: PdFault[] = [];
  if (o.faultRate <= 0) return out;
  // The role's faulty worker must be back before the next fault of that role starts.
  const busyUntil = { prefill: 0, decode: 0 };
  let t = 2000;
  const end = o.durationS * 1000 - 3000;
  while (true) {
    t += Math.round(-Math.log(1 - rng.float()) * (1000 / o.faultRate));
    if (t >= end) break;
    const role = rng.chance(0.5) ? 'prefill' : 'decode';
    if (busyUntil[role] > t) continue;
    const n = role === 'prefill' ? o.prefill : o.decode;
    if (n < 2) continue;
    const worker = (role === 'prefill' ? 0 : o.prefill) + rng.int(0, n - 1);
    const kinds = role === 'prefill' ? PREFILL_FAULTS : DECODE_FAULTS;
    const kind = kinds[rng.int(0, kinds.length - 1)]!;
    const forMs = rng.int(1000, 4000);
    const f: PdFault = { at: t, worker, role, kind, forMs };
    if (kind === 'crash') f.afterTokens = rng.int(1, 40);
    out.push(f);
    // A crash happens when its tokens come: keep the role busy for a while after.
    busyUntil[role] = t + forMs + (kind === 'crash' ? 6000 : 1500);
  }
  return out;
}

export async function runPdCampaign(o: PdCampaignOptions): Promise<PdCampaignReport> {
  const log = o.log ?? (() => {});
  const violations: string[] = [];
  const violate = (v: string) => violations.push(v);
  const dir = mkdtempSync(join(tmpdir(), 'baton-chaos-pd-'));
  const traceFile = join(dir, 'traces.jsonl');
  const adminToken = randomBytes(16).toString('hex');
  const roles = [...Array<'prefill'>(o.prefill).fill('prefill'), ...Array<'decode'>(o.decode).fill('decode')];
  let cluster: SimCluster | null = null;
  let router: RouterProcess | null = null;
  let client: Pool | null = null;
  try {
    cluster = await startCluster({
      workers: roles.length,
      port: 0,
      roles,
      tokenIntervalMs: o.tokenIntervalMs,
      disaggregationBootstrapTimeoutMs: SIM_PD_TIMEOUT_MS,
      disaggregationWaitingTimeoutMs: SIM_PD_TIMEOUT_MS,
    });
    const c = cluster;
    const ws = c.workers();
    const prefillUrls = ws.filter((w) => w.role === 'prefill').map((w) => w.url);
    const decodeUrls = ws.filter((w) => w.role === 'decode').map((w) => w.url);
    const routerConfig = {
      ...campaignRouterConfig([], traceFile, adminToken),
      migrationLimit: 5,
      pdDisaggregation: true,
      prefill: prefillUrls,
      decode: decodeUrls,
      pdFirstTokenTimeoutMs: o.pdFirstTokenTimeoutMs ?? 3000,
    };
    router = await startRouterProcess(routerConfig);
    const url = router.url;
    log(`router ${url} (P/D: ${o.prefill} prefill, ${o.decode} decode), seed ${o.seed}`);

    // --- the rooms every worker sees, read while it runs and before each kill ----------------
    const roomsOf = ws.map(() => [] as string[]);
    const cursor = ws.map(() => ({ pid: 0, since: 0 }));
    // One read at a time per worker: two with the same cursor would count its rooms twice.
    const reading = ws.map(() => Promise.resolve());
    const readRooms = (i: number): Promise<void> => (reading[i] = reading[i]!.then(() => readRoomsNow(i)));
    const readRoomsNow = async (i: number) => {
      const w = c.workers()[i]!;
      if (!w.alive) return;
      if (cursor[i]!.pid !== w.pid) cursor[i] = { pid: w.pid, since: 0 };
      try {
        const r = (await (await fetch(`${w.url}/_sim/rooms?since=${cursor[i]!.since}`)).json()) as { total: number; rooms: string[] };
        if (cursor[i]!.pid !== w.pid) return;
        roomsOf[i]!.push(...r.rooms);
        cursor[i]!.since = r.total;
      } catch {
        // It died meanwhile: what it saw since the last read is lost (a crash fault's aftermath).
      }
    };
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await Promise.all(ws.map((_, i) => readRooms(i)));
        await sleep(500);
      }
    })();

    // --- workers that exit: only a fault may kill one ------------------------------------------
    const expectExit = ws.map(() => 0);
    let unplannedExits = 0;
    c.onChange((ch) => {
      if (ch.alive) return;
      if (expectExit[ch.index]! > 0) expectExit[ch.index]!--;
      else {
        unplannedExits++;
        violate(`worker ${ch.index} (${roles[ch.index]}) exited with no fault killing it (${ch.signal ?? `code ${ch.code}`}): a duplicate room crashes a worker`);
      }
    });

    // --- faults --------------------------------------------------------------------------------
    const plan = planPdFaults(o);
    const faultCounts: Record<string, number> = {};
    const t0 = Date.now();
    const tEnd = t0 + o.durationS * 1000;
    // Each fault on its own timer: a long one (a crash waiting for its tokens) delays no other.
    const applyFault = async (f: PdFault) => {
      const name = `${f.role} ${f.kind}`;
      faultCounts[name] = (faultCounts[name] ?? 0) + 1;
      if (o.verbose) log(`t=${((Date.now() - t0) / 1000).toFixed(1)}s ${name} on worker ${f.worker}${f.afterTokens ? ` after ${f.afterTokens} tokens` : ''} for ${f.forMs} ms`);
      try {
        if (f.kind === 'kill') {
          await readRooms(f.worker);
          expectExit[f.worker]!++;
          await c.kill(f.worker);
          await sleep(f.forMs);
          await c.restart(f.worker);
        } else if (f.kind === 'crash') {
          expectExit[f.worker]!++;
          await c.fault(f.worker, { kind: 'crash', afterTokens: f.afterTokens });
          // Back once it has crashed (or its crash given up after a while: no tokens came).
          const deadline = Date.now() + f.forMs + 5000;
          while (c.workers()[f.worker]!.alive && Date.now() < deadline) await sleep(100);
          if (c.workers()[f.worker]!.alive) {
            await c.fault(f.worker, { kind: 'clear' });
            expectExit[f.worker]!--;
          } else await c.restart(f.worker);
        } else {
          const fault: Fault = f.kind === 'slow' ? { kind: 'slow', intervalMs: 60 } : { kind: f.kind };
          await c.fault(f.worker, fault);
          if (f.kind !== 'reset') {
            await sleep(f.forMs);
            await c.fault(f.worker, { kind: 'clear' });
          }
        }
      } catch (err) {
        violate(`fault ${name} on worker ${f.worker}: ${(err as Error).message}`);
      }
    };
    // Faults of one role one after another: the next waits until every worker of its role is
    // back (a restart can take seconds on a loaded machine) and has been for a moment, so that
    // every request always has a pair to go on to. One that cannot start before the end is skipped.
    let skipped = 0;
    const roleWorkersUp = (role: 'prefill' | 'decode') => c.workers().every((w, i) => roles[i] !== role || w.alive);
    const faulting = Promise.all((['prefill', 'decode'] as const).map(async (role) => {
      for (const f of plan.filter((x) => x.role === role)) {
        await sleep(Math.max(0, t0 + f.at - Date.now()));
        while (!roleWorkersUp(role) && Date.now() < tEnd) await sleep(100);
        if (Date.now() > tEnd - 2000) {
          skipped++;
          continue;
        }
        await applyFault(f);
        while (!roleWorkersUp(role) && Date.now() < tEnd) await sleep(100);
        // The router takes its health interval to see a restarted worker; its circuit may be open.
        await sleep(RECOVERY_MS);
      }
    }));

    // --- traffic ---------------------------------------------------------------------------------
    client = new Pool(url, { connections: o.concurrency * 2 + 4, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
    const records: RequestRecord[] = [];
    const trafficOpts = { seed: o.seed, nonMigratableShare: 0, maxNewTokens: o.maxNewTokens, cancelShare: 0, badShare: 0 };
    let next = 0;
    let lastLog = Date.now();
    const one = async (spec: RequestSpec) => {
      const ref: Reference = referenceAnswer(spec);
      const inputs: PromptLists = {};
      for (const key of ['input_token_logprobs', 'input_top_logprobs'] as const) if (ref[key] !== undefined) inputs[key] = [JSON.stringify(ref[key])];
      const r = await sendRequest(spec, { dispatcher: client!, routerUrl: url, timeoutMs: 90_000, inputs });
      const rec = judgeClient(r, ref);
      if (rec.result !== 'answer') rec.violations.push(`not answered: ${rec.result}${rec.errorMessage ? ` (${rec.errorMessage})` : ''}`);
      records.push(rec);
    };
    const loop = async () => {
      while (Date.now() < tEnd) {
        await one(planRequest(trafficOpts, next++));
        if (Date.now() - lastLog > 10_000) {
          lastLog = Date.now();
          log(`t=${Math.round((Date.now() - t0) / 1000)}s: ${records.length} requests done, ${records.filter((r) => r.exact).length} exact, ${records.filter((r) => r.violations.length > 0).length} with violations`);
        }
      }
    };
    await Promise.all(Array.from({ length: o.concurrency }, loop));
    await faulting;
    const elapsedS = Math.round((Date.now() - t0) / 1000);
    polling = false;
    await poller;
    // Every worker up for the final read (a crash fault may have just restarted one).
    await sleep(300);
    await Promise.all(ws.map((_, i) => readRooms(i)));
    const simDuplicates = new Set<string>();
    for (const [i] of ws.entries()) {
      const st = c.workers()[i]!.alive ? await c.stats(i).catch(() => null) : null;
      for (const r of st?.pd?.duplicateRooms ?? []) simDuplicates.add(`${i}:${r}`);
    }

    // --- trace rows --------------------------------------------------------------------------------
    await router.stop();
    const rows = readFileSync(traceFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as TraceRow);
    if (o.keepDir) {
      mkdirSync(o.keepDir, { recursive: true });
      writeFileSync(join(o.keepDir, 'traces.jsonl'), readFileSync(traceFile));
      writeFileSync(join(o.keepDir, 'requests.jsonl'), records.map((r) => JSON.stringify(r)).join('\n') + '\n');
      writeFileSync(join(o.keepDir, 'faults.json'), JSON.stringify({ plan, t0, rooms: roomsOf.map((r) => r.length) }, null, 1));
    }
    const attempts = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
    const requests = rows.filter((r): r is RequestRow => r.kind === 'request');
    const issued = attempts.map((a) => a.bootstrap_room).filter((r): r is string => typeof r === 'string');
    const issuedTwice = issued.length - new Set(issued).size;
    if (issuedTwice > 0) violate(`trace: ${issuedTwice} bootstrap rooms issued to more than one attempt`);
    if (attempts.some((a) => !a.prefill_worker || !a.bootstrap_room)) violate(`trace: ${attempts.filter((a) => !a.prefill_worker || !a.bootstrap_room).length} attempts without a prefill leg or a room`);

    // Rooms on the workers: each at most once per worker (over all its lives), on one prefill and one decode.
    let duplicates = simDuplicates.size;
    const onRole = { prefill: new Map<string, number>(), decode: new Map<string, number>() };
    for (const [i, list] of roomsOf.entries()) {
      const seen = new Set<string>();
      for (const r of list) {
        if (seen.has(r)) {
          duplicates++;
          violate(`worker ${i} (${roles[i]}) saw bootstrap_room ${r} twice`);
          continue;
        }
        seen.add(r);
        const m = onRole[roles[i]!];
        m.set(r, (m.get(r) ?? 0) + 1);
      }
    }
    for (const role of ['prefill', 'decode'] as const) {
      for (const [r, n] of onRole[role]) {
        if (n > 1) {
          duplicates++;
          violate(`bootstrap_room ${r} reached ${n} ${role} workers`);
        }
      }
    }
    for (const d of simDuplicates) violate(`worker ${d.split(':')[0]} reports bootstrap_room ${d.split(':')[1]} seen twice`);

    for (const rec of records) for (const v of rec.violations) violate(`${rec.key}: ${v}`);
    const failedLeg = { prefill: attempts.filter((a) => a.failed_leg === 'prefill').length, decode: attempts.filter((a) => a.failed_leg === 'decode').length };
    const report: PdCampaignReport = {
      options: o,
      elapsedS,
      requests: records.length,
      answered: records.filter((r) => r.result === 'answer').length,
      tokenExact: records.filter((r) => r.exact).length,
      errors: records.filter((r) => r.result === 'error').length,
      broken: records.filter((r) => r.result === 'broken').length,
      migratedRequests: requests.filter((r) => r.migrations > 0).length,
      migrations: requests.reduce((n, r) => n + r.migrations, 0),
      attempts: attempts.length,
      failedLeg,
      faults: faultCounts,
      faultsSkipped: skipped,
      rooms: { issued: issued.length, seenByPrefills: onRole.prefill.size, seenByDecodes: onRole.decode.size, duplicates, unplannedExits },
      violations: violations.slice(0, 200),
      violationCount: violations.length,
    };
    return report;
  } finally {
    await client?.close().catch(() => {});
    await router?.stop().catch(() => {});
    await cluster?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

export function formatPdSummary(r: PdCampaignReport): string {
  const o = r.options;
  const lines: [string, string][] = [
    ['P/D cluster', `${o.prefill} prefill + ${o.decode} decode simulated SGLang workers, the router in P/D mode (seed ${o.seed})`],
    ['requests', `${r.requests} (${r.elapsedS} s, concurrency ${o.concurrency})`],
    ['answers', `${r.answered}, token-exact ${r.tokenExact}; errors ${r.errors}, broken ${r.broken}`],
    ['migrated requests', `${r.migratedRequests} (${r.migrations} migrations over ${r.attempts} attempts)`],
    ['failed legs', `prefill ${r.failedLeg.prefill}, decode ${r.failedLeg.decode}`],
    ['faults', `${Object.entries(r.faults).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}${r.faultsSkipped ? ` (${r.faultsSkipped} planned ones skipped: their role's workers were not back before the end)` : ''}`],
    ['rooms', `${r.rooms.issued} issued; seen by prefills ${r.rooms.seenByPrefills}, by decodes ${r.rooms.seenByDecodes}; duplicates ${r.rooms.duplicates}; unplanned worker exits ${r.rooms.unplannedExits}`],
    ['violations', String(r.violationCount)],
  ];
  const w = Math.max(...lines.map(([k]) => k.length));
  let out = lines.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
  if (r.violations.length > 0) out += '\n\n' + r.violations.slice(0, 30).map((v) => `  - ${v}`).join('\n');
  return out;
}
