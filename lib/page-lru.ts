// The least-recently-used set of page keys under both prefix caches: the router's picture of a
// worker's cache (router/pool/prefix-tree.ts, cache_aware's tree) and the simulator's stand-in for
// SGLang's radix cache (sim/prefix-cache.ts). Each names a page by its length and the hash of
// every token up to its end (`pageKey`), so a prefix is a chain of keys and no node stores tokens
// or children; they differ only in the hash and in how a match reads the set.
//
// Recency is an intrusive doubly linked list in typed arrays (no object per page). Whoever
// touches a path touches it from its deepest page up to its root (`insertPath`), so a page is
// always more recent than every page below it: the least recently used page is a leaf, as in
// SGLang's RadixCache.evict, eviction never cuts a path in the middle, and the set of pages held
// is prefix-closed. Once the arrays have grown, nothing here allocates.

const NIL = -1;

/** The key of the page that ends a prefix of `length` tokens whose 32-bit hash is `hash`. */
export function pageKey(length: number, hash: number): number {
  return length * 4294967296 + hash;
}

export class PageLru {
  /** Page key → slot. */
  protected readonly slots = new Map<number, number>();
  private key = new Float64Array(64);
  private prev = new Int32Array(64);
  private next = new Int32Array(64);
  /** Least recently used slot (evicted first) and most recent one. */
  private head = NIL;
  private tail = NIL;
  /** Slots freed by eviction, reused before the arrays grow. */
  private free: number[] = [];
  private used = 0;
  /** Most pages held: `capacityTokens` in whole pages. */
  readonly capacityPages: number;
  /** Pages evicted so far. */
  evictions = 0;

  constructor(
    /** Most tokens remembered; whole pages only. */
    readonly capacityTokens: number,
    readonly pageSize = 1,
  ) {
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

  /** Page slots the arrays hold room for, used or not (a cleared set keeps them for reuse). */
  get allocatedSlots(): number {
    return this.key.length;
  }

  clear(): void {
    this.slots.clear();
    this.head = this.tail = NIL;
    this.free = [];
    this.used = 0;
  }

  /**
   * The path whose page keys are `keys[0..pages)`, root first, was used: every page of it becomes
   * the most recent, each more recent than the pages below it; then the least recent pages go
   * until the bound holds.
   */
  protected insertPath(keys: Float64Array, pages: number): void {
    if (this.capacityPages <= 0) return;
    // Deepest first, so that each page ends up more recent than the pages below it.
    for (let i = pages - 1; i >= 0; i--) {
      const k = keys[i]!;
      const s = this.slots.get(k);
      if (s !== undefined) this.toTail(s);
      else this.append(k);
    }
    while (this.slots.size > this.capacityPages) this.evictHead();
  }

  /** The held pages `keys[0..pages)` become the most recent, deepest first (a match that touches). */
  protected touchPath(keys: Float64Array, pages: number): void {
    for (let i = pages - 1; i >= 0; i--) this.toTail(this.slots.get(keys[i]!)!);
  }

  private append(k: number): void {
    let s = this.free.pop();
    if (s === undefined) {
      s = this.used++;
      if (s >= this.key.length) this.grow();
    }
    this.key[s] = k;
    this.slots.set(k, s);
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
