// A small seeded random source for the campaign. Replayability is the point: the same seed must
// give the same fault schedule and the same traffic, on any machine, so a violation found once
// can be found again. Math.random cannot be seeded, hence this (sfc32, seeded by a 32-bit mix).

import { fmix32 } from '../sim/model.ts';

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** `stream` separates independent sequences drawn from one seed (schedule, request i, ...). */
  constructor(seed: number, stream = 0) {
    this.a = fmix32(seed ^ 0x9e3779b9);
    this.b = fmix32((seed + Math.imul(stream + 1, 0x85ebca6b)) >>> 0);
    this.c = fmix32(stream ^ 0xc2b2ae35);
    this.d = 1;
    // Warm up: the first outputs of sfc32 are still correlated with the seed words.
    for (let i = 0; i < 12; i++) this.next();
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** Uniform integer in [lo, hi], both included. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.float() * items.length)]!;
  }

  /** Choose a key by weight; weights need not sum to 1. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let u = this.float() * total;
    for (const [k, w] of entries) {
      if (u < w) return k;
      u -= w;
    }
    return entries[entries.length - 1]![0];
  }

  /** Exponentially distributed with the given mean (gaps of a Poisson process). */
  exponential(mean: number): number {
    return -Math.log(1 - this.float()) * mean;
  }
}
