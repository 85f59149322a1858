// A stand-in for SGLang's radix cache: it remembers which token prefixes this worker has already
// computed, at block granularity, so `cached_tokens` and prefill time respond to prefix reuse the
// way a real worker's do (a continuation that lands on the worker that served the original
// prompt finds it cached; one that lands elsewhere pays the full prefill).
//
// A prefix is identified by its length and the model's context hash at that length; recency is
// Map insertion order, which makes the LRU bound O(1).

import { INITIAL_STATE, foldToken } from './model.ts';

export const CACHE_BLOCK = 16;

const key = (length: number, hash: number) => length * 4294967296 + hash;

export class PrefixCache {
  private readonly blocks = new Map<number, true>();

  constructor(private readonly capacityBlocks: number) {}

  get size(): number {
    return this.blocks.size;
  }

  /** Length of the longest cached block prefix of `tokens` (at most `limit`), refreshing what it touches. */
  match(tokens: readonly number[], limit: number): number {
    let s = INITIAL_STATE;
    let hit = 0;
    for (let i = 0; i < tokens.length; i++) {
      s = foldToken(s, tokens[i]!);
      const len = i + 1;
      if (len % CACHE_BLOCK !== 0) continue;
      if (len > limit) break;
      const k = key(len, s);
      if (!this.blocks.has(k)) break;
      this.blocks.delete(k);
      this.blocks.set(k, true);
      hit = len;
    }
    return hit;
  }

  /** Records a block boundary reached while folding a sequence. */
  insert(length: number, hash: number): void {
    if (length % CACHE_BLOCK !== 0 || this.capacityBlocks <= 0) return;
    const k = key(length, hash);
    this.blocks.delete(k);
    this.blocks.set(k, true);
    if (this.blocks.size > this.capacityBlocks) this.blocks.delete(this.blocks.keys().next().value!);
  }

  insertSequence(tokens: readonly number[]): void {
    let s = INITIAL_STATE;
    for (let i = 0; i < tokens.length; i++) {
      s = foldToken(s, tokens[i]!);
      this.insert(i + 1, s);
    }
  }

  clear(): void {
    this.blocks.clear();
  }
}
