// The router's picture of one worker's prefix cache: which token prefixes it has been sent, one
// page (the worker's `page_size`) at a time, bounded by a size in tokens with LRU eviction. It is
// the approximate tree of the SGLang model gateway's `cache_aware` policy
// (sgl-model-gateway/src/policies/tree.rs), over token ids instead of characters, and flat: a page
// is named by its length and a hash of every token up to its end (`PageKeys`), so a prefix is a
// chain of such keys and no node stores tokens.
//
// Recency is an intrusive doubly linked list in typed arrays (no object per page). A path is
// touched from its deepest page to its root, so a page is always more recent than any page below
// it: the least recently used page is always a leaf, eviction never cuts a path in the middle, and
// the set of pages held is prefix-closed. That makes `match` a binary search over the request's
// page keys (O(log pages) lookups per worker), and `insert` O(pages) with no allocation once the
// arrays have grown.

const NIL = -1;
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
      if (++n % pageSize === 0) this.keys[n / pageSize - 1] = n * 4294967296 + h;
    }
    if (second !== null) {
      for (let i = 0; i < second.length; i++) {
        h = fold(h, second[i]!);
        if (++n % pageSize === 0) this.keys[n / pageSize - 1] = n * 4294967296 + h;
      }
    }
  }
}

export class PrefixTree {
  /** Page key → slot. */
  private readonly slots = new Map<number, number>();
  private key = new Float64Array(64);
  private prev = new Int32Array(64);
  private next = new Int32Array(64);
  /** Least recently used slot (evicted first) and most recent one. */
  private head = NIL;
  private tail = NIL;
  /** Slots freed by eviction, reused before the arrays grow. */
  private free: number[] = [];
  private used = 0;
  readonly capacityPages: number;
  /** Pages evicted so far (the dashboard's and the tests' view of the LRU bound at work). */
  evictions = 0;

  constructor(
    /** Most tokens remembered; whole pages only. */
    readonly capacityTokens: number,
    readonly pageSize = 1,
  ) {
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new Error(`page size must be a positive integer, got ${pageSize}`);
    if (!Number.isInteger(capacityTokens) || capacityTokens < 0) throw new Error(`tree capacity must be a non-negative integer, got ${capacityTokens}`);
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

  /** Page slots the arrays hold room for, used or not (a cleared tree keeps them for reuse). */
  get allocatedSlots(): number {
    return this.key.length;
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
    if (k.pageSize !== this.pageSize || this.capacityPages === 0) return;
    // Deepest first, so that each page ends up more recent than the pages below it.
    for (let i = k.pages - 1; i >= 0; i--) {
      const key = k.keys[i]!;
      const s = this.slots.get(key);
      if (s !== undefined) this.toTail(s);
      else this.append(key);
    }
    while (this.slots.size > this.capacityPages) this.evictHead();
  }

  clear(): void {
    this.slots.clear();
    this.head = this.tail = NIL;
    this.free = [];
    this.used = 0;
  }

  private append(key: number): void {
    let s = this.free.pop();
    if (s === undefined) {
      s = this.used++;
      if (s >= this.key.length) this.grow();
    }
    this.key[s] = key;
    this.slots.set(key, s);
    this.link(s);
  }

  private grow(): void {
    const n = this.key.length * 2;
    const key = new Float64Array(n);
    key.set(this.key);
    const prev = new Int32Array(n);
    prev.set(this.prev);
    const next = new Int32Array(n);
    next.set(this.next);
    this.key = key;
    this.prev = prev;
    this.next = next;
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
    this.slots.delete(this.key[s]!);
    this.free.push(s);
    this.evictions++;
  }
}
