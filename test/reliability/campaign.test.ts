// The chaos campaign in CI size: 25 s, 3 workers (cumulative and incremental), concurrency 16,
// a fixed seed whose schedule holds six kinds of fault in seven faults (abort, reset, kill -9,
// reject, self-crash, two hangs) at 0.5/s, so that a short run still sees most of what can go wrong.
// Zero violations, migrations that really happened, and every admitted answer token-exact.
import { describe, expect, it } from 'vitest';
import { runCampaign } from '../../chaos/campaign.ts';
import { formatSummary } from '../../chaos/summary.ts';

describe('chaos campaign (CI size)', () => {
  it('25 s of faults: zero violations, migrations, every admitted answer token-exact', async () => {
    const report = await runCampaign({ durationS: 25, workers: 3, concurrency: 16, seed: 15, faultRate: 0.5, tokenIntervalMs: 10 });
    const summary = formatSummary(report);
    console.log(summary);
    expect(report.violationCount, summary).toBe(0);
    // Faults land on live workers only (a restart can be slow on a loaded machine): most, not all.
    expect(report.faultsTotal).toBeGreaterThanOrEqual(4);
    expect(Object.values(report.faults).filter((n) => n > 0).length).toBeGreaterThanOrEqual(4);
    expect(report.migrations).toBeGreaterThanOrEqual(5);
    expect(report.migratedRequests).toBeGreaterThanOrEqual(1);
    expect(report.admittedExact).toBe(report.admittedAnswered);
    expect(report.admittedAnswered).toBeGreaterThan(50);
    expect(report.traceRows.attempts).toBe(report.traceRows.attemptsStarted);
    expect(report.traceRows.requests).toBe(report.requests);
    expect(report.inFlightAtEnd).toEqual({ router: 0, routerWorkers: 0, simWorkers: 0 });
  }, 150_000);
});
