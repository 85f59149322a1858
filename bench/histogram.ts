// Latency histogram for the load generator: log-spaced buckets, 1 % apart, so a run of a million
// chunk gaps costs a few kilobytes, merges across rounds by adding counts, and crosses the IPC
// channel as a small sparse object. A percentile is read back within 1 % of the true sample.

/** Relative width of a bucket: a value is reported within this fraction of itself. */
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);

/** Sparse form sent between processes: bucket index → count, plus exact extremes. */
export interface HistogramData {
  counts: Record<string, number>;
  n: number;
  sum: number;
  min: number;
  max: number;
}

/** Bucket of a value in µs: 0 holds everything below 1 µs, bucket i holds (GROWTH^(i-1), GROWTH^i]. */
export function bucketOf(us: number): number {
  if (!(us > 1)) return 0;
  return Math.ceil(Math.log(us) / LOG_GROWTH - 1e-9);
}

/** The value reported for a bucket: its upper bound (never under-reports a latency). */
export function bucketValue(i: number): number {
  return i === 0 ? 1 : Math.pow(GROWTH, i);
}

export class Histogram {
  private counts = new Map<number, number>();
  n = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;

  /** Record one latency in µs. */
  add(us: number): void {
    const b = bucketOf(us);
    this.counts.set(b, (this.counts.get(b) ?? 0) + 1);
    this.n++;
    this.sum += us;
    if (us < this.min) this.min = us;
    if (us > this.max) this.max = us;
  }

  merge(other: Histogram | HistogramData): this {
    const data = other instanceof Histogram ? other.toJSON() : other;
    for (const [k, c] of Object.entries(data.counts)) {
      const b = Number(k);
      this.counts.set(b, (this.counts.get(b) ?? 0) + c);
    }
    this.n += data.n;
    this.sum += data.sum;
    if (data.n > 0) {
      this.min = Math.min(this.min, data.min);
      this.max = Math.max(this.max, data.max);
    }
    return this;
  }

  /**
   * Nearest-rank percentile (p in [0, 100]): the smallest bucket value v such that at least p % of
   * the samples are ≤ v; clamped to the exact extremes. NaN when empty.
   */
  percentile(p: number): number {
    if (this.n === 0) return NaN;
    if (p <= 0) return this.min;
    if (p >= 100) return this.max;
    const rank = Math.ceil((p / 100) * this.n);
    const keys = [...this.counts.keys()].sort((a, b) => a - b);
    let seen = 0;
    for (const k of keys) {
      seen += this.counts.get(k)!;
      if (seen >= rank) return Math.min(this.max, Math.max(this.min, bucketValue(k)));
    }
    return this.max;
  }

  mean(): number {
    return this.n === 0 ? NaN : this.sum / this.n;
  }

  toJSON(): HistogramData {
    const counts: Record<string, number> = {};
    for (const [k, c] of this.counts) counts[k] = c;
    return { counts, n: this.n, sum: this.sum, min: this.n ? this.min : 0, max: this.n ? this.max : 0 };
  }

  static from(data: HistogramData): Histogram {
    return new Histogram().merge(data);
  }
}

/** Nearest-rank percentile of plain samples (for the few hundred W4 gaps, kept exactly). */
export function percentileOf(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  if (p <= 0) return sorted[0]!;
  const rank = Math.min(sorted.length, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}
