// The campaign's summary table, as printed by `baton chaos` and quoted in docs/reliability.md.

import type { CampaignReport } from './campaign.ts';

export function formatSummary(r: CampaignReport): string {
  const o = r.options;
  const rows: [string, string][] = [];
  const add = (label: string, value: string | number, note = '') => rows.push([label, `${value}${note ? `  ${note}` : ''}`]);
  const list = (rec: Record<string, number>) => Object.entries(rec).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ');

  const fmt = o.format ?? 'sglang';
  if (fmt === 'mixed') {
    add('format', 'mixed', '(SGLang POST /generate and vLLM POST /inference/v1/generate, about half the units each)');
    for (const [f, c] of Object.entries(r.byFormat)) {
      add(`  ${f}`, `${c.requests} requests`, `(${c.workers} workers; answers ${c.answered}, token-exact ${c.tokenExact}, migrated ${c.migrated})`);
    }
  } else add('format', fmt, fmt === 'vllm' ? '(POST /inference/v1/generate)' : '');
  add('requests', r.requests, `(${r.elapsedS} s, ${Math.round(r.requests / Math.max(1, o.durationS))}/s)`);
  add('  admitted', r.admitted);
  add('  not admitted', r.requests - r.admitted, r.requests > r.admitted ? `(${list(r.notAdmitted)})` : '');
  add('answers', r.answered);
  add('  token-exact', r.tokenExact, `(admitted: ${r.admittedExact} of ${r.admittedAnswered})`);
  add('failed with a clear error', r.failedCleanly.admitted + r.failedCleanly.notAdmitted, `(admitted ${r.failedCleanly.admitted}, not admitted ${r.failedCleanly.notAdmitted})`);
  add('client cancels', r.cancelled);
  add('migrated requests', r.migratedRequests, '(answered token-exact after >= 1 migration)');
  add('migrations', r.migrations, `(ongoing ${r.migrationsOngoing}, new-request ${r.migrationsNewRequest}; most attempts for one request ${r.maxAttempts})`);
  const bad = r.badRequests;
  add('bad requests', bad.sent, `(input id beyond the vocabulary: refused in band ${bad.refusedInBand}, with 400 ${bad.refused400}${bad.otherEnd ? `, other end ${bad.otherEnd}` : ''})`);
  const sh = r.sharedHeader;
  const headers = fmt === 'sglang' ? 'x-trace-id / x-correlation-id' : fmt === 'vllm' ? 'X-Request-Id (over the body request_id)' : 'x-trace-id / x-correlation-id (SGLang), X-Request-Id (vLLM)';
  add('shared header ids', sh.requests, `(${sh.groups} groups sharing ${headers}; answers ${sh.answered}, token-exact ${sh.exact})`);
  const px = r.prefixRids;
  add('prefix-rid cancels', px.groups, `(groups job-1/job-10/...: cancelled ${px.cancelled}; the others token-exact ${px.survivorsExact} of ${px.survivors}, ${px.sameWorkerAtCancel} of them on the cancelled one's worker)`);
  const c4 = r.continuation4xx;
  const proxied = (c4.workers ?? []).length > 1 ? `proxies before ${c4.workers.join(', ')} refuse` : `proxy before ${c4.worker} refuses`;
  add('continuations 429', c4.refused, c4.worker ? `(${proxied} ${Math.round(c4.share * 100)}%: ${c4.refused} of ${c4.continuations} continuations; ${c4.clientsGot429} clients got it)` : '(no proxy)');
  const v = r.vllm;
  if (v) {
    add(
      'vllm answers',
      v.answers,
      `(token-exact ${v.exact}: unary ${v.unary}, streams with final usage ${v.usageFinal}, continuous usage ${v.usageContinuous}, no usage ${v.usageNone}; with logprobs ${v.logprobs}; weight_versions of the last attempt only ${v.spansLastAttemptOnly})`,
    );
  }
  const ow = r.otherWeights;
  if (ow.workers.length > 0) add('other weights', ow.workers.length, `(weight_version ${ow.version}: ${ow.attemptsWithTokens} attempts with tokens, ${ow.answers} answers of those weights)`);
  const c = r.clients;
  if (o.clients) {
    const uk = c.unknownKey;
    add('unknown sampling keys', uk.sent, `(${uk.keys.join(', ') || 'none drawn'}: refused with a 4xx ${uk.refused4xx}, in band ${uk.refusedInBand}; answered ${uk.answered}, "no worker" or 503 ${uk.noWorker})`);
    const si = c.streamInterval;
    if (si.tokens && si.frameGapMs) {
      add('stream_interval', si.sent, `(every ${si.tokens[0]}-${si.tokens[1]} tokens: frames ${si.frameGapMs[0] / 1000}-${si.frameGapMs[1] / 1000} s apart, inter-token deadline ${(r.routerConfig.interTokenTimeoutMs ?? 0) / 1000} s; answers ${si.answered}, token-exact ${si.exact}; stalled attempts ${si.stalledAttempts}, broken with no fault ${si.unexplained})`);
    }
    const nr = c.neverRead;
    if (nr.sent > 0) {
      add('never-reading clients', nr.sent, `(client write timeout ${nr.writeTimeoutMs} ms${nr.routerHasTimeout ? '' : ', a setting this router lacks'}: let go within ${nr.cutMs / 1000} s ${nr.cutInTime}, held past it ${nr.heldPast}${nr.notJudged ? `, not judged ${nr.notJudged}` : ''}; longest held ${nr.slowestCutMs === null ? '-' : `${(nr.slowestCutMs / 1000).toFixed(1)} s`})`);
    }
    const ka = c.keepAlive;
    add('keep-alive bursts', ka.bursts, `(${ka.requests} requests 4.8-5.2 s after the previous burst: answers ${ka.answered}, token-exact ${ka.exact}; attempts broken ${ka.brokenAttempts}, with no fault ${ka.unexplained})`);
  }
  if (c.concurrencyLimit503 > 0) add('refused at the concurrency limit', c.concurrencyLimit503);
  const bs = r.benchings;
  add('benchings', bs.total, `(router events: explained by a fault on that worker, up to ${bs.aftermathMs / 1000} s after it, ${bs.explained}; not explained ${bs.total - bs.explained}${bs.eventStreamInterruptions ? `; event stream interrupted ${bs.eventStreamInterruptions}x` : ''})`);
  add('first-token timeouts', r.firstTokenTimeouts, '(attempts moved, worker not blamed)');
  add('faults injected', r.faultsTotal, `(${list(r.faults)}${r.faultsNotFired ? `; ${r.faultsNotFired} armed but not reached` : ''}${r.faultsSkipped ? `; ${r.faultsSkipped} skipped, worker busy` : ''})`);
  add('trace rows', `${r.traceRows.attempts} attempt + ${r.traceRows.requests} request`, `(attempts started ${r.traceRows.attemptsStarted}; refused at admission, no row: ${r.traceRows.refusedAtAdmission})`);
  add('in flight at end', `router ${r.inFlightAtEnd.router}, on workers ${r.inFlightAtEnd.routerWorkers}, sim ${r.inFlightAtEnd.simWorkers}`);
  if (r.memory) {
    const m = r.memory;
    add('router memory', `heap ${m.earlyHeapMB} -> ${m.lateHeapMB} MB (x${m.heapRatio})`, `rss ${m.earlyRssMB} -> ${m.lateRssMB} MB (x${m.rssRatio}), ${m.samples} samples`);
  } else add('router memory', 'too few samples to compare');
  add('violations', r.violationCount, r.violationCount ? `(${list(r.violationsByKind)})` : '');

  const width = Math.max(...rows.map(([l]) => l.length));
  const head = `Baton chaos campaign: seed ${o.seed}, ${o.durationS} s, ${r.workerModes.length} workers (${r.workerModes.join(', ')}), concurrency ${o.concurrency}, fault rate ${o.faultRate}/s, token interval ${o.tokenIntervalMs} ms`;
  const lines = [head, '-'.repeat(Math.min(100, head.length)), ...rows.map(([l, v]) => `${l.padEnd(width)}  ${v}`)];
  if (r.errorMessages.length > 0) {
    lines.push('', 'clear errors clients got (most frequent):', ...r.errorMessages.map(([m, n]) => `  ${String(n).padStart(5)}  ${m}`));
  }
  if (r.violations.length > 0) {
    lines.push('', `first ${r.violations.length} violations:`, ...r.violations.map((v) => `  - ${v}`));
  }
  if (r.k8s) {
    const k = r.k8s;
    const lag = k.drainLagMs.length ? ` (delete to draining: median ${[...k.drainLagMs].sort((a, b) => a - b)[Math.floor(k.drainLagMs.length / 2)]} ms, max ${Math.max(...k.drainLagMs)} ms)` : '';
    lines.push('', `kubernetes: ${k.pods} pods, ${k.deletions} deleted with a grace, ${k.evictions} evicted (${k.skipped} skipped: a pod was out already), ${k.watchFaults} watch faults; ${k.lists} lists, ${k.watches} watches`,
      `drains the router learned of in time: ${k.drainLagMs.length}${lag}; too late (a watch broken on purpose): ${k.lateDrains}`,
      `hand-added workers touched by discovery: ${k.handAddedTouched}`,
      `stale workers at the end: ${k.staleWorkers} (settled in ${k.settleMs} ms)`);
  }
  lines.push('', `workers benched by a client's mistake: ${r.benchedByClient}`, r.violationCount === 0 ? 'PASS: zero violations' : `FAIL: ${r.violationCount} violations`, `replay: baton chaos --seed ${o.seed}${fmt === 'sglang' ? '' : ` --format ${fmt}`}${o.discovery === 'k8s' ? ' --discovery k8s' : ''} --duration ${o.durationS} --workers ${o.workers} --concurrency ${o.concurrency} --fault-rate ${o.faultRate} --token-interval-ms ${o.tokenIntervalMs}${o.clientWriteTimeoutMs !== 3000 ? ` --client-write-timeout-ms ${o.clientWriteTimeoutMs}` : ''}${o.clients ? '' : ' --no-clients'}`);
  return lines.join('\n');
}
