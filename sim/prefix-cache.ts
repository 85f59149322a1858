// A stand-in for SGLang's radix cache: it remembers which token prefixes this worker has already
// computed, one page (`page_size` tokens, SGLang's --page-size, default 1) at a time, so
// `cached_tokens` and prefill time respond to prefix reuse the way a real worker's do (a continuation that lands on the worker that served the original
// prompt finds it cached; one that lands elsewhere pays the full prefill).
//
// A prefix is identified by its length and the model's context hash at that length; recency is
// Map insertion order, which makes the LRU bound O(1).

import { INITIAL_STATE, foldToken } from './model.ts';

const key = (length: number, hash: number) => length * 4294967296 + hash;

export class PrefixCache {
  private readonly blocks = new Map<number, true>();
  private readonly capacityBlocks: number;

  /** `capacityTokens` bounds what is remembered (LRU); prefixes are matched in whole pages. */
  constructor(capacityTokens: number, readonly pageSize = 1) {
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new Error(`page size must be a positive integer, got ${pageSize}`);
    this.capacityBlocks = Math.floor(capacityTokens / pageSize);
  }

  get size(): number {
    return this.blocks.size;
  }

  /** Length of the longest cached page-aligned prefix of `tokens` (at most `limit`), refreshing what it touches. */
  match(tokens: readonly number[], limit: number): number {
    let s = INITIAL_STATE;
    let hit = 0;
    for (let i = 0; i < tokens.length; i++) {
      s = foldToken(s, tokens[i]!);
      const len = i + 1;
      if (len % this.pageSize !== 0) continue;
      if (len > limit) break;
      const k = key(len, s);
      if (!this.blocks.has(k)) break;
      this.blocks.delete(k);
      this.blocks.set(k, true);
      hit = len;
    }
    return hit;
  }

  /** Records a page boundary reached while folding a sequence. */
  insert(length: number, hash: number): void {
    if (length % this.pageSize !== 0 || this.capacityBlocks <= 0) return;
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
