// The per-request metrics are plain numbers handed to prom-client at scrape time
// (router/metrics.ts): their exposition must be exactly what prom-client's own metrics print for
// the same observations — names, help, labels, buckets, sums, counts, and the order of series.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { BucketedHistogram, PairTally } from '../../router/metrics.ts';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

describe('BucketedHistogram', () => {
  it("prints what prom-client's Histogram prints for the same observations", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.double({ min: -1, max: 3, noNaN: true }), fc.constantFrom(...BUCKETS, 0, 1e9)), { maxLength: 200 }),
        async (values) => {
          const mine = new Registry();
          const theirs = new Registry();
          const h = new BucketedHistogram({ name: 'baton_x_seconds', help: 'x', buckets: BUCKETS, registers: [mine] });
          const ref = new Histogram({ name: 'baton_x_seconds', help: 'x', buckets: BUCKETS, registers: [theirs] });
          for (const v of values) {
            h.observeValue(v);
            ref.observe(v);
          }
          expect(await mine.metrics()).toBe(await theirs.metrics());
        },
      ),
      { numRuns: 200 },
    );
  });

  it('prints an empty histogram as prom-client does', async () => {
    const mine = new Registry();
    const theirs = new Registry();
    new BucketedHistogram({ name: 'baton_y_seconds', help: 'y', buckets: [0.1, 1], registers: [mine] });
    new Histogram({ name: 'baton_y_seconds', help: 'y', buckets: [0.1, 1], registers: [theirs] });
    expect(await mine.metrics()).toBe(await theirs.metrics());
  });
});

describe('PairTally', () => {
  it('gives a labelled counter the series, values and order prom-client gives them', async () => {
    const pairs: [string, string][] = [['w1', 'finished'], ['w2', 'finished'], ['w1', 'failed'], ['w1', 'finished'], ['w3', 'cancelled'], ['w2', 'finished']];
    const mine = new Registry();
    const theirs = new Registry();
    const tally = new PairTally();
    const c: Counter = new Counter({
      name: 'baton_z_total', help: 'z', labelNames: ['worker', 'outcome'], registers: [mine],
      collect: () => {
        c.reset();
        for (const cell of tally.cells) c.inc({ worker: cell.a, outcome: cell.b }, cell.n);
      },
    });
    const ref = new Counter({ name: 'baton_z_total', help: 'z', labelNames: ['worker', 'outcome'], registers: [theirs] });
    for (const [worker, outcome] of pairs) {
      tally.add(worker, outcome);
      ref.inc({ worker, outcome });
    }
    expect(await mine.metrics()).toBe(await theirs.metrics());
  });
});
