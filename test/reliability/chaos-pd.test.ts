// The P/D chaos campaign (`baton chaos --pd`) in CI size: 2 prefill + 2 decode simulated workers,
// the router in P/D mode in its own process, 25 s of traffic with faults over both legs at 0.5/s.
// Zero violations: every request answered token-exact, no room seen twice by any worker, no
// worker exit that no fault caused; both legs really failed and were blamed. And the fault plan's
// own rules, as a property: at most one faulty worker per role at a time, each on a worker of
// the role it names, kinds from that role's list.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { formatPdSummary, planPdFaults, runPdCampaign } from '../../chaos/pd-campaign.ts';

describe('P/D chaos campaign', () => {
  it('plans faults over both legs, one faulty worker per role at a time', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 10, max: 300 }), fc.integer({ min: 2, max: 4 }), fc.integer({ min: 2, max: 4 }), (seed, durationS, prefill, decode) => {
        const plan = planPdFaults({ seed, durationS, faultRate: 0.5, prefill, decode });
        const lastEnd = { prefill: -1, decode: -1 };
        for (const f of plan) {
          expect(f.at).toBeLessThan(durationS * 1000);
          if (f.role === 'prefill') expect(f.worker).toBeLessThan(prefill);
          else expect(f.worker).toBeGreaterThanOrEqual(prefill);
          expect(f.worker).toBeLessThan(prefill + decode);
          expect(f.at).toBeGreaterThan(lastEnd[f.role]);
          lastEnd[f.role] = f.at + f.forMs;
          if (f.role === 'prefill') expect(['kill', 'hang', 'reset', 'reject']).toContain(f.kind);
          else expect(['kill', 'crash', 'reset', 'hang', 'slow']).toContain(f.kind);
        }
        expect(planPdFaults({ seed, durationS, faultRate: 0.5, prefill, decode })).toEqual(plan);
      }),
      { numRuns: 200 },
    );
  });

  it('25 s of faults over both legs: zero violations, every answer token-exact, no room seen twice', async () => {
    const report = await runPdCampaign({ durationS: 25, prefill: 2, decode: 2, concurrency: 16, seed: 11, faultRate: 0.5, tokenIntervalMs: 10, maxNewTokens: 128 });
    const summary = formatPdSummary(report);
    console.log(summary);
    expect(report.violationCount, summary).toBe(0);
    expect(report.answered).toBe(report.requests);
    expect(report.tokenExact).toBe(report.requests);
    expect(report.requests).toBeGreaterThan(50);
    expect(report.migratedRequests).toBeGreaterThan(0);
    expect(report.failedLeg.decode).toBeGreaterThan(0);
    expect(report.failedLeg.prefill).toBeGreaterThan(0);
    expect(report.rooms.duplicates).toBe(0);
    expect(report.rooms.unplannedExits).toBe(0);
    expect(report.rooms.seenByPrefills).toBeGreaterThan(report.requests * 0.9);
    expect(Object.keys(report.faults).some((k) => k.startsWith('prefill'))).toBe(true);
    expect(Object.keys(report.faults).some((k) => k.startsWith('decode'))).toBe(true);
  }, 120_000);
});
