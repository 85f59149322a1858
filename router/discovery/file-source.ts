// The watched-file source (--worker-file): a YAML list of workers, re-read when the file changes
// (fs.watch on its directory, since editors and `kubectl cp`/ConfigMap updates replace the file
// by a rename) and every --worker-file-interval-ms besides (a notification can be lost: network
// file systems, an overlay that does not forward them). A worker that leaves the file with a
// grace (its own `drain_grace_ms`, else the file's top-level one) is drained over that grace,
// its streams moved off it; without one it is removed at once. The key is the worker's URL.
//
//   drain_grace_ms: 30000          # optional (a mapping with `workers:`)
//   workers:
//     - http://10.0.0.11:30000
//     - { url: http://10.0.0.12:30000, format: vllm, name: b, drain_grace_ms: 6000 }
//
// A bare list of the same entries is a file too.
import { readFile } from 'node:fs/promises';
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { formatNames } from '../formats/registry.ts';
import { normalizeWorkerUrl } from '../worker-url.ts';
import type { DiscoveredWorker, DiscoverySink, DiscoverySource } from './types.ts';

export interface FileEntry {
  worker: DiscoveredWorker;
  /** Drain over this long when it leaves the file; 0: remove at once. */
  graceMs: number;
}

/** Parse the file's text; throws with what is wrong and where. */
export function parseWorkerFile(text: string, where: string): FileEntry[] {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new Error(`${where}: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return [];
  let list: unknown = doc;
  let topGrace = 0;
  if (typeof doc === 'object' && !Array.isArray(doc)) {
    const m = doc as Record<string, unknown>;
    for (const k of Object.keys(m)) if (k !== 'workers' && k !== 'drain_grace_ms') throw new Error(`${where}: unknown key '${k}' (workers, drain_grace_ms)`);
    topGrace = grace(m.drain_grace_ms, `${where}: drain_grace_ms`);
    list = m.workers ?? [];
  }
  if (!Array.isArray(list)) throw new Error(`${where}: must be a list of workers, or a mapping with 'workers:'`);
  const seen = new Set<string>();
  const out: FileEntry[] = [];
  list.forEach((item, i) => {
    const at = `${where}: workers[${i}]`;
    const e = typeof item === 'string' ? { url: item } : item;
    if (typeof e !== 'object' || e === null || Array.isArray(e)) throw new Error(`${at}: must be a URL or {url, format?, name?, drain_grace_ms?}`);
    const r = e as Record<string, unknown>;
    for (const k of Object.keys(r)) if (!['url', 'format', 'name', 'drain_grace_ms'].includes(k)) throw new Error(`${at}: unknown key '${k}' (url, format, name, drain_grace_ms)`);
    if (typeof r.url !== 'string') throw new Error(`${at}: url must be a string`);
    let url: string;
    try {
      url = normalizeWorkerUrl(r.url);
    } catch (err) {
      throw new Error(`${at}: ${(err as Error).message}`);
    }
    if (seen.has(url)) throw new Error(`${at}: ${url} is listed twice`);
    seen.add(url);
    if (r.format !== undefined && (typeof r.format !== 'string' || !formatNames().includes(r.format))) throw new Error(`${at}: format must be one of ${formatNames().join(', ')}`);
    if (r.name !== undefined && typeof r.name !== 'string') throw new Error(`${at}: name must be a string`);
    const w: DiscoveredWorker = { key: url, url, meta: { source: 'file', ...(r.name !== undefined ? { name: r.name as string } : {}) } };
    if (typeof r.format === 'string') w.format = r.format;
    out.push({ worker: w, graceMs: r.drain_grace_ms === undefined ? topGrace : grace(r.drain_grace_ms, `${at}: drain_grace_ms`) });
  });
  return out;
}

function grace(v: unknown, where: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new Error(`${where} must be a non-negative integer (ms), got ${JSON.stringify(v)}`);
  return v;
}

export class FileSource implements DiscoverySource {
  readonly name = 'file';
  private sink: DiscoverySink | null = null;
  private watcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private debounce: NodeJS.Timeout | null = null;
  /** What the last good read listed, with each entry's grace. */
  private listed = new Map<string, FileEntry>();
  /** Keys drained after leaving the file, and when their drain ends. */
  private readonly leaving = new Map<string, number>();
  private reading: Promise<void> | null = null;
  private again = false;
  private staleSince: number | null = null;

  /** `watch: false`: re-read only on the timer and read() (tests that ask for each read). */
  constructor(private readonly path: string, private readonly intervalMs: number, private readonly watchFile = true) {
    this.path = resolve(path);
  }

  /** Reads the file once before returning: a bad file fails the router's start. */
  async start(sink: DiscoverySink): Promise<void> {
    this.sink = sink;
    const entries = parseWorkerFile(await readFile(this.path, 'utf8'), this.path);
    this.apply(entries);
    const name = basename(this.path);
    if (this.watchFile) {
      try {
        this.watcher = watch(dirname(this.path), { persistent: false }, (_event, file) => {
          if (file === null || file === name) this.soon();
        });
        this.watcher.on('error', () => undefined); // the timer still re-reads
      } catch {
        // No notifications here (some file systems): the timer re-reads.
      }
    }
    if (this.intervalMs > 0) {
      this.timer = setInterval(() => void this.read(), this.intervalMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
    if (this.debounce) clearTimeout(this.debounce);
    this.watcher = null;
    this.timer = null;
    this.sink = null;
    await this.reading;
  }

  /** Re-read after a change notification, once for a burst of them (an editor's write + rename). */
  private soon(): void {
    if (this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = null;
      void this.read();
    }, 50);
    this.debounce.unref();
  }

  /** Re-read now (tests; the watcher and the timer). One read at a time; one more if asked meanwhile. */
  read(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        await this.readOnce();
      } while (this.again && this.sink);
    })().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  private async readOnce(): Promise<void> {
    if (!this.sink) return;
    let entries: FileEntry[];
    try {
      entries = parseWorkerFile(await readFile(this.path, 'utf8'), this.path);
    } catch (err) {
      // Keep the last good listing; say so where it is seen.
      this.staleSince ??= Date.now();
      this.sink?.state({ kind: 'stale', since: this.staleSince, detail: (err as Error).message });
      return;
    }
    this.apply(entries);
  }

  private apply(entries: FileEntry[]): void {
    const sink = this.sink;
    if (!sink) return;
    const now = Date.now();
    const next = new Map(entries.map((e) => [e.worker.key, e]));
    for (const [key, deadline] of this.leaving) if (deadline <= now || next.has(key)) this.leaving.delete(key);
    for (const [key, e] of this.listed) {
      if (next.has(key) || this.leaving.has(key)) continue;
      if (e.graceMs > 0) {
        this.leaving.set(key, now + e.graceMs);
        sink.drain(key, now + e.graceMs, 'left the worker file');
      } else sink.remove(key, 'left the worker file');
    }
    this.listed = next;
    sink.resync(entries.map((e) => e.worker));
    this.staleSince = null;
    sink.state({ kind: 'synced', at: now });
  }
}
