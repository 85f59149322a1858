// Workers from the EndpointSlices of a Service (discovery.k8s.io/v1), as Dynamo and kube-proxy
// read them: the slices labelled `kubernetes.io/service-name=<service>`, each endpoint keyed by its
// targetRef's UID (the pod's). The conditions (KEP-1672, EndpointConditions):
//  - ready (nil means ready) → a worker;
//  - serving && terminating → draining: the pod is going but still answers. A slice carries no
//    deadline, so the drain is given `drainGraceMs` (default 30 s: Kubernetes' default
//    terminationGracePeriodSeconds); the pods source reads the real deletionTimestamp instead;
//  - neither, or gone from every slice → removed.
// A Service spreads its endpoints over several slices, and an endpoint may move between slices:
// the source keeps every slice and derives the worker set from their union.
import type { DiscoverySink, DiscoverySource } from './types.ts';
import type { K8sObject } from './k8s-api.ts';
import { WatchLoop } from './k8s-watch.ts';
import { type K8sSourceOptions, type PodView, ViewTracker } from './k8s-pods.ts';

export interface EndpointSliceOptions extends K8sSourceOptions {
  service: string;
  /** The drain deadline given to a serving+terminating endpoint, counted from when it is seen. */
  drainGraceMs?: number;
  now?: () => number;
}

interface SliceShape {
  metadata?: K8sObject['metadata'];
  addressType?: string;
  ports?: { name?: string; port?: number; protocol?: string }[];
  endpoints?: {
    addresses?: string[];
    conditions?: { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };
    nodeName?: string;
    targetRef?: { kind?: string; name?: string; namespace?: string; uid?: string };
  }[];
}

/** The views of every endpoint in a set of slices; an endpoint in two slices counts once (the livelier view). */
export function sliceViews(slices: Iterable<K8sObject>, port: number, now: number, graceMs: number): PodView[] {
  const rank = { up: 3, draining: 2, down: 1, invalid: 0 } as const;
  const out = new Map<string, PodView>();
  for (const obj of slices) {
    const s = obj as SliceShape;
    if (s.addressType && s.addressType !== 'IPv4' && s.addressType !== 'IPv6') continue; // FQDN slices
    const ports = (s.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP' && typeof p.port === 'number');
    const p = ports.find((x) => x.port === port)?.port ?? ports[0]?.port ?? port;
    for (const ep of s.endpoints ?? []) {
      const addr = ep.addresses?.[0];
      const ref = ep.targetRef;
      const key = ref?.uid ?? (addr ? `${s.metadata?.namespace ?? ''}/${addr}` : null);
      if (!key) continue;
      const c = ep.conditions ?? {};
      const ready = c.ready !== false; // nil: ready (the API's documented default)
      let v: PodView;
      if (!addr) v = { kind: 'down', key, reason: 'endpoint without an address' };
      else {
        const host = addr.includes(':') ? `[${addr}]` : addr;
        const worker = { key, url: `http://${host}:${p}`, meta: { source: 'k8s-endpointslices', pod: ref?.name, namespace: ref?.namespace ?? s.metadata?.namespace, node: ep.nodeName } };
        if (c.terminating === true && c.serving === true) v = { kind: 'draining', worker, deadline: now + graceMs, reason: 'endpoint terminating' };
        else if (ready && c.terminating !== true) v = { kind: 'up', worker };
        else v = { kind: 'down', key, reason: c.terminating ? 'endpoint terminating, not serving' : 'endpoint not ready' };
      }
      const prev = out.get(key);
      if (!prev || rank[v.kind] > rank[prev.kind]) out.set(key, v);
    }
  }
  return [...out.values()];
}

export class K8sEndpointSlicesSource implements DiscoverySource {
  readonly name = 'k8s-endpointslices';
  private loop: WatchLoop | null = null;

  constructor(private readonly o: EndpointSliceOptions) {}

  get lists(): number {
    return this.loop?.lists ?? 0;
  }

  async start(sink: DiscoverySink): Promise<void> {
    const o = this.o;
    const now = o.now ?? Date.now;
    const grace = o.drainGraceMs ?? 30_000;
    const tracker = new ViewTracker(sink, o.log, now);
    const slices = new Map<string, K8sObject>();
    const sliceKey = (s: K8sObject) => s.metadata?.uid ?? `${s.metadata?.namespace}/${s.metadata?.name}`;
    // A draining endpoint keeps the deadline it was first given, not one that moves with each event.
    const viewsNow = () => sliceViews(slices.values(), o.port, now(), grace).map((v) => {
      if (v.kind !== 'draining') return v;
      const d = tracker.known.get(v.worker.key)?.deadline;
      return d != null ? { ...v, deadline: d } : v;
    });
    const apply = () => {
      const views = viewsNow();
      const seen = new Set<string>();
      for (const v of views) {
        const key = v.kind === 'up' || v.kind === 'draining' ? v.worker.key : v.key;
        seen.add(key);
        tracker.changed(v);
      }
      for (const key of [...tracker.known.keys()]) if (!seen.has(key)) tracker.deleted(key, 'endpoint gone from the service');
    };
    // The Service's own selector picks its pods; `selector` (a pod label selector) does not apply to slices.
    const selector = [`kubernetes.io/service-name=${o.service}`];
    this.loop = new WatchLoop({
      client: o.client,
      target: {
        path: o.namespace ? `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(o.namespace)}/endpointslices` : '/apis/discovery.k8s.io/v1/endpointslices',
        query: { labelSelector: selector.join(',') },
        resource: 'endpointslices.discovery.k8s.io',
        namespace: o.namespace,
      },
      relistMs: o.relistMs,
      watchdogMs: o.watchdogMs,
      backoffMinMs: o.backoffMinMs,
      backoffMaxMs: o.backoffMaxMs,
      random: o.random,
      log: o.log,
      onList: (items) => {
        slices.clear();
        for (const s of items) slices.set(sliceKey(s), s);
        tracker.listed(viewsNow());
      },
      onEvent: (type, obj) => {
        if (type === 'DELETED') slices.delete(sliceKey(obj));
        else slices.set(sliceKey(obj), obj);
        apply();
      },
      onState: (s) => sink.state(s),
    });
    await this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
  }
}
