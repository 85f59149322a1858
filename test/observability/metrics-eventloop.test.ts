// The event-loop delay figures of /metrics (router/metrics.ts): sampled every EVENT_LOOP_SAMPLE_MS
// (each sample wakes an idle router: prom-client's 10 ms default woke it 100 times a second), and
// reported as the delay itself, less the sampling period that Node counts into every sample.
// Node's monitor is replaced by a histogram of known samples, so that no figure depends on timing.
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EVENT_LOOP_SAMPLE_MS, RouterMetrics } from '../../router/metrics.ts';
import { parsePrometheusText } from './prom-text.ts';

// The module object prom-client's eventLoopLag.js calls monitorEventLoopDelay on.
const perfHooks = createRequire(import.meta.url)('node:perf_hooks') as typeof import('node:perf_hooks');

/** A monitor whose samples (ms) are given: each is what Node records, the period plus the delay. */
function fakeMonitor(samplesMs: number[]) {
  const ns = samplesMs.map((ms) => ms * 1e6).sort((a, b) => a - b);
  const mean = ns.reduce((a, b) => a + b, 0) / ns.length;
  return {
    enable: () => true,
    disable: () => true,
    reset: () => undefined,
    min: ns[0]!,
    max: ns[ns.length - 1]!,
    mean,
    stddev: Math.sqrt(ns.reduce((a, b) => a + (b - mean) ** 2, 0) / ns.length),
    percentile: (p: number) => ns[Math.min(ns.length - 1, Math.ceil((p / 100) * ns.length) - 1)]!,
  };
}

afterEach(() => {
  vi.restoreAllMocks();
});

async function lagFigures(m: RouterMetrics): Promise<Record<string, number>> {
  const families = parsePrometheusText(await m.exposition());
  const out: Record<string, number> = {};
  for (const f of ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99']) {
    out[f] = families.get(`baton_nodejs_eventloop_lag_${f}_seconds`)!.samples[0]!.value;
  }
  return out;
}

describe('event-loop delay metrics', () => {
  it(`sample every ${EVENT_LOOP_SAMPLE_MS} ms, not prom-client's 10`, () => {
    const spy = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    new RouterMetrics(true);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![0]).toEqual({ resolution: EVENT_LOOP_SAMPLE_MS });
    expect(EVENT_LOOP_SAMPLE_MS).toBeGreaterThanOrEqual(100);
  });

  it('report the delay beyond the sampling period, never below 0; the stddev as recorded', async () => {
    const p = EVENT_LOOP_SAMPLE_MS;
    // An idle loop samples at the period (one sample a hair early); one 250 ms stall.
    const samples = [p - 0.05, ...new Array<number>(97).fill(p + 0.2), p + 1, p + 250];
    const monitor = fakeMonitor(samples);
    vi.spyOn(perfHooks, 'monitorEventLoopDelay').mockReturnValue(monitor as unknown as ReturnType<typeof perfHooks.monitorEventLoopDelay>);
    const got = await lagFigures(new RouterMetrics(true));
    expect(got.min).toBe(0);
    expect(got.p50).toBeCloseTo(0.0002, 9);
    expect(got.p90).toBeCloseTo(0.0002, 9);
    expect(got.p99).toBeCloseTo(0.001, 9);
    expect(got.max).toBeCloseTo(0.25, 9);
    expect(got.mean).toBeCloseTo(monitor.mean / 1e9 - p / 1000, 9);
    expect(got.stddev).toBeCloseTo(monitor.stddev / 1e9, 9);
  });
});
