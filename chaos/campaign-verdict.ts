// A chaos campaign's verdict (chaos/campaign.ts), once its traffic has ended: everything settles
// (faults cleared, nothing left in flight, discovery agreeing with the pods), then the router's
// memory, the trace file against the requests sent, every request against the rules, and the
// benchings the router reported against the faults injected. Each broken rule is a violation.

import { mkdirSync, copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AttemptRow, TraceRow } from '../router/trace/row.ts';
import { adminJson, metric, waitFor, type CampaignResources, type CampaignRouter, type CampaignWorkers } from './campaign-cluster.ts';
import { ROUTER_HAS_CLIENT_WRITE_TIMEOUT, type CampaignSettings } from './campaign-config.ts';
import type { CampaignRun } from './campaign-drive.ts';
import type { CampaignReport } from './campaign-report.ts';
import { drainViolations, type K8sChaos, K8S_RELIST_MS, K8S_WATCHDOG_MS } from './k8s.ts';
import type { MemorySample } from './router-proc.ts';
import type { ClientKind, WireFormat } from './traffic.ts';
import {
  benchedByClientMistake,
  benchingsOf,
  FAULT_LEAD_MS,
  faultAftermathMs,
  groupRows,
  judgeNeverReader,
  judgePaced,
  judgeUnknownKey,
  judgeTrace,
  outages,
  refusedAtAdmission,
  sharedWorkerAtCancel,
  splitShared,
  unexplainedBreakage,
  type Benching,
  type ClientMistakeBench,
  type FaultSpan,
  type RequestRecord,
  type RowsOfRequest,
  type TraceContext,
} from './verify.ts';

/** The violations found: counted by kind, the first 50 kept in full. */
export class Violations {
  readonly list: string[] = [];
  readonly byKind: Record<string, number> = {};

  add(kind: string, message: string): void {
    this.byKind[kind] = (this.byKind[kind] ?? 0) + 1;
    if (this.list.length < 50) this.list.push(message);
  }
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

/** What is left in flight once the campaign settled, and (k8s) how discovery settled. */
export interface Settled {
  routerInFlight: number;
  routerWorkersInFlight: number;
  simInFlight: number;
  k8s: CampaignReport['k8s'];
}

/** The trace file against the requests the campaign sent. */
export interface TraceCheck {
  rows: TraceRow[];
  attemptRows: number;
  requestRows: number;
  attemptsStarted: number;
  /** Requests refused at admission, which have no row. */
  unrecorded: number;
}

/** Tallies over every request and its rows, for the report. */
export interface RecordCounts {
  siUnexplained: number;
  kaUnexplained: number;
  limit503: number;
  migrations: number;
  ongoing: number;
  migrated: number;
  maxAttempts: number;
  otherAnswers: number;
  otherAttemptsWithTokens: number;
  clientsGot429: number;
  spansLastOnly: number;
  migratedByFormat: Record<WireFormat, number>;
}

export interface Verdict {
  settled: Settled;
  mem: MemoryVerdict | null;
  trace: TraceCheck;
  attemptRowList: AttemptRow[];
  rowsOf: Map<string, RowsOfRequest | undefined>;
  counts: RecordCounts;
  /** Prefix-rid survivors that ran on the cancelled member's worker when it was cancelled. */
  prefixColocated: number;
  aftermathMs: number;
  benchings: Benching[];
  benchedByClient: ClientMistakeBench[];
}

/** Settles the campaign and judges it; stops the router on the way (the trace file is then complete). */
export async function judgeCampaign(
  o: CampaignSettings,
  workers: CampaignWorkers,
  rt: CampaignRouter,
  res: CampaignResources,
  run: CampaignRun,
  at: { traceFile: string; adminToken: string; keepDir: string | undefined; log: (line: string) => void },
  v: Violations,
): Promise<Verdict> {
  const { routerConfig, workerEvents } = rt;
  const settled = await settle(workers, rt, res, run, at, v);

  // --- memory ------------------------------------------------------------------------------
  const mem = judgeMemory(run.memory, run.t0, run.tTrafficEnd);
  if (mem && (mem.heapRatio > MEMORY_LIMIT_RATIO || mem.rssRatio > MEMORY_LIMIT_RATIO)) {
    v.add('memory', `router memory grew: heap ${mem.earlyHeapMB} → ${mem.lateHeapMB} MB (x${mem.heapRatio}), rss ${mem.earlyRssMB} → ${mem.lateRssMB} MB (x${mem.rssRatio})`);
  }

  const trace = await checkTrace(rt, res, run, at, v);
  const rows = trace.rows;
  const grouped = groupRows(rows);
  // A worker's time out lasts past its cause: the bench, an opened breaker, and health checks
  // (threshold x interval, each up to its timeout) before a returning worker is taken back.
  const graceMs = routerConfig.circuitOpenMs! + routerConfig.healthFailureThreshold! * (routerConfig.healthIntervalMs! + routerConfig.healthTimeoutMs!) + 1000;
  const attemptRowList = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
  const faultWindows: FaultSpan[] = [
    ...run.injector.windows.map((w) => ({ url: workers.refs[w.worker]!.url, start: w.start, end: w.end, kind: w.kind })),
    // A deleted or evicted pod: its worker going away and its process killed are faults too.
    ...(res.k8s?.windows ?? []).map((w) => ({ url: w.url, start: w.start, end: w.end, kind: 'kill' as const })),
  ];
  // What a fault on a worker may still cause after it is cleared (verify.ts faultAftermathMs).
  const aftermathMs = faultAftermathMs({ interTokenTimeoutMs: routerConfig.interTokenTimeoutMs!, healthIntervalMs: routerConfig.healthIntervalMs!, healthTimeoutMs: routerConfig.healthTimeoutMs! });
  if (res.k8s && settled.k8s) {
    const d = drainViolations(res.k8s.windows, attemptRowList, 1_000);
    for (const m of d.violations) v.add('drain', m);
    settled.k8s.lateDrains = d.lateDrains;
    settled.k8s.drainLagMs = d.drainLagMs;
  }
  const ctx: TraceContext = {
    migrationLimit: routerConfig.migrationLimit!,
    incrementalByUrl: workers.incrementalByUrl,
    workerUrls: workers.workerUrls,
    weightsByUrl: workers.weightsByUrl,
    refusingUrl: workers.refusingUrl,
    refusingUrls: workers.refusingUrls,
    formatByUrl: workers.formatByUrl,
    workerOut: outages(attemptRowList, faultWindows, routerConfig.benchMs!, graceMs, run.reportedOut),
  };
  const rowsOf = rowsByRecord(run.records, grouped, v);
  const counts = judgeRecords(o, workers, rt, run.records, rowsOf, { ctx, faultWindows, aftermathMs }, v);
  const prefixColocated = prefixColocation(run.records, rowsOf);
  checkCoverage(run.records, grouped, attemptRowList, res, v);

  // --- workers benched by a client's mistake ------------------------------------------------
  // Every benching the router reported, less those a fault injected on that worker explains.
  const benchings = benchingsOf(workerEvents.events, routerConfig.benchMs!, routerConfig.circuitOpenMs!);
  const clientByRequest = new Map<string, ClientKind>();
  for (const r of run.records) if (r.client) clientByRequest.set(r.id, r.client);
  const benchedByClient = benchedByClientMistake(benchings, faultWindows, aftermathMs, attemptRowList, (id) => clientByRequest.get(id));
  for (const b of benchedByClient) {
    v.add(
      'benched by a client',
      `benched by a client: ${b.worker} ${b.health} at t=${((b.at - run.t0) / 1000).toFixed(1)}s with no fault on it from ${FAULT_LEAD_MS} ms before to ${aftermathMs} ms after; failed there just before: ${b.suspects.join(', ') || 'nothing'}`,
    );
  }

  if (at.keepDir) writeFileSync(join(at.keepDir, 'benchings.json'), JSON.stringify({ t0: run.t0, aftermathMs, faults: faultWindows, benchings, benchedByClient }, null, 1));
  return { settled, mem, trace, attemptRowList, rowsOf, counts, prefixColocated, aftermathMs, benchings, benchedByClient };
}

/** The router alive, every fault cleared, every worker back, nothing left in flight; (k8s) discovery agreeing with the pods. */
async function settle(workers: CampaignWorkers, rt: CampaignRouter, res: CampaignResources, run: CampaignRun, at: { adminToken: string; log: (line: string) => void }, v: Violations): Promise<Settled> {
  const { router, url } = rt;
  const { adminToken } = at;
  if (run.routerDied || !router.alive()) v.add('router_crashed', `the router process died: ${JSON.stringify(router.exitInfo())}\n${router.output().slice(-2000)}`);

  // --- settle: every fault cleared, every worker back, nothing left in flight -----------------
  await run.injector.finish();
  for (const e of run.injector.errors) at.log(`fault injection: ${e}`);
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
    for (const r of workers.refs) n += (await r.cluster.stats(r.local)).inFlight;
    simInFlight = n;
    return n === 0;
  }, 10_000);
  if (routerInFlight !== 0) v.add('in_flight', `router in-flight gauge is ${routerInFlight} after the campaign`);
  if (routerWorkersInFlight !== 0) v.add('in_flight', `router counts ${routerWorkersInFlight} attempts in flight on workers after the campaign`);
  const k8s = res.k8s && router.alive() ? await settleDiscovery(res.k8s, workers, url, adminToken, v) : null;
  if (simInFlight !== 0) v.add('in_flight', `workers still run ${simInFlight} generations after the campaign (upstream attempts leaked)`);
  return { routerInFlight, routerWorkersInFlight, simInFlight, k8s };
}

/** Kubernetes: the router's discovered workers against the pods, within a re-list. */
async function settleDiscovery(k8s: K8sChaos, workers: CampaignWorkers, url: string, adminToken: string, v: Violations): Promise<NonNullable<CampaignReport['k8s']>> {
  const { workerUrls, podUrls } = workers;
  const settleFrom = Date.now();
  type Row = { url: string; discovery?: unknown };
  let stale = -1;
  let handAddedTouched = 0;
  const disagreement = async () => {
    const body = (await adminJson(url, '/workers', adminToken)) as { workers: Row[] };
    const truth = k8s.truth();
    const discovered = new Set(body.workers.filter((w) => w.discovery).map((w) => w.url));
    stale = [...discovered].filter((u) => !truth.has(u)).length + [...truth].filter((u) => !discovered.has(u)).length;
    // The other-weights worker was given with --worker: discovery must leave it as it is.
    handAddedTouched = workerUrls.filter((u) => !podUrls.includes(u)).filter((u) => !body.workers.some((w) => w.url === u && !w.discovery)).length;
    return stale === 0;
  };
  // Bound: a re-list period and the watchdog, plus the longest backoff after failed watches (30 s).
  await waitFor(disagreement, K8S_RELIST_MS + K8S_WATCHDOG_MS + 30_000 + 5_000);
  const settleMs = Date.now() - settleFrom;
  if (stale !== 0) v.add('stale_workers', `${stale} workers disagree with the pods ${settleMs} ms after the last pod change (discovery missed a change)`);
  if (handAddedTouched !== 0) v.add('hand_added', `${handAddedTouched} hand-added workers were changed or removed by discovery`);
  const report = { pods: podUrls.length, deletions: k8s.deletions, evictions: k8s.evictions, skipped: k8s.skipped, watchFaults: k8s.watchFaults + k8s.fake.counts.watchFaults, lists: k8s.fake.counts.list, watches: k8s.fake.counts.watch, staleWorkers: stale, settleMs, lateDrains: 0, drainLagMs: [] as number[], handAddedTouched };
  for (const e of k8s.errors) v.add('k8s_schedule', `pod schedule: ${e}`);
  return report;
}

/**
 * Stops the router and reads its trace file (kept in `keepDir` with the client records and the
 * faults, when asked): a row per attempt started and per request sent, and the admin token in
 * nothing the router wrote.
 */
async function checkTrace(rt: CampaignRouter, res: CampaignResources, run: CampaignRun, at: { traceFile: string; adminToken: string; keepDir: string | undefined }, v: Violations): Promise<TraceCheck> {
  const { router, url, workerEvents } = rt;
  const { traceFile, adminToken, keepDir } = at;
  const { records } = run;
  const attemptsStarted = router.alive() ? await metric(url, 'baton_attempts_started_total') : NaN;
  const csvExport = router.alive() ? await (await fetch(url + '/traces?format=csv', { headers: { authorization: `Bearer ${adminToken}` } })).text() : '';
  await router.stop();
  const fileText = readFileSync(traceFile, 'utf8');
  if (keepDir) {
    mkdirSync(keepDir, { recursive: true });
    copyFileSync(traceFile, join(keepDir, 'traces.jsonl'));
    writeFileSync(join(keepDir, 'requests.jsonl'), records.map((r) => JSON.stringify(r)).join('\n') + '\n');
    writeFileSync(join(keepDir, 'faults.json'), JSON.stringify({ plan: run.plan, windows: run.injector.windows, t0: run.t0, reportedOut: run.reportedOut, workerEvents: workerEvents.events, refusals429: res.proxies.flatMap((p) => p.refusals) }, null, 1));
  }
  const rows: TraceRow[] = fileText.split('\n').filter(Boolean).map((l) => JSON.parse(l) as TraceRow);
  const attemptRows = rows.filter((r) => r.kind === 'attempt').length;
  const requestRows = rows.length - attemptRows;
  if (attemptRows !== attemptsStarted) v.add('trace', `trace: ${attemptRows} attempt rows but ${attemptsStarted} attempts started`);
  // A request the router refused at admission (an unknown sampling key: a 4xx, or in band on a
  // stream, before any attempt) leaves no row, as any body the router refuses.
  const idsWithRows = new Set(rows.map((r) => r.request_id));
  const unrecorded = records.filter((r) => r.client === 'unknown_key' && !idsWithRows.has(r.id) && refusedAtAdmission(r, 0)).length;
  if (requestRows !== records.length - unrecorded) v.add('trace', `trace: ${requestRows} request rows for ${records.length} requests${unrecorded ? ` (${unrecorded} refused at admission without one)` : ''}`);
  // Secrets: the admin token must not leak into anything the router writes.
  for (const [where, text] of [['router stdout/stderr', router.output()], ['trace file', fileText], ['CSV export', csvExport]] as const) {
    if (text.includes(adminToken)) v.add('secret', `the admin token appears in the ${where}`);
  }
  return { rows, attemptRows, requestRows, attemptsStarted, unrecorded };
}

/**
 * Each request's rows. The members of a shared-header group share a logical id: their rows are
 * told apart by prompt length (each member has its own).
 */
function rowsByRecord(records: readonly RequestRecord[], grouped: Map<string, RowsOfRequest>, v: Violations): Map<string, RowsOfRequest | undefined> {
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
    if (stray > 0) v.add('trace', `${id}: trace: ${stray} rows of a shared-header group that match no member's prompt length`);
    if (recs.some((r) => r.group?.kind !== 'shared_header')) v.add('trace', `${id}: trace: ${recs.length} requests of the campaign used one logical id outside a shared-header group`);
  }
  return rowsOf;
}

/** Every request against its rules (the client's judgement, its rows, its pacing), and the report's tallies. */
function judgeRecords(
  o: CampaignSettings,
  workers: CampaignWorkers,
  rt: CampaignRouter,
  records: readonly RequestRecord[],
  rowsOf: Map<string, RowsOfRequest | undefined>,
  faults: { ctx: TraceContext; faultWindows: FaultSpan[]; aftermathMs: number },
  v: Violations,
): RecordCounts {
  const { ctx, faultWindows, aftermathMs } = faults;
  const { weightsByUrl, refusingUrls } = workers;
  const c: RecordCounts = {
    siUnexplained: 0,
    kaUnexplained: 0,
    limit503: 0,
    migrations: 0,
    ongoing: 0,
    migrated: 0,
    maxAttempts: 0,
    otherAnswers: 0,
    otherAttemptsWithTokens: 0,
    clientsGot429: 0,
    spansLastOnly: 0,
    migratedByFormat: { sglang: 0, vllm: 0 },
  };
  for (const rec of records) {
    const g = rowsOf.get(rec.key);
    const label = rec.key === rec.id ? rec.id : `${rec.id} (${rec.key})`;
    for (const m of rec.violations) v.add(m.split(':')[0]!, `${label}: ${m}`);
    // The special clients' own rules; the ordinary ones for the rest (and for stream_interval
    // and keep-alive requests too, which are ordinary requests but for their pacing).
    const traceChecks =
      rec.client === 'unknown_key' ? judgeUnknownKey(rec, g) : rec.client === 'never_read' ? judgeNeverReader(rec, g, rt.cutMs, ROUTER_HAS_CLIENT_WRITE_TIMEOUT ? o.clientWriteTimeoutMs : null) : judgeTrace(rec, g, ctx);
    for (const m of traceChecks) v.add(m.split(':')[0]!.split(' (')[0]!, `${label}: ${m}`);
    if (rec.client === 'stream_interval' || rec.client === 'keep_alive') {
      const broke = unexplainedBreakage(g, faultWindows, aftermathMs).length;
      if (rec.client === 'stream_interval') c.siUnexplained += broke;
      else c.kaUnexplained += broke;
      for (const m of judgePaced(rec, g, faultWindows, aftermathMs)) v.add(m.split(':')[0]!, `${label}: ${m}`);
    }
    if (rec.status === 503 && /at its limit/.test(rec.errorMessage ?? '')) {
      c.limit503++;
      v.add('concurrency limit', `${label}: refused at the router's concurrency limit (${rt.maxConcurrentRequests}): ${rec.errorMessage}`);
    }
    const row = g?.requests[0];
    if (row) {
      c.maxAttempts = Math.max(c.maxAttempts, row.attempts);
      c.migrations += row.migrations;
      if (row.migrations > 0 && rec.exact) c.migrated++;
    }
    for (const a of g?.attempts ?? []) {
      if (a.attempt > 0 && a.replayed_tokens > 0) c.ongoing++;
      if (a.tokens > 0 && weightsByUrl.get(a.worker) === 'other') c.otherAttemptsWithTokens++;
    }
    if (rec.exact && rec.weights.length === 1 && rec.weights[0] === 'other') c.otherAnswers++;
    const last = g?.attempts.reduce<AttemptRow | null>((m, a) => (m === null || a.attempt > m.attempt ? a : m), null);
    if (rec.result === 'error' && last?.error_kind === 'http_4xx' && last.worker !== undefined && refusingUrls.includes(last.worker) && last.attempt > 0) c.clientsGot429++;
    if (row && rec.spansStart !== undefined && rec.spansStart !== 0 && rec.exact) c.spansLastOnly++;
    if (row && row.migrations > 0 && rec.exact) c.migratedByFormat[rec.format]++;
  }
  return c;
}

/**
 * Prefix-rid groups: how many of the members that were not cancelled were running on the
 * cancelled member's worker when it was cancelled (where an abort by prefix would hit them).
 */
function prefixColocation(records: readonly RequestRecord[], rowsOf: Map<string, RowsOfRequest | undefined>): number {
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
  return prefixColocated;
}

/** No rows of a request the campaign never sent; a 4xx attempt row for every 429 the proxies sent. */
function checkCoverage(records: readonly RequestRecord[], grouped: Map<string, RowsOfRequest>, attemptRowList: readonly AttemptRow[], res: CampaignResources, v: Violations): void {
  const known = new Set(records.map((r) => r.id));
  const strangers = [...grouped.keys()].filter((id) => !known.has(id));
  if (strangers.length > 0) v.add('trace', `trace: rows for ${strangers.length} requests the campaign never sent (e.g. ${strangers[0]})`);
  // Every 429 the proxy sent reached the router as a 4xx on that attempt.
  // (A client that hung up just as the 429 came may have its attempt recorded as cancelled.)
  const rowByRid = new Map(attemptRowList.map((a) => [a.rid, a]));
  const lost429 = res.proxies.flatMap((p) => p.refusals).filter((r) => {
    const row = rowByRid.get(r.rid);
    return row === undefined || (row.error_kind !== 'http_4xx' && row.outcome !== 'cancelled');
  });
  if (lost429.length > 0) v.add('continuation 4xx', `continuation 4xx: ${lost429.length} 429s of the proxy have no http_4xx attempt row (e.g. ${lost429[0]!.rid})`);
}
