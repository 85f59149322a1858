// A chaos campaign's report (chaos/campaign.ts): what ran, what it sent and how it ended, and the
// violations the verdict (campaign-verdict.ts) found. `baton chaos` prints it (chaos/summary.ts).

import type { RouterConfig } from '../router/config.ts';
import type { CampaignResources, CampaignRouter, CampaignWorkers } from './campaign-cluster.ts';
import { OTHER_WEIGHT_VERSION, ROUTER_HAS_CLIENT_WRITE_TIMEOUT, type CampaignSettings } from './campaign-config.ts';
import type { CampaignRun } from './campaign-drive.ts';
import type { MemoryVerdict, Verdict, Violations } from './campaign-verdict.ts';
import { FAULT_KINDS, type FaultKind } from './schedule.ts';
import { vocabRefusal, type ClientKind, type TrafficKind, type WireFormat } from './traffic.ts';
import type { ClientMistakeBench, RequestRecord } from './verify.ts';

export interface CampaignReport {
  options: CampaignSettings;
  /**
   * `--discovery k8s`: pod events and watch faults, and the workers whose discovery disagreed with
   * the pods once everything settled (staleWorkers: must be 0). lateDrains: deletions the router
   * learned of too late to drain (through a watch broken on purpose); drainLagMs: from a delete to
   * the router showing the worker draining, for the others.
   */
  k8s: { pods: number; deletions: number; evictions: number; skipped: number; watchFaults: number; lists: number; watches: number; staleWorkers: number; settleMs: number; lateDrains: number; drainLagMs: number[]; handAddedTouched: number } | null;
  /** The special clients, and how they fared. */
  clients: ClientCounts;
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
  /**
   * Benchings the router reported (worker_state events: benched, circuit_open, dead) that no fault
   * injected on that worker explains (from just before it was applied to `faultAftermathMs` after
   * it was cleared): must be 0.
   */
  benchedByClient: number;
  benchedByClientDetails: ClientMistakeBench[];
  /** Every benching the router reported, and the window after a fault that explains one. */
  benchings: { total: number; explained: number; aftermathMs: number; eventStreamInterruptions: number };
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
  /** `refusedAtAdmission`: requests the router refused before any attempt, which have no row. */
  traceRows: { attempts: number; attemptsStarted: number; requests: number; refusedAtAdmission: number };
  inFlightAtEnd: { router: number; routerWorkers: number; simWorkers: number };
  memory: MemoryVerdict | null;
  /** The clear errors clients got, by message (numbers blanked), most frequent first. */
  errorMessages: [string, number][];
  violationCount: number;
  violationsByKind: Record<string, number>;
  violations: string[];
}

export interface ClientCounts {
  unknownKey: { sent: number; refused4xx: number; refusedInBand: number; answered: number; noWorker: number; keys: string[] };
  streamInterval: { sent: number; answered: number; exact: number; tokens: readonly [number, number] | null; frameGapMs: readonly [number, number] | null; stalledAttempts: number; unexplained: number };
  neverRead: { sent: number; cutInTime: number; heldPast: number; notJudged: number; cutMs: number; writeTimeoutMs: number; routerHasTimeout: boolean; slowestCutMs: number | null };
  keepAlive: { bursts: number; requests: number; answered: number; exact: number; brokenAttempts: number; unexplained: number };
  /** Requests (of any client) refused because the router was at its concurrency limit. */
  concurrencyLimit503: number;
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

/** The report of a judged campaign. */
export function campaignReport(o: CampaignSettings, workers: CampaignWorkers, rt: CampaignRouter, res: CampaignResources, run: CampaignRun, verdict: Verdict, v: Violations): CampaignReport {
  const { refs, refusingUrls, refusingUrl, workerUrls } = workers;
  const { routerConfig, workerEvents } = rt;
  const { records, injector, plan, t0 } = run;
  const { counts, trace, settled, benchings, benchedByClient, aftermathMs } = verdict;
  const { proxies } = res;
  const notAdmitted: Partial<Record<TrafficKind, number>> = {};
  for (const r of records) if (!r.admitted) notAdmitted[r.kind] = (notAdmitted[r.kind] ?? 0) + 1;
  const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, injector.injected[k]])) as Record<FaultKind, number>;
  const answeredAdmitted = records.filter((r) => r.admitted && r.result === 'answer');
  return {
    options: o,
    k8s: settled.k8s,
    clients: clientCounts(o, rt, run, verdict),
    benchings: { total: benchings.length, explained: benchings.length - benchedByClient.length, aftermathMs, eventStreamInterruptions: workerEvents.interruptions },
    routerConfig: { ...routerConfig, adminToken: '(set, redacted)', traceFile: '(temporary file)', workers: workerUrls },
    workerModes: refs.map((r) => `${r.format === 'vllm' ? 'vllm' : r.incremental ? 'incremental' : 'cumulative'}${r.weights === 'other' ? ' other-weights' : ''}${refusingUrls.includes(r.url) ? ' behind-429-proxy' : ''}`),
    workerFormats: refs.map((r) => r.format),
    byFormat: formatCounts(workers, records, counts.migratedByFormat),
    vllm: vllmCounts(workers, run, counts.spansLastOnly),
    otherWeights: { workers: refs.filter((r) => r.weights === 'other').map((r) => r.url), version: OTHER_WEIGHT_VERSION, answers: counts.otherAnswers, attemptsWithTokens: counts.otherAttemptsWithTokens },
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
      sameWorkerAtCancel: verdict.prefixColocated,
    },
    continuation4xx: {
      worker: refusingUrl,
      workers: refusingUrls,
      share: o.continuation4xxShare,
      continuations: proxies.reduce((n, p) => n + p.continuations, 0),
      refused: proxies.reduce((n, p) => n + p.refusals.length, 0),
      clientsGot429: counts.clientsGot429,
    },
    firstTokenTimeouts: verdict.attemptRowList.filter((a) => a.error_kind === 'first_token_timeout').length,
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
    migratedRequests: counts.migrated,
    migrations: counts.migrations,
    migrationsOngoing: counts.ongoing,
    migrationsNewRequest: counts.migrations - counts.ongoing,
    maxAttempts: counts.maxAttempts,
    faults,
    faultsTotal: injector.total,
    faultsNotFired: injector.notFired,
    faultsSkipped: injector.skipped,
    faultsPlanned: plan.length,
    traceRows: { attempts: trace.attemptRows, attemptsStarted: trace.attemptsStarted, requests: trace.requestRows, refusedAtAdmission: trace.unrecorded },
    inFlightAtEnd: { router: settled.routerInFlight, routerWorkers: settled.routerWorkersInFlight, simWorkers: settled.simInFlight },
    memory: verdict.mem,
    errorMessages: countMessages(records),
    violationCount: Object.values(v.byKind).reduce((a, b) => a + b, 0),
    violationsByKind: v.byKind,
    violations: v.list,
  };
}

/** The special clients: what each sent, and how it fared. */
function clientCounts(o: CampaignSettings, rt: CampaignRouter, run: CampaignRun, verdict: Verdict): ClientCounts {
  const { cutMs } = rt;
  const { records, streamIntervalTokens } = run;
  const { rowsOf, counts } = verdict;
  const byClient = (c: ClientKind) => records.filter((r) => r.client === c);
  const uk = byClient('unknown_key');
  const si = byClient('stream_interval');
  const nr = byClient('never_read');
  const ka = byClient('keep_alive');
  const nrTook = nr.map((r) => rowsOf.get(r.key)?.requests[0]).filter((row) => row !== undefined).map((row) => row.ended_at - row.started_at);
  const nrJudged = nr.filter((r) => r.endedAt - r.startedAt >= cutMs);
  const heldPast = nrJudged.filter((r) => {
    const row = rowsOf.get(r.key)?.requests[0];
    return row !== undefined && row.ended_at - row.started_at > cutMs;
  }).length;
  return {
    unknownKey: {
      sent: uk.length,
      refused4xx: uk.filter((r) => r.result === 'error' && !r.errorInBand && r.status >= 400 && r.status < 500).length,
      refusedInBand: uk.filter((r) => r.result === 'error' && r.errorInBand).length,
      answered: uk.filter((r) => r.result === 'answer').length,
      noWorker: uk.filter((r) => r.status === 503 || /no worker left|no healthy worker/i.test(r.errorMessage ?? '')).length,
      keys: [...new Set(uk.map((r) => r.unknownKey!))],
    },
    streamInterval: {
      sent: si.length,
      answered: si.filter((r) => r.result === 'answer').length,
      exact: si.filter((r) => r.exact).length,
      tokens: streamIntervalTokens ?? null,
      frameGapMs: streamIntervalTokens ? [streamIntervalTokens[0] * o.tokenIntervalMs, streamIntervalTokens[1] * o.tokenIntervalMs] : null,
      stalledAttempts: si.reduce((n, r) => n + (rowsOf.get(r.key)?.attempts.filter((a) => a.error_kind === 'stalled').length ?? 0), 0),
      unexplained: counts.siUnexplained,
    },
    neverRead: {
      sent: nr.length,
      cutInTime: nrJudged.length - heldPast,
      heldPast,
      notJudged: nr.length - nrJudged.length,
      cutMs,
      writeTimeoutMs: o.clientWriteTimeoutMs,
      routerHasTimeout: ROUTER_HAS_CLIENT_WRITE_TIMEOUT,
      slowestCutMs: nrTook.length > 0 ? Math.max(...nrTook) : null,
    },
    keepAlive: {
      bursts: run.bursts,
      requests: ka.length,
      answered: ka.filter((r) => r.result === 'answer').length,
      exact: ka.filter((r) => r.exact).length,
      brokenAttempts: ka.reduce((n, r) => n + (rowsOf.get(r.key)?.attempts.filter((a) => a.outcome === 'failed' && a.error_kind !== 'http_4xx' && a.error_kind !== 'validation').length ?? 0), 0),
      unexplained: counts.kaUnexplained,
    },
    concurrencyLimit503: counts.limit503,
  };
}

/** Per wire format: its workers, and what its requests got. */
function formatCounts(workers: CampaignWorkers, records: readonly RequestRecord[], migratedByFormat: Record<WireFormat, number>): Partial<Record<WireFormat, FormatCounts>> {
  const byFormat: Partial<Record<WireFormat, FormatCounts>> = {};
  for (const f of ['sglang', 'vllm'] as const) {
    const of = records.filter((r) => r.format === f);
    const n = workers.refs.filter((r) => r.format === f).length;
    if (n === 0 && of.length === 0) continue;
    byFormat[f] = {
      workers: n,
      requests: of.length,
      admitted: of.filter((r) => r.admitted).length,
      answered: of.filter((r) => r.result === 'answer').length,
      tokenExact: of.filter((r) => r.exact).length,
      migrated: migratedByFormat[f],
    };
  }
  return byFormat;
}

/** vLLM answers and what they carried (none without vLLM workers). */
function vllmCounts(workers: CampaignWorkers, run: CampaignRun, spansLastOnly: number): VllmCounts | null {
  if (workers.nVllm === 0) return null;
  const answers = run.records.filter((r) => r.format === 'vllm' && r.result === 'answer');
  const shapeOf = (r: RequestRecord) => run.specShapes.get(r.key);
  return {
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

/** The clear errors clients got, by message with numbers and worker URLs blanked: the 8 most frequent. */
function countMessages(records: readonly RequestRecord[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const r of records) {
    if (r.errorMessage === null) continue;
    const key = `${r.client ? `${r.client} ` : ''}${r.format === 'vllm' ? 'vllm ' : ''}${r.admitted ? 'admitted' : 'not admitted'}: ${r.errorMessage.replace(/https?:\/\/[^\s,)]+/g, '<worker>').replace(/\d+/g, 'N').replace(/\[N(, N)*\]/g, '[...]').replace(/~mN~\w+/g, '~mN~<nonce>').slice(0, 160)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
}
