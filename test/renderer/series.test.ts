import { describe, expect, it } from 'vitest';
import { quantile, Series } from '../../renderer/src/store/series.ts';
import { RequestBook } from '../../renderer/src/store/request-book.ts';
import { requestEvents } from './scenario.ts';

function feed(series: Series, events: ReturnType<typeof requestEvents>) {
  const book = new RequestBook();
  const effects = book.applyBatch(events);
  events.forEach((e, i) => series.add(e.t, effects[i]!));
}

describe('Series', () => {
  it('aggregates tokens per worker, migrations and failures per second', () => {
    const series = new Series();
    feed(series, requestEvents('a', 10_000, 40, [{ worker: 'w0', tokens: 10, fails: true }, { worker: 'w1', tokens: 30 }]));
    feed(series, requestEvents('b', 10_000, 5, [{ worker: 'w1', tokens: 5, fails: true }]));
    const [p] = series.points(11_000, 1, 1);
    expect(p!.tokensPerSec).toEqual({ w0: 10, w1: 35 });
    expect(p!.migrationsPerMin).toBe(1); // over the trailing minute
    expect(p!.failures).toEqual({ stream_broken: 1 });
    expect(p!.requestsPerSec).toBe(2);
    expect(series.totals).toEqual({ migrations: 1, failures: 1, finished: 2 });
  });

  it('computes rates over complete seconds and re-buckets windows', () => {
    const series = new Series();
    for (let s = 0; s < 10; s++) series.add(s * 1000 + 500, { tokens: { worker: 'w0', delta: 100 } });
    expect(series.rate(10_000, 5, (b) => [...b.tokensByWorker.values()].reduce((x, y) => x + y, 0))).toBe(100);
    const points = series.points(10_000, 10, 5);
    expect(points.map((p) => p.tokensPerSec.w0)).toEqual([100, 100]);
    expect(series.workerSparkline(10_000, 'w0', 3)).toEqual([100, 100, 100]);
  });

  it('spreads a snapshot row\'s tokens over the attempt\'s life instead of its last second', () => {
    const series = new Series();
    series.add(14_000, { tokens: { worker: 'w0', delta: 400, since: 10_000 } });
    expect(series.points(14_000, 4, 1).map((p) => p.tokensPerSec.w0)).toEqual([100, 100, 100, 100]);
  });

  it('forgets buckets older than 15 minutes', () => {
    const series = new Series();
    series.add(0, { tokens: { worker: 'w0', delta: 1 } });
    series.prune(16 * 60 * 1000);
    expect(series.points(16 * 60 * 1000, 16 * 60, 16 * 60)[0]!.tokensPerSec).toEqual({});
  });

  it('takes TTFT percentiles per point', () => {
    const series = new Series();
    for (let i = 1; i <= 100; i++) series.add(500, { ttftMs: i });
    const [p] = series.points(1000, 1, 1);
    expect(p!.ttftP50).toBe(50);
    expect(p!.ttftP99).toBe(99);
    expect(quantile([], 0.5)).toBeNull();
  });
});
