// What one replica of `--replicas` tells the others of the workers' caches (docs/replicas.md,
// "What replicas share"). Each replica's cache_aware learns the prefixes it sends to each worker;
// a conversation whose next turn reaches another replica would find that replica's picture empty
// and go wherever load says. So every prefix a replica's cache_aware sends goes, as the page keys
// it already computed (prefix-tree.ts PageKeys: a page's length and hash, no tokens), into a
// batch; the batch goes to the primary over IPC, which relays it to the other replicas, and each
// inserts the pages into its own tree of that worker. Workers are named by URL: ids are each
// pool's own. The SGLang gateway's mesh shares its cache_aware trees between gateways the same
// way, as (worker URL, prefix) inserts (`TreeInsertOp { key, tenant }` in its `tree_ops.rs`).
//
// The request path pays one copy of the page keys into the batch buffer: no allocation, no
// message. Batches go at most every FLUSH_MS (or sooner when full), so the IPC's cost follows
// time, not requests; a batch holds at most MAX_PAGES pages, a longer sequence is cut to its
// first MAX_PAGES (still a prefix), and when MAX_UNSENT batches are still waiting to be written
// to the channel the next is dropped and counted: a replica never queues without bound for a
// peer that cannot keep up. The picture stays what it is, approximate: a lost batch costs a
// cache miss, never a wrong answer.
import { PageKeys } from './prefix-tree.ts';
import type { Worker } from './worker.ts';
import type { WorkerPool } from './worker-pool.ts';

/** What the share needs of the pool: a worker by URL, and the policy of that worker to teach. */
export type PrefixPool = Pick<WorkerPool, 'byUrl' | 'learnPrefix'>;

/** cache_aware hands it each sequence it sent to a worker (`k` is reused: copied at once). */
export type PrefixSink = (w: Worker, k: PageKeys) => void;

/** One batch as it crosses processes (structured clone: plain arrays and typed arrays only). */
export interface PrefixBatch {
  /** The workers' URLs; entries name them by index. */
  urls: string[];
  /** Three numbers per sequence: its URL's index, its page size, its pages. */
  entries: Uint32Array;
  /** Every sequence's page keys, one after the other. */
  keys: Float64Array<ArrayBuffer>;
}

/** Pages of prefixes a replica shared: handed to IPC, dropped (the channel backed up), received from others. */
export interface PrefixShareCounts {
  sent: number;
  dropped: number;
  received: number;
}

const FLUSH_MS = 10;
const MAX_PAGES = 65_536;
const MAX_UNSENT = 4;

export class PrefixShare {
  readonly counts: PrefixShareCounts = { sent: 0, dropped: 0, received: 0 };
  private keys = new Float64Array(4096);
  private used = 0;
  private entries: number[] = [];
  private urls: string[] = [];
  private urlIndex = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private unsent = 0;
  /** The keys of one received sequence, as a tree's insert reads them. */
  private readonly view = new PageKeys();

  constructor(
    private readonly pool: PrefixPool,
    /** Send a batch to the primary; `written` once the channel has written it. */
    private readonly send: (batch: PrefixBatch, written: () => void) => void,
  ) {}

  /** The pool's prefix sink: `k`'s pages were sent to `w`. */
  readonly note: PrefixSink = (w, k) => {
    const pages = Math.min(k.pages, MAX_PAGES);
    if (pages === 0) return;
    if (this.used + pages > MAX_PAGES) this.flush();
    if (this.used + pages > this.keys.length) {
      const grown = new Float64Array(Math.min(MAX_PAGES, Math.max(this.used + pages, this.keys.length * 2)));
      grown.set(this.keys.subarray(0, this.used));
      this.keys = grown;
    }
    this.keys.set(k.keys.subarray(0, pages), this.used);
    this.used += pages;
    let u = this.urlIndex.get(w.url);
    if (u === undefined) {
      u = this.urls.push(w.url) - 1;
      this.urlIndex.set(w.url, u);
    }
    this.entries.push(u, k.pageSize, pages);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  };

  /** Send what is batched now. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.used === 0) return;
    // slice, not subarray: a view would carry its whole buffer across the channel.
    const batch: PrefixBatch = { urls: this.urls, entries: Uint32Array.from(this.entries), keys: this.keys.slice(0, this.used) };
    const pages = this.used;
    this.used = 0;
    this.entries = [];
    this.urls = [];
    this.urlIndex.clear();
    if (this.unsent >= MAX_UNSENT) {
      this.counts.dropped += pages;
      return;
    }
    this.unsent++;
    this.send(batch, () => this.unsent--);
    this.counts.sent += pages;
  }

  /** Another replica's batch (relayed by the primary): each sequence goes into this replica's tree of its worker. */
  receive(batch: unknown): void {
    if (!isBatch(batch)) return;
    const { urls, entries, keys } = batch;
    const workers = urls.map((u) => this.pool.byUrl(u) ?? null);
    const view = this.view;
    let at = 0;
    for (let i = 0; i + 2 < entries.length; i += 3) {
      const w = workers[entries[i]!] ?? null;
      const pageSize = entries[i + 1]!;
      const pages = entries[i + 2]!;
      if (at + pages > keys.length || pageSize < 1) return;
      if (w !== null) {
        view.keys = keys.subarray(at, at + pages);
        view.pages = pages;
        view.pageSize = pageSize;
        view.tokens = pages * pageSize;
        this.pool.learnPrefix(w, view);
      }
      at += pages;
      this.counts.received += pages;
    }
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}

function isBatch(b: unknown): b is PrefixBatch {
  if (typeof b !== 'object' || b === null) return false;
  const o = b as Record<string, unknown>;
  return Array.isArray(o.urls) && o.urls.every((u) => typeof u === 'string') && o.entries instanceof Uint32Array && o.keys instanceof Float64Array;
}
