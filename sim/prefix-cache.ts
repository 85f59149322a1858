// A stand-in for SGLang's radix cache: it remembers which token prefixes this worker has already
// computed, one page (`page_size` tokens, SGLang's --page-size, default 1) at a time, so
// `cached_tokens` and prefill time respond to prefix reuse the way a real worker's do (a continuation that lands on the worker that served the original
// prompt finds it cached; one that lands elsewhere pays the full prefill).
//
// A prefix is identified by its length and the model's context hash at that length; recency is
// Map insertion order, which makes the LRU bound O(1). A touched page moves to the back (delete,
// then set) only once it is a quarter of the capacity old: moving it at every touch left a deleted
// slot in the Map for every request's shared prefix (a chat template's first tokens), each one
// bringing a rehash of the whole table nearer, and the worker spent twice the CPU per request on
// such prompts (1,190 against 580 µs, the OpenAI bench's requests, 2026-12-01). A page touched
// again within about three quarters of the capacity's inserts stays; one untouched for about a
// whole capacity of inserts is evicted, as with exact LRU.

import { INITIAL_STATE, foldToken } from './model.ts';

const key = (length: number, hash: number) => length * 4294967296 + hash;

export class PrefixCache {
  /** Page key → the insert count when it last moved to the back. */
  private readonly blocks = new Map<number, number>();
  private readonly capacityBlocks: number;
  private readonly refreshAfter: number;
  private inserts = 0;
  /** Where eviction has got to in the Map's order (evictOldest). */
  private order: Iterator<number> | null = null;

  /** `capacityTokens` bounds what is remembered (LRU); prefixes are matched in whole pages. */
  constructor(capacityTokens: number, readonly pageSize = 1) {
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new Error(`page size must be a positive integer, got ${pageSize}`);
    this.capacityBlocks = Math.floor(capacityTokens / pageSize);
    this.refreshAfter = Math.floor(this.capacityBlocks / 4);
  }

  /**
   * Drop the oldest page. One iterator serves every eviction: a Map keeps deleted slots until it
   * rehashes, and a new iterator starts at the first slot, so `keys().next()` per eviction walked
   * every page evicted since the last rehash (quadratic in a full cache). The iterator is live: it
   * skips what was deleted and reaches pages moved to the back in their new place.
   */
  private evictOldest(): void {
    for (let fresh = 0; fresh < 2; fresh++) {
      this.order ??= this.blocks.keys();
      const next = this.order.next();
      if (!next.done) {
        this.blocks.delete(next.value);
        return;
      }
      this.order = null;
    }
  }

  /** Mark page `k` used now: to the back of the order if it has not moved for a while, or new. */
  private touch(k: number): void {
    const at = this.blocks.get(k);
    if (at !== undefined && this.inserts - at < this.refreshAfter) return;
    if (at !== undefined) this.blocks.delete(k);
    this.blocks.set(k, this.inserts);
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
      this.touch(k);
      hit = len;
    }
    return hit;
  }

  /** Records a page boundary reached while folding a sequence. */
  insert(length: number, hash: number): void {
    if (length % this.pageSize !== 0 || this.capacityBlocks <= 0) return;
    this.inserts++;
    this.touch(key(length, hash));
    if (this.blocks.size > this.capacityBlocks) this.evictOldest();
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
    this.order = null;
  }
}
