// Workers from Kubernetes Pods, as the SGLang gateway finds them (sgl-router/src/service_discovery.rs,
// PodInfo::from_pod and is_healthy: a pod with an IP, phase Running and condition Ready=True, at
// http://<podIP>:<port>), keyed by the pod's UID so that a replacement pod at a new IP is a new
// worker and a re-created pod of the same name is not mistaken for the old one.
//
// Beyond the gateway (which drops DELETED events and removes a terminating pod at once):
//  - a pod with metadata.deletionTimestamp is drained until that moment (sink.drain), so its
//    streams move before the kubelet kills it;
//  - a pod that stops being Ready, loses its IP, is evicted or whose container died is removed
//    with the reason read from its status (Evicted, OOMKilled, exit code);
//  - annotations override the port (`baton.dev/port`) and the format (`baton.dev/format`).
//    The gateway reads only `sglang.ai/bootstrap-port` (the P/D bootstrap port, not the serving
//    port), so there is no gateway annotation to honour here.
import type { DiscoveredWorker, DiscoverySink, DiscoverySource } from './types.ts';
import type { FormatName } from '../core/types.ts';
import { formatNames } from '../formats/registry.ts';
import type { K8sClient, K8sObject } from './k8s-api.ts';
import { WatchLoop } from './k8s-watch.ts';

export const PORT_ANNOTATION = 'baton.dev/port';
/**
 * A prefill pod's bootstrap port, as the gateway reads it: service_discovery.rs `PodInfo::from_pod`
 * (`annotations.get(&config.bootstrap_port_annotation)`, default `sglang.ai/bootstrap-port`,
 * `.parse::<u16>().ok()`: a value that is not a port is no port, and the server is probed).
 */
export const BOOTSTRAP_PORT_ANNOTATION = 'sglang.ai/bootstrap-port';
export const FORMAT_ANNOTATION = 'baton.dev/format';

export interface K8sSourceOptions {
  client: K8sClient;
  /** Null: all namespaces (needs a ClusterRole). */
  namespace: string | null;
  /** `k=v` terms, ANDed (the gateway's `--selector`). */
  selector: string[];
  /** P/D: the role of the pods this source finds (its selector is --prefill-selector or --decode-selector). */
  role?: 'prefill' | 'decode';
  /**
   * Pods that also match any of these selectors are another source's: the gateway gives a pod one
   * type, prefill first, then decode, then regular (service_discovery.rs `PodInfo::from_pod`), so
   * the decode source leaves prefill pods to the prefill one and the regular source leaves both.
   */
  unless?: string[][];
  port: number;
  relistMs: number;
  watchdogMs: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  random?: () => number;
  log?(line: string): void;
}

/** What one pod means for the worker set. */
export type PodView =
  | { kind: 'up'; worker: DiscoveredWorker }
  | { kind: 'draining'; worker: DiscoveredWorker; deadline: number; reason: string }
  | { kind: 'down'; key: string; reason: string }
  | { kind: 'invalid'; key: string; reason: string };

interface PodShape {
  metadata?: K8sObject['metadata'];
  spec?: { nodeName?: string };
  status?: {
    phase?: string;
    podIP?: string;
    reason?: string;
    message?: string;
    conditions?: { type?: string; status?: string }[];
    containerStatuses?: { name?: string; state?: { terminated?: { reason?: string; exitCode?: number } }; lastState?: { terminated?: { reason?: string; exitCode?: number } } }[];
  };
}

/** Reads a pod (a watch event's object or a list item: JSON as the API server sends it). */
export function podView(obj: K8sObject, port: number, role?: 'prefill' | 'decode'): PodView {
  const pod = obj as PodShape;
  const md = pod.metadata ?? {};
  const key = md.uid ?? `${md.namespace ?? ''}/${md.name ?? ''}`;
  const st = pod.status ?? {};
  const ann = md.annotations ?? {};
  let p = port;
  if (ann[PORT_ANNOTATION] !== undefined) {
    const n = Number(ann[PORT_ANNOTATION]);
    if (!Number.isInteger(n) || n < 1 || n > 65535) return { kind: 'invalid', key, reason: `annotation ${PORT_ANNOTATION} must be a port number, got ${JSON.stringify(ann[PORT_ANNOTATION])}` };
    p = n;
  }
  let format: FormatName | undefined;
  if (ann[FORMAT_ANNOTATION] !== undefined) {
    const names = formatNames();
    if (!names.includes(ann[FORMAT_ANNOTATION]!)) return { kind: 'invalid', key, reason: `annotation ${FORMAT_ANNOTATION} must be one of ${names.join(', ')}, got ${JSON.stringify(ann[FORMAT_ANNOTATION])}` };
    format = ann[FORMAT_ANNOTATION];
  }
  if (!st.podIP) return { kind: 'down', key, reason: statusReason(pod, 'no pod IP') };
  const host = st.podIP.includes(':') ? `[${st.podIP}]` : st.podIP;
  const worker: DiscoveredWorker = {
    key,
    url: `http://${host}:${p}`,
    ...(format ? { format } : {}),
    meta: { source: 'k8s-pods', pod: md.name, namespace: md.namespace, node: pod.spec?.nodeName },
  };
  if (role !== undefined) {
    worker.pdRole = role;
    const b = role === 'prefill' ? Number(ann[BOOTSTRAP_PORT_ANNOTATION] ?? NaN) : NaN;
    worker.bootstrapPort = Number.isInteger(b) && b >= 1 && b <= 65535 ? b : null;
  }
  if (md.deletionTimestamp) {
    const deadline = Date.parse(md.deletionTimestamp);
    const grace = md.deletionGracePeriodSeconds;
    return { kind: 'draining', worker, deadline: Number.isFinite(deadline) ? deadline : Date.now(), reason: `pod deleted${grace !== undefined ? ` (grace ${grace}s)` : ''}` };
  }
  if (st.phase !== 'Running') return { kind: 'down', key, reason: statusReason(pod, `phase ${st.phase ?? 'unknown'}`) };
  const ready = (st.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
  if (!ready) return { kind: 'down', key, reason: statusReason(pod, 'not ready') };
  return { kind: 'up', worker };
}

/** Why a pod is not serving, from its status: Evicted (and the kubelet's message), OOMKilled, an exit code. */
export function statusReason(pod: PodShape, fallback: string): string {
  const st = pod.status ?? {};
  if (st.reason) return st.message ? `${st.reason}: ${st.message}` : st.reason;
  for (const c of st.containerStatuses ?? []) {
    const t = c.state?.terminated ?? c.lastState?.terminated;
    if (t) return `${t.reason ?? 'terminated'}${t.exitCode !== undefined ? ` (exit code ${t.exitCode})` : ''}`;
  }
  return fallback;
}

/**
 * Turns what a watch loop sees (full listings and events of objects, each read into PodViews)
 * into sink calls, remembering which keys it reported so that a removal or drain is sent only
 * for a worker the sink has.
 */
export class ViewTracker {
  /** Keys reported to the sink: upserted ('up') or draining (with its deadline). */
  readonly known = new Map<string, { url: string; deadline: number | null }>();

  constructor(
    private readonly sink: DiscoverySink,
    private readonly log?: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * A full listing: resync with every worker that exists (draining ones included, until their
   * deadline), then the drains.
   */
  listed(views: PodView[]): void {
    const now = this.now();
    const all: DiscoveredWorker[] = [];
    const drains: { key: string; deadline: number; reason: string }[] = [];
    const next = new Map<string, { url: string; deadline: number | null }>();
    for (const v of views) {
      if (v.kind === 'up') {
        all.push(v.worker);
        next.set(v.worker.key, { url: v.worker.url, deadline: null });
      } else if (v.kind === 'draining') {
        // A draining pod still exists until its deadline: listing it keeps resync from cutting its streams.
        const prev = this.known.get(v.worker.key);
        if (!prev) continue; // never served through us: nothing to drain
        // Past its deadline it is gone, even if still listed (stuck in Terminating: a lost node, a
        // finalizer): left out, resync removes what is left of it and it is not known any more, so
        // no later listing or event can add it again. The gateway never counts a terminating pod
        // as present either (service_discovery.rs `reconcile_from_list`).
        if (v.deadline <= now) continue;
        all.push(v.worker);
        next.set(v.worker.key, { url: v.worker.url, deadline: v.deadline });
        drains.push({ key: v.worker.key, deadline: v.deadline, reason: v.reason });
      } else if (v.kind === 'invalid') {
        this.log?.(`pod ${v.key} skipped: ${v.reason}`);
      }
    }
    this.known.clear();
    for (const [k, v] of next) this.known.set(k, v);
    this.sink.resync(all);
    for (const d of drains) this.sink.drain(d.key, d.deadline, d.reason);
  }

  /** One object changed (ADDED or MODIFIED). */
  changed(v: PodView): void {
    const prev = this.known.get(v.kind === 'up' || v.kind === 'draining' ? v.worker.key : v.key);
    if (v.kind === 'up') {
      // A pod's IP does not change while it lives, but a port annotation may: the sink is idempotent.
      this.known.set(v.worker.key, { url: v.worker.url, deadline: null });
      if (!prev || prev.url !== v.worker.url || prev.deadline !== null) this.sink.upsert(v.worker);
    } else if (v.kind === 'draining') {
      if (!prev || prev.deadline === v.deadline) return;
      this.known.set(v.worker.key, { url: v.worker.url, deadline: v.deadline });
      this.sink.drain(v.worker.key, v.deadline, v.reason);
    } else {
      if (v.kind === 'invalid') this.log?.(`pod ${v.key} skipped: ${v.reason}`);
      if (!prev) return;
      this.known.delete(v.key);
      this.sink.remove(v.key, v.reason);
    }
  }

  deleted(key: string, reason: string): void {
    if (!this.known.delete(key)) return;
    this.sink.remove(key, reason);
  }
}

export function selectorString(terms: string[]): string {
  return terms.join(',');
}

/** Whether a pod's labels carry every `k=v` term (the gateway's `matches_selector`; no terms: no). */
export function labelsMatch(obj: K8sObject, terms: readonly string[]): boolean {
  if (terms.length === 0) return false;
  const labels = obj.metadata?.labels ?? {};
  return terms.every((t) => {
    const i = t.indexOf('=');
    return labels[t.slice(0, i)] === t.slice(i + 1);
  });
}

export class K8sPodsSource implements DiscoverySource {
  readonly name: string;
  private loop: WatchLoop | null = null;

  constructor(private readonly o: K8sSourceOptions) {
    this.name = o.role ? `k8s-pods-${o.role}` : 'k8s-pods';
  }

  /** A pod as this source sees it: another source's pod (`unless`) is not one of its workers. */
  private view(obj: K8sObject): PodView {
    const v = podView(obj, this.o.port, this.o.role);
    if (this.o.unless?.some((terms) => labelsMatch(obj, terms))) return { kind: 'down', key: v.kind === 'up' || v.kind === 'draining' ? v.worker.key : v.key, reason: 'matches another role\'s selector' };
    return v;
  }

  get lists(): number {
    return this.loop?.lists ?? 0;
  }

  async start(sink: DiscoverySink): Promise<void> {
    const o = this.o;
    const tracker = new ViewTracker(sink, o.log);
    this.loop = new WatchLoop({
      client: o.client,
      target: {
        path: o.namespace ? `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/pods` : '/api/v1/pods',
        query: o.selector.length ? { labelSelector: selectorString(o.selector) } : {},
        resource: 'pods',
        namespace: o.namespace,
      },
      relistMs: o.relistMs,
      watchdogMs: o.watchdogMs,
      backoffMinMs: o.backoffMinMs,
      backoffMaxMs: o.backoffMaxMs,
      random: o.random,
      log: o.log,
      onList: (items) => tracker.listed(items.map((p) => this.view(p))),
      onEvent: (type, obj) => {
        if (type === 'DELETED') {
          const v = this.view(obj);
          tracker.deleted(v.kind === 'up' || v.kind === 'draining' ? v.worker.key : v.key, v.kind === 'down' ? `pod deleted: ${v.reason}` : 'pod deleted');
        } else {
          tracker.changed(this.view(obj));
        }
      },
      onState: (s) => sink.state(s),
    });
    await this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
  }
}
