// The router's picture of one worker's prefix cache: which token prefixes it has been sent, one
// page (the worker's `page_size`) at a time, bounded by a size in tokens with LRU eviction. It is
// the approximate tree of the SGLang model gateway's `cache_aware` policy
// (sgl-model-gateway/src/policies/tree.rs), over token ids instead of characters, and flat: a page
// is named by its length and a hash of every token up to its end (`PageKeys`), so a prefix is a
// chain of such keys and no node stores tokens.
//
// The pages held and their recency are lib/page-lru.ts, which the simulator's radix cache shares:
// a path is touched from its deepest page to its root, so the set of pages held is prefix-closed.
// That makes `match` a binary search over the request's page keys (O(log pages) lookups per
// worker), and `insert` O(pages) with no allocation once the arrays have grown.
import { PageLru, pageKey } from '../../lib/page-lru.ts';

/** The hash of the empty prefix (any odd constant; FNV-1a's offset basis). */
const SEED = 0x811c9dc5;

/** One 32-bit fold of a token into a running hash (FNV-1a over the token's 4 bytes, mixed). */
function fold(h: number, token: number): number {
  h = Math.imul(h ^ (token & 0xff), 0x01000193);
  h = Math.imul(h ^ ((token >>> 8) & 0xff), 0x01000193);
  h = Math.imul(h ^ ((token >>> 16) & 0xff), 0x01000193);
  return Math.imul(h ^ (token >>> 24), 0x01000193) >>> 0;
}

/**
 * The page keys of a token sequence (a prompt, then optionally the tokens a continuation replays)
 * at one page size: key k names the prefix of (k + 1) * pageSize tokens. Reused across requests
 * (its buffer grows, never shrinks), so computing them allocates nothing per request.
 */
export class PageKeys {
  keys = new Float64Array(256);
  /** Whole pages in the sequence. */
  pages = 0;
  /** Tokens in the sequence (the match rate's denominator). */
  tokens = 0;
  pageSize = 1;

  compute(first: readonly number[], second: readonly number[] | null, pageSize: number): void {
    const total = first.length + (second === null ? 0 : second.length);
    const pages = Math.floor(total / pageSize);
    if (this.keys.length < pages) this.keys = new Float64Array(Math.max(pages, this.keys.length * 2));
    this.pages = pages;
    this.tokens = total;
    this.pageSize = pageSize;
    let h = SEED;
    let n = 0;
    for (let i = 0; i < first.length; i++) {
      h = fold(h, first[i]!);
      if (++n % pageSize === 0) this.keys[n / pageSize - 1] = pageKey(n, h);
    }
    if (second !== null) {
      for (let i = 0; i < second.length; i++) {
        h = fold(h, second[i]!);
        if (++n % pageSize === 0) this.keys[n / pageSize - 1] = pageKey(n, h);
      }
    }
  }
}

export class PrefixTree extends PageLru {
  constructor(capacityTokens: number, pageSize = 1) {
    super(capacityTokens, pageSize);
    if (!Number.isInteger(capacityTokens) || capacityTokens < 0) throw new Error(`tree capacity must be a non-negative integer, got ${capacityTokens}`);
  }

  /**
   * Tokens of the longest prefix of `k`'s sequence this tree holds (a multiple of the page size).
   * Reads only: routing asks every candidate, and only the chosen one's pages become recent.
   */
  match(k: PageKeys): number {
    if (k.pageSize !== this.pageSize || this.slots.size === 0) return 0;
    // Prefix-closed: if page i is held, so is every page before it.
    let lo = 0;
    let hi = k.pages;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (this.slots.has(k.keys[mid - 1]!)) lo = mid;
      else hi = mid - 1;
    }
    return lo * this.pageSize;
  }

  /** The sequence of `k` was sent to this worker: every page of it becomes the most recent. */
  insert(k: PageKeys): void {
    if (k.pageSize === this.pageSize) this.insertPath(k.keys, k.pages);
  }
}
