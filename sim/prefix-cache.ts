// A stand-in for SGLang's radix cache (python/sglang/srt/mem_cache/radix_cache.py): the token
// prefixes this worker has computed, one page (`page_size` tokens, SGLang's --page-size, default
// 1) at a time, at most `capacityTokens` of them (SGLang's pool of max_total_num_tokens), the
// least recently used leaf evicted first (RadixCache.evict: a heap of leaves by last_access_time).
// `cached_tokens` and prefill time follow from it, so a request that lands where its prefix was
// computed (a later turn of a conversation, a continuation on the worker that served the original
// prompt) finds it cached, and one that lands elsewhere pays the full prefill.
//
// A page is named by its length and the model's context hash at that length, so a prefix is a
// chain of page keys and the tree needs no nodes with children. Recency is an intrusive doubly
// linked list in typed arrays (no object per page). Whatever touches a path touches it from its
// deepest page up to its root, so a page is always more recent than every page below it: the
// least recently used page is a leaf, as in SGLang, and eviction never cuts a path in the middle.

import { INITIAL_STATE, foldToken } from './model.ts';

const NIL = -1;
const key = (length: number, hash: number) => length * 4294967296 + hash;

export class PrefixCache {
  private readonly slots = new Map<number, number>();
  private keyOf = new Float64Array(64);
  private prev = new Int32Array(64);
  private next = new Int32Array(64);
  private head = NIL;
  private tail = NIL;
  private free: number[] = [];
  private used = 0;
  /** Page keys of the sequence being matched or inserted (reused). */
  private path = new Float64Array(256);
  private readonly capacityPages: number;
  /** Pages evicted so far. */
  evictions = 0;

  /** `capacityTokens` bounds what is remembered (LRU leaves first); prefixes are matched in whole pages. */
  constructor(readonly capacityTokens: number, readonly pageSize = 1) {
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new Error(`page size must be a positive integer, got ${pageSize}`);
    this.capacityPages = Math.floor(capacityTokens / pageSize);
  }

  /** Pages held. */
  get size(): number {
    return this.slots.size;
  }

  /** Tokens held (whole pages). */
  get tokens(): number {
    return this.slots.size * this.pageSize;
  }

  /**
   * Length of the longest cached page-aligned prefix of `tokens` (at most `limit`); what it
   * matched becomes the most recent (RadixCache.match_prefix updates last_access_time).
   */
  match(tokens: readonly number[], limit: number): number {
    const pages = this.walk(tokens, limit);
    for (let i = pages - 1; i >= 0; i--) this.toTail(this.slots.get(this.path[i]!)!);
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
      const k = key(len, s);
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
      if ((i + 1) % page === 0) this.path[(i + 1) / page - 1] = key(i + 1, s);
    }
    // Deepest first: each page ends up more recent than the pages below it.
    for (let i = pages - 1; i >= 0; i--) {
      const k = this.path[i]!;
      const slot = this.slots.get(k);
      if (slot !== undefined) this.toTail(slot);
      else this.append(k);
    }
    while (this.slots.size > this.capacityPages) this.evictHead();
  }

  clear(): void {
    this.slots.clear();
    this.head = this.tail = NIL;
    this.free = [];
    this.used = 0;
  }

  private growPath(n: number): void {
    const p = new Float64Array(Math.max(n, this.path.length * 2));
    p.set(this.path);
    this.path = p;
  }

  private append(k: number): void {
    let s = this.free.pop();
    if (s === undefined) {
      s = this.used++;
      if (s >= this.keyOf.length) {
        const n = this.keyOf.length * 2;
        const keyOf = new Float64Array(n);
        keyOf.set(this.keyOf);
        const prev = new Int32Array(n);
        prev.set(this.prev);
        const next = new Int32Array(n);
        next.set(this.next);
        this.keyOf = keyOf;
        this.prev = prev;
        this.next = next;
      }
    }
    this.keyOf[s] = k;
    this.slots.set(k, s);
    this.link(s);
  }

  private link(s: number): void {
    this.prev[s] = this.tail;
    this.next[s] = NIL;
    if (this.tail !== NIL) this.next[this.tail] = s;
    else this.head = s;
    this.tail = s;
  }

  private unlink(s: number): void {
    const p = this.prev[s]!;
    const n = this.next[s]!;
    if (p !== NIL) this.next[p] = n;
    else this.head = n;
    if (n !== NIL) this.prev[n] = p;
    else this.tail = p;
  }

  private toTail(s: number): void {
    if (s === this.tail) return;
    this.unlink(s);
    this.link(s);
  }

  private evictHead(): void {
    const s = this.head;
    if (s === NIL) return;
    this.unlink(s);
    this.slots.delete(this.keyOf[s]!);
    this.free.push(s);
    this.evictions++;
  }
}
