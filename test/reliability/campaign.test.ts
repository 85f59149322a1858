// The chaos campaign in CI size: 25 s, 3 workers (cumulative and incremental), concurrency 16,
// a fixed seed, faults at twice the default rate so that a short run still sees several kinds.
// Zero violations, migrations that really happened, and every admitted answer token-exact.
import { describe, expect, it } from 'vitest';
import { runCampaign } from '../../chaos/campaign.ts';
import { formatSummary } from '../../chaos/summary.ts';

describe('chaos campaign (CI size)', () => {
  it('25 s of faults: zero violations, migrations, every admitted answer token-exact', async () => {
    const report = await runCampaign({ durationS: 25, workers: 3, concurrency: 16, seed: 20261130, faultRate: 0.4, tokenIntervalMs: 10 });
    const summary = formatSummary(report);
    console.log(summary);
    expect(report.violationCount, summary).toBe(0);
    expect(report.faultsTotal).toBeGreaterThanOrEqual(3);
    expect(report.migrations).toBeGreaterThanOrEqual(5);
    expect(report.migratedRequests).toBeGreaterThanOrEqual(1);
    expect(report.admittedExact).toBe(report.admittedAnswered);
    expect(report.admittedAnswered).toBeGreaterThan(50);
    expect(report.traceRows.attempts).toBe(report.traceRows.attemptsStarted);
    expect(report.traceRows.requests).toBe(report.requests);
    expect(report.inFlightAtEnd).toEqual({ router: 0, routerWorkers: 0, simWorkers: 0 });
  }, 150_000);
});
