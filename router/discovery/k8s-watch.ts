// List + watch of one Kubernetes collection that cannot go silently stale (the failure that kept
// vLLM production-stack's router on dead pods for 22 hours, #1091):
//  - every (re)connect starts with a full list, handed over whole (the source turns it into
//    sink.resync), so a delete missed while the watch was down cannot leave a stale worker;
//  - a watch asks the server to end it after one re-list period (timeoutSeconds), and the next
//    cycle lists again: the re-list timer;
//  - a watchdog aborts a watch the server still holds open `watchdogMs` past its timeoutSeconds
//    (open but silent: a proxy or a stuck API server), and the state says `stale since` its last byte;
//  - failures restart the cycle after a jittered exponential backoff; a 410 Gone (ERROR event
//    "too old resource version") re-lists at once; BOOKMARK events move the resourceVersion on;
//  - 403 is `forbidden` with the verb that was refused, a refused connection `unreachable`.
import type { DiscoveryState } from './types.ts';
import { K8sApiError, type K8sClient, type K8sObject, type WatchEvent } from './k8s-api.ts';

export interface WatchTarget {
  /** Collection path, e.g. /api/v1/namespaces/ns/pods. */
  path: string;
  /** Extra query (labelSelector). */
  query: Record<string, string>;
  /** For messages: 'pods', 'endpointslices.discovery.k8s.io'. */
  resource: string;
  namespace: string | null;
}

export interface WatchLoopOptions {
  client: K8sClient;
  target: WatchTarget;
  relistMs: number;
  watchdogMs: number;
  /** First retry delay and cap (jittered: each delay is drawn from [d/2, d]). */
  backoffMinMs?: number;
  backoffMaxMs?: number;
  random?: () => number;
  now?: () => number;
  onList(items: K8sObject[]): void;
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: K8sObject): void;
  onState(s: DiscoveryState): void;
  log?(line: string): void;
}

/** Why a watch cycle ended; `relist` and `closed` are normal ends. */
type WatchEnd = 'closed' | 'watchdog';

class Gone extends Error {}

export class WatchLoop {
  private stopped = false;
  private ac: AbortController | null = null;
  private loop: Promise<void> | null = null;
  private state: DiscoveryState | null = null;
  private sleepTimer: NodeJS.Timeout | null = null;
  private wake: (() => void) | null = null;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Successful lists so far (tests wait on it). */
  lists = 0;

  constructor(private readonly o: WatchLoopOptions) {
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
  }

  /** Starts the loop; resolves after the first list attempt, whatever its outcome. */
  start(): Promise<void> {
    let first!: () => void;
    const firstDone = new Promise<void>((r) => { first = r; });
    this.loop = this.run(first);
    return firstDone;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.ac?.abort();
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.wake?.();
    await this.loop;
  }

  private setState(s: DiscoveryState): void {
    const p = this.state;
    // A stale state keeps the moment it began; repeats of the same failure are not news.
    if (p && p.kind === s.kind && (s.kind === 'stale' || ((s.kind === 'forbidden' || s.kind === 'unreachable') && (p as { detail: string }).detail === s.detail))) return;
    this.state = s;
    this.o.onState(s);
  }

  private stale(detail: string, since = this.now()): void {
    this.setState({ kind: 'stale', since, detail });
  }

  private async run(first: () => void): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const ac = new AbortController();
      this.ac = ac;
      let verb = 'list';
      let opened = Infinity;
      try {
        const list = await this.o.client.list(this.o.target.path, this.o.target.query, ac.signal);
        if (this.stopped) break;
        const rv = list.metadata?.resourceVersion;
        if (!rv) throw new K8sApiError('list: no metadata.resourceVersion in the answer', 200, undefined, undefined);
        this.o.onList(list.items ?? []);
        this.lists++;
        this.setState({ kind: 'synced', at: this.now() });
        first();
        verb = 'watch';
        opened = this.now();
        const end = await this.watch(rv, ac);
        if (this.stopped) break;
        if (end === 'watchdog') {
          failures++;
          await this.sleep(this.backoff(failures));
        } else if (this.now() - opened < (this.o.backoffMinMs ?? 500)) {
          // A server that ends every watch at once must not turn this into a busy list loop.
          failures++;
          await this.sleep(this.backoff(failures));
        } else {
          failures = 0;
        }
      } catch (err) {
        first();
        if (this.stopped) break;
        if (err instanceof Gone) {
          this.o.log?.(`${this.o.target.resource}: ${err.message}; listing again`);
          continue;
        }
        // A watch that served a while before it broke (a load balancer's idle cut) starts the
        // backoff over: only failures in a row lengthen it.
        if (this.now() - opened > 10 * (this.o.backoffMinMs ?? 500)) failures = 0;
        failures++;
        this.failed(err, verb);
        await this.sleep(this.backoff(failures));
      }
    }
  }

  private failed(err: unknown, verb: string): void {
    const t = this.o.target;
    const where = t.namespace ? `in namespace ${t.namespace}` : 'in all namespaces';
    const e = err instanceof K8sApiError ? err : new K8sApiError((err as Error).message ?? String(err), 0, undefined, undefined);
    if (e.status === 403) {
      this.setState({ kind: 'forbidden', detail: `${verb} ${t.resource} ${where}` });
    } else if (e.status === 401) {
      this.setState({ kind: 'forbidden', detail: `${verb} ${t.resource} ${where}: unauthorized (401): ${e.message}` });
    } else if (e.status === 0 && (e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'EHOSTUNREACH' || e.code === 'ENETUNREACH' || e.code === 'EAI_AGAIN' || e.code === 'ETIMEDOUT')) {
      this.setState({ kind: 'unreachable', detail: `${this.o.client.server}: ${e.code}` });
    } else {
      this.stale(`${verb} ${t.resource}: ${e.status ? `HTTP ${e.status} ` : ''}${e.message}`);
    }
    this.o.log?.(`${verb} ${t.resource} ${where} failed: ${e.message}`);
  }

  private watch(rv: string, ac: AbortController): Promise<WatchEnd> {
    const o = this.o;
    const timeoutSeconds = Math.max(1, Math.ceil(o.relistMs / 1000));
    let lastByte = this.now();
    let resourceVersion = rv;
    let dog = false;
    const timer = setTimeout(() => {
      dog = true;
      ac.abort();
    }, timeoutSeconds * 1000 + o.watchdogMs);
    const query = { ...o.target.query, resourceVersion, allowWatchBookmarks: 'true', timeoutSeconds: String(timeoutSeconds) };
    const onEvent = (e: WatchEvent) => {
      const obj = e.object ?? {};
      const v = obj.metadata?.resourceVersion;
      if (e.type === 'ERROR') {
        const s = obj as { code?: number; reason?: string; message?: string };
        if (s.code === 410 || s.reason === 'Expired' || s.reason === 'Gone') throw new Gone(`watch from resourceVersion ${resourceVersion}: ${s.message ?? '410 Gone'}`);
        throw new K8sApiError(s.message ?? 'watch: ERROR event', s.code ?? 500, s.reason, undefined);
      }
      if (v) resourceVersion = v;
      if (e.type === 'BOOKMARK') return;
      if (e.type === 'ADDED' || e.type === 'MODIFIED' || e.type === 'DELETED') o.onEvent(e.type, obj);
    };
    return o.client.watch(o.target.path, query, ac.signal, onEvent, () => { lastByte = this.now(); }).then(
      (): WatchEnd => (dog ? this.dogged(lastByte) : 'closed'),
      (err: unknown): WatchEnd => {
        if (dog) return this.dogged(lastByte);
        throw err;
      },
    ).finally(() => clearTimeout(timer));
  }

  private dogged(lastByte: number): WatchEnd {
    this.stale(`watch ${this.o.target.resource} held open past its timeoutSeconds; last byte at ${new Date(lastByte).toISOString()}`, lastByte);
    this.o.log?.(`watch ${this.o.target.resource}: open past its timeout with nothing new; listing again`);
    return 'watchdog';
  }

  private backoff(failures: number): number {
    const min = this.o.backoffMinMs ?? 500;
    const max = this.o.backoffMaxMs ?? 30_000;
    const d = Math.min(max, min * 2 ** Math.min(failures - 1, 20));
    return d / 2 + this.random() * (d / 2);
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(() => {
        this.sleepTimer = null;
        this.wake = null;
        resolve();
      }, ms);
    });
  }
}
