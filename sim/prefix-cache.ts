// A stand-in for SGLang's radix cache (python/sglang/srt/mem_cache/radix_cache.py): the token
// prefixes this worker has computed, one page (`page_size` tokens, SGLang's --page-size, default
// 1) at a time, at most `capacityTokens` of them (SGLang's pool of max_total_num_tokens), the
// least recently used leaf evicted first (RadixCache.evict: a heap of leaves by last_access_time).
// `cached_tokens` and prefill time follow from it, so a request that lands where its prefix was
// computed (a later turn of a conversation, a continuation on the worker that served the original
// prompt) finds it cached, and one that lands elsewhere pays the full prefill.
//
// A page is named by its length and the model's context hash at that length; the pages held and
// their recency are lib/page-lru.ts, which the router's cache_aware tree shares. Whatever touches a
// path touches it from its deepest page up to its root, so the least recently used page is a leaf,
// as in SGLang, and eviction never cuts a path in the middle.

import { PageLru, pageKey } from '../lib/page-lru.ts';
import { INITIAL_STATE, foldToken } from './model.ts';

export class PrefixCache extends PageLru {
  /** Page keys of the sequence being matched or inserted (reused). */
  private path = new Float64Array(256);

  /**
   * Length of the longest cached page-aligned prefix of `tokens` (at most `limit`); what it
   * matched becomes the most recent (RadixCache.match_prefix updates last_access_time).
   */
  match(tokens: readonly number[], limit: number): number {
    const pages = this.walk(tokens, limit);
    this.touchPath(this.path, pages);
    return pages * this.pageSize;
  }

  /** `match` without touching anything: what the oracle of the control API reads. */
  peek(tokens: readonly number[], limit = tokens.length): number {
    return this.walk(tokens, limit) * this.pageSize;
  }

  /** Pages of the longest cached prefix of `tokens` (at most `limit` tokens); their keys in `path`. */
  private walk(tokens: readonly number[], limit: number): number {
    let s = INITIAL_STATE;
    let pages = 0;
    const page = this.pageSize;
    for (let i = 0; i < tokens.length; i++) {
      s = foldToken(s, tokens[i]!);
      const len = i + 1;
      if (len % page !== 0) continue;
      if (len > limit) break;
      const k = pageKey(len, s);
      if (!this.slots.has(k)) break;
      if (pages >= this.path.length) this.growPath(pages + 1);
      this.path[pages++] = k;
    }
    return pages;
  }

  /** Every whole page of `tokens` is cached now, as the most recent (RadixCache.insert). */
  insertSequence(tokens: readonly number[]): void {
    if (this.capacityPages <= 0) return;
    const page = this.pageSize;
    const pages = Math.floor(tokens.length / page);
    if (pages > this.path.length) this.growPath(pages);
    let s = INITIAL_STATE;
    for (let i = 0; i < pages * page; i++) {
      s = foldToken(s, tokens[i]!);
      if ((i + 1) % page === 0) this.path[(i + 1) / page - 1] = pageKey(i + 1, s);
    }
    this.insertPath(this.path, pages);
  }

  private growPath(n: number): void {
    const p = new Float64Array(Math.max(n, this.path.length * 2));
    p.set(this.path);
    this.path = p;
  }
}
