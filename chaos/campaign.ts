// A chaos campaign: simulated workers (half cumulative, half incremental, so that one request's
// attempts can land on workers of both modes) plus one on other weights, one worker behind a
// proxy that answers 429 to a seeded share of continuations, the router in its own process,
// seeded traffic (with bad requests, shared header ids and prefix-rid cancels) and a seeded fault
// schedule over a duration, and the clients that must hurt nobody else (unknown sampling keys,
// stream_interval, never-reading clients, requests paced around the keep-alive limit); then the
// verdict: every answer against the fault-free reference of its weights, every failure and refusal
// against the rules, the trace rows, workers benched by a client's mistake (a benching the router
// reported that no injected fault explains), in-flight counts and the router's memory.
//
// Formats: SGLang workers (the default), vLLM workers (`format: 'vllm'`), or both (`mixed`: half
// the workers each, and traffic of both formats, each request to its format's endpoint). The
// worker on other weights is an SGLang worker (vLLM continuations are pinned to the model, not
// yet to the weights: docs/vllm.md); the 429 proxy stands before one worker of each format.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCampaignRouter, startWorkers, type CampaignResources } from './campaign-cluster.ts';
import { campaignSettings, type CampaignOptions } from './campaign-config.ts';
import { driveCampaign } from './campaign-drive.ts';
import { campaignReport, type CampaignReport } from './campaign-report.ts';
import { judgeCampaign, Violations } from './campaign-verdict.ts';

export {
  CAMPAIGN_CLIENT_WRITE_TIMEOUT_MS,
  campaignRouterConfig,
  neverReaderCutMs,
  OTHER_WEIGHT_VERSION,
  ROUTER_HAS_CLIENT_WRITE_TIMEOUT,
  type CampaignOptions,
} from './campaign-config.ts';
export type { CampaignReport, ClientCounts, FormatCounts, VllmCounts } from './campaign-report.ts';
export { judgeMemory, MEMORY_LIMIT_RATIO, type MemoryVerdict } from './campaign-verdict.ts';

/**
 * Runs a campaign, phase by phase: the workers (campaign-cluster.ts startWorkers), the router
 * (startCampaignRouter), the faults and the traffic (campaign-drive.ts), the verdict
 * (campaign-verdict.ts) and the report (campaign-report.ts). Whatever was started is stopped,
 * whichever phase fails.
 */
export async function runCampaign(opts: CampaignOptions): Promise<CampaignReport> {
  const o = campaignSettings(opts);
  const log = opts.log ?? (() => undefined);
  const dir = mkdtempSync(join(tmpdir(), 'baton-chaos-'));
  const traceFile = join(dir, 'traces.jsonl');
  const adminToken = randomBytes(24).toString('hex');
  const res: CampaignResources = { clusters: [], proxies: [], k8s: null, router: null, client: null, stopEvents: null };
  const violations = new Violations();

  try {
    const workers = await startWorkers(o, res, log, opts.verbose ?? false);
    const rt = await startCampaignRouter(o, workers, res, { dir, traceFile, adminToken, log });
    const run = await driveCampaign(o, workers, rt, res, { adminToken, log, verbose: opts.verbose ?? false, progressEveryMs: opts.progressEveryMs ?? 5000 });
    const verdict = await judgeCampaign(o, workers, rt, res, run, { traceFile, adminToken, keepDir: opts.keepDir, log }, violations);
    return campaignReport(o, workers, rt, res, run, verdict, violations);
  } finally {
    await res.stopEvents?.().catch(() => undefined);
    await res.client?.destroy().catch(() => undefined);
    await Promise.all(res.proxies.map((p) => p.close().catch(() => undefined)));
    await res.router?.stop().catch(() => undefined);
    await Promise.all(res.clusters.map((c) => c.stop().catch(() => undefined)));
    await res.k8s?.finish().catch(() => undefined);
    await res.k8s?.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
