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
// time, not requests. Bounds: a sequence is shared up to its first MAX_SEQUENCE_PAGES pages (still
// a prefix: a longer prompt's match is at least that much), a batch holds at most MAX_PAGES, and
// when MAX_UNSENT batches still wait to be written to the channel the next is dropped and
// counted. A receiving replica inserts at most SLICE_PAGES pages per turn of its event loop (a
// tree insert costs what the sender's own did), so another replica's burst never stalls its
// streams for long, and holds at most MAX_INBOX batches, dropping (and counting) past that: a
// replica never queues without bound for a peer it cannot keep up with. The picture stays what it
// is, approximate: a lost batch costs a cache miss, never a wrong answer.
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

/** Pages of prefixes a replica shared: handed to IPC; dropped (its channel backed up, or it fell behind the others'); received from the others and learned. */
export interface PrefixShareCounts {
  sent: number;
  dropped: number;
  received: number;
}

const FLUSH_MS = 10;
const MAX_SEQUENCE_PAGES = 4096;
const MAX_PAGES = 65_536;
const MAX_UNSENT = 4;
const SLICE_PAGES = 2048;
const MAX_INBOX = 8;

/** A received batch being learned, a slice at a time. */
interface Inbound {
  batch: PrefixBatch;
  /** Its URLs' workers in this pool, resolved when its learning starts. */
  workers: (Worker | null)[] | null;
  /** The next entry (index into entries) and where its keys start. */
  entry: number;
  at: number;
}

export class PrefixShare {
  readonly counts: PrefixShareCounts = { sent: 0, dropped: 0, received: 0 };
  private keys = new Float64Array(4096);
  private used = 0;
  private entries: number[] = [];
  private urls: string[] = [];
  private urlIndex = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private unsent = 0;
  private readonly inbox: Inbound[] = [];
  private learning: NodeJS.Immediate | null = null;
  /** The keys of one received sequence, as a tree's insert reads them. */
  private readonly view = new PageKeys();

  constructor(
    private readonly pool: PrefixPool,
    /** Send a batch to the primary; `written` once the channel has written it. */
    private readonly send: (batch: PrefixBatch, written: () => void) => void,
  ) {}

  /** The pool's prefix sink: `k`'s pages were sent to `w`. */
  readonly note: PrefixSink = (w, k) => {
    const pages = Math.min(k.pages, MAX_SEQUENCE_PAGES);
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

  /**
   * Another replica's batch (relayed by the primary): each sequence goes into this replica's tree
   * of its worker, at most SLICE_PAGES pages now and the rest on the next turns.
   */
  receive(batch: unknown): void {
    if (!isBatch(batch)) return;
    if (this.inbox.length >= MAX_INBOX) {
      this.counts.dropped += batch.keys.length;
      return;
    }
    this.inbox.push({ batch, workers: null, entry: 0, at: 0 });
    if (this.learning === null) this.learnSome();
  }

  private learnSome(): void {
    this.learning = null;
    const view = this.view;
    let budget = SLICE_PAGES;
    while (this.inbox.length > 0 && budget > 0) {
      const job = this.inbox[0]!;
      const { urls, entries, keys } = job.batch;
      job.workers ??= urls.map((u) => this.pool.byUrl(u) ?? null);
      for (; job.entry + 2 < entries.length && budget > 0; job.entry += 3) {
        const w = job.workers[entries[job.entry]!] ?? null;
        const pageSize = entries[job.entry + 1]!;
        const pages = entries[job.entry + 2]!;
        if (job.at + pages > keys.length || pageSize < 1) {
          job.entry = entries.length; // malformed: the rest of it is not read
          break;
        }
        if (w !== null) {
          view.keys = keys.subarray(job.at, job.at + pages);
          view.pages = pages;
          view.pageSize = pageSize;
          view.tokens = pages * pageSize;
          this.pool.learnPrefix(w, view);
        }
        job.at += pages;
        budget -= pages;
        this.counts.received += pages;
      }
      if (job.entry + 2 >= entries.length) this.inbox.shift();
    }
    if (this.inbox.length > 0) this.learning = setImmediate(() => this.learnSome());
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.learning !== null) clearImmediate(this.learning);
    this.learning = null;
    this.inbox.length = 0;
  }
}

function isBatch(b: unknown): b is PrefixBatch {
  if (typeof b !== 'object' || b === null) return false;
  const o = b as Record<string, unknown>;
  return Array.isArray(o.urls) && o.urls.every((u) => typeof u === 'string') && o.entries instanceof Uint32Array && o.keys instanceof Float64Array;
}
