// A fake Kubernetes API server: Pods and EndpointSlices (discovery.k8s.io/v1) with list + watch as
// the real one serves them, enough discovery for kubectl, and faults on a seeded schedule. It is
// the cluster of the discovery tests and of `baton chaos --discovery k8s`; the real `kubectl`
// is its oracle (test/k8s/kubectl-oracle.test.ts).
//
// What it keeps of the real API server (k8s.io/apiserver, staging/src/k8s.io/apiserver/pkg/storage/cacher):
//  - one resourceVersion counter for every object (etcd's revision), as a decimal string;
//  - list: `{kind: PodList, metadata: {resourceVersion}, items}` (items without kind/apiVersion);
//  - watch: newline-delimited `{type, object}` events; from resourceVersion R it replays the changes
//    after R, or, when R was compacted away, answers 200 with one ERROR event holding a 410 Status
//    (reason Expired, "too old resource version") and ends; without R (or R=0) it first sends the
//    current objects as ADDED;
//  - a labelSelector (=, ==, !=, in, notin, exists, !exists) filters watches as the watch cache does:
//    an object that stops matching is sent as DELETED, one that starts matching as ADDED;
//  - allowWatchBookmarks: BOOKMARK events carrying only the resourceVersion, and one just before
//    timeoutSeconds ends the watch;
//  - a pod deleted with a grace period gets metadata.deletionTimestamp = now + grace (a MODIFIED
//    event) and goes (DELETED) when the grace is over; eviction by the kubelet leaves a Failed pod,
//    reason Evicted;
//  - a container that died (OOMKilled, a crash's Error with its exit code) is restarted: its status
//    has state.waiting CrashLoopBackOff and lastState.terminated {reason, exitCode}, as the
//    kubelet writes them (pkg/kubelet/kubelet_pods.go, convertToAPIContainerStatuses);
//  - the EndpointSlice controller: a Service's slice lists its pods' endpoints with ready/serving/
//    terminating conditions (pkg/controller/endpointslice, podToEndpoint);
//  - 403 as a Status naming the refused verb, resource and namespace (RBAC's authorizer message).
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';

export type WatchFault = 'close' | 'reset' | 'silent' | 'expire';

export interface WatchFaultPlan {
  /** Probability that a new watch suffers a fault. */
  rate: number;
  kinds: WatchFault[];
  /** The fault strikes after a delay drawn in [0, maxDelayMs]. */
  maxDelayMs: number;
}

export interface FakeApiServerOptions {
  /** Seeds the watch-fault schedule. */
  seed?: number;
  /** Period of BOOKMARK events on a watch that asked for them (the real one's is about a minute). */
  bookmarkMs?: number;
  faults?: WatchFaultPlan;
  host?: string;
  now?: () => number;
}

export interface PodSpec {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ip?: string | null;
  node?: string;
  ready?: boolean;
  /** Container port (shown in the pod spec; the source reads --service-discovery-port or an annotation). */
  port?: number;
  terminationGracePeriodSeconds?: number;
  /**
   * metadata.finalizers: a deleted pod with any stays listed, Terminating, past its grace until
   * `finalizePod` (a finalizer never removed, or a lost node whose kubelet never confirms).
   */
  finalizers?: string[];
}

/** The fake's own model of a pod, from which its JSON is rendered (and a test's truth computed). */
export interface PodModel {
  uid: string;
  name: string;
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  ip: string | null;
  node: string;
  ready: boolean;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  port: number;
  /** epoch ms, whole seconds (RFC 3339 has second precision) */
  deletionTimestamp: number | null;
  deletionGracePeriodSeconds: number | null;
  terminationGracePeriodSeconds: number;
  finalizers: string[];
  statusReason: string | null;
  statusMessage: string | null;
  terminated: { reason: string; exitCode: number } | null;
  created: number;
  rv: number;
}

interface ServiceModel {
  namespace: string;
  name: string;
  selector: Record<string, string>;
  port: number;
  sliceUid: string;
  sliceRv: number;
  sliceJson: string;
}

interface LogEntry {
  rv: number;
  kind: 'Pod' | 'EndpointSlice';
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  namespace: string;
  obj: Record<string, unknown>;
  prev: Record<string, unknown> | null;
}

interface Watcher {
  kind: 'Pod' | 'EndpointSlice';
  namespace: string | null;
  selector: Selector;
  fieldName: string | null;
  res: http.ServerResponse;
  /** The lines sent on this watch (a test compares them with what kubectl saw). */
  sent: { type: string; object: Record<string, unknown> }[];
  silent: boolean;
  timers: NodeJS.Timeout[];
  rv: number;
}

export interface EmittedEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: 'Pod' | 'EndpointSlice';
  name: string;
  namespace: string;
  rv: string;
}

type Selector = (labels: Record<string, string>) => boolean;

export class FakeApiServer {
  private server: http.Server;
  private sockets = new Set<Socket>();
  private port = 0;
  private readonly host: string;
  private rvCounter = 1;
  private compactedRv = 0;
  private readonly pods = new Map<string, PodModel>(); // ns/name
  private readonly services = new Map<string, ServiceModel>();
  private readonly log: LogEntry[] = [];
  /** Objects of other kinds created through the API (namespaces, secrets, the manifests), by path. */
  private readonly stored = new Map<string, Record<string, unknown>>();
  private readonly watchers = new Set<Watcher>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private forbidden: { resource: string; verb: string }[] = [];
  private rngState: number;
  private readonly now: () => number;
  faults: WatchFaultPlan | null;
  readonly bookmarkMs: number;
  /** Every change, in order (what a watcher from the beginning would see). */
  readonly emitted: EmittedEvent[] = [];
  /** Requests served, by verb and kind (a test waits on a re-list). */
  readonly counts = { list: 0, watch: 0, watchFaults: 0 };
  /** Every watch served, with the events it sent. */
  readonly watches: { query: string; sent: { type: string; object: Record<string, unknown> }[] }[] = [];
  /** Every request's method and path (kubectl's needs, for the docs). */
  readonly requests: string[] = [];
  private ipCounter = 10;

  constructor(o: FakeApiServerOptions = {}) {
    this.host = o.host ?? '127.0.0.1';
    this.rngState = (o.seed ?? 1) >>> 0 || 1;
    this.faults = o.faults ?? null;
    this.bookmarkMs = o.bookmarkMs ?? 60_000;
    this.now = o.now ?? Date.now;
    this.server = this.makeServer();
  }

  private makeServer(): http.Server {
    const s = http.createServer((req, res) => this.handle(req, res));
    s.on('connection', (sock) => {
      this.sockets.add(sock);
      sock.on('close', () => this.sockets.delete(sock));
    });
    return s;
  }

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  async start(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.host, () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.down();
  }

  /** Stops listening and cuts every connection: clients see resets, then connection refused. */
  async down(): Promise<void> {
    for (const w of this.watchers) this.endWatch(w);
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  /** Listens again on the same port. */
  async up(): Promise<void> {
    this.server = this.makeServer();
    await this.start(this.port);
  }

  /** Writes a kubeconfig pointing at this server (plain HTTP, as client-node and kubectl need it: insecure-skip-tls-verify). */
  writeKubeconfig(path: string, namespace = 'default'): string {
    writeFileSync(path, [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: ${this.url}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      '- name: fake',
      '  user:',
      '    token: fake-token',
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: fake',
      `    namespace: ${namespace}`,
      'current-context: fake',
      '',
    ].join('\n'));
    return path;
  }

  // ---- the control surface (what a cluster's users and its kubelet do) ----

  /** A deterministic loopback IP for the n-th pod: 127.0.0.11, 127.0.0.12, ... */
  nextIp(): string {
    const n = this.ipCounter++;
    return `127.0.${Math.floor(n / 250)}.${(n % 250) + 1}`;
  }

  createPod(spec: PodSpec): PodModel {
    const ns = spec.namespace ?? 'default';
    if (this.pods.has(`${ns}/${spec.name}`)) throw new Error(`pods "${spec.name}" already exists`);
    const p: PodModel = {
      uid: randomUUID(),
      name: spec.name,
      namespace: ns,
      labels: { ...(spec.labels ?? {}) },
      annotations: { ...(spec.annotations ?? {}) },
      ip: spec.ip === undefined ? this.nextIp() : spec.ip,
      node: spec.node ?? 'node-1',
      ready: spec.ready ?? true,
      phase: spec.ip === null ? 'Pending' : 'Running',
      port: spec.port ?? 8000,
      deletionTimestamp: null,
      deletionGracePeriodSeconds: null,
      terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds ?? 30,
      finalizers: [...(spec.finalizers ?? [])],
      statusReason: null,
      statusMessage: null,
      terminated: null,
      created: this.now(),
      rv: 0,
    };
    this.pods.set(`${ns}/${p.name}`, p);
    this.commitPod(p, 'ADDED', null);
    return p;
  }

  pod(name: string, namespace = 'default'): PodModel | undefined {
    return this.pods.get(`${namespace}/${name}`);
  }

  podList(): PodModel[] {
    return [...this.pods.values()];
  }

  /** Changes a pod's status (readiness, IP, phase) the way the kubelet would. */
  updatePod(name: string, namespace: string, f: (p: PodModel) => void): void {
    const p = this.mustPod(name, namespace);
    const prev = podJson(p);
    f(p);
    this.commitPod(p, 'MODIFIED', prev);
  }

  setReady(name: string, ready: boolean, namespace = 'default'): void {
    this.updatePod(name, namespace, (p) => { p.ready = ready; });
  }

  /**
   * `kubectl delete pod --grace-period=N`: deletionTimestamp = now + N s, and the pod is gone when
   * the grace is over (or at once with 0), unless it has finalizers: then it stays, Terminating
   * and still listed, until `finalizePod`. Returns the deadline.
   */
  deletePod(name: string, graceSeconds?: number, namespace = 'default'): number {
    const p = this.mustPod(name, namespace);
    const grace = graceSeconds ?? p.terminationGracePeriodSeconds;
    if (grace <= 0 && p.finalizers.length === 0) {
      this.removePod(p);
      return this.now();
    }
    if (p.deletionTimestamp !== null) return p.deletionTimestamp;
    const prev = podJson(p);
    // RFC 3339 carries whole seconds: the deadline a client reads is rounded up to one.
    p.deletionTimestamp = Math.ceil((this.now() + grace * 1000) / 1000) * 1000;
    p.deletionGracePeriodSeconds = grace;
    this.commitPod(p, 'MODIFIED', prev);
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (this.pods.get(`${namespace}/${name}`) === p && p.finalizers.length === 0) this.removePod(p);
    }, Math.max(0, p.deletionTimestamp - this.now()));
    this.timers.add(t);
    return p.deletionTimestamp;
  }

  /** The grace is over now (the kubelet's SIGKILL), its finalizers done: the pod object goes. */
  finalizePod(name: string, namespace = 'default'): void {
    const p = this.pods.get(`${namespace}/${name}`);
    if (p) this.removePod(p);
  }

  /** The kubelet evicts the pod (node pressure): phase Failed, reason Evicted, IP released, not Ready. */
  evictPod(name: string, namespace = 'default'): void {
    this.updatePod(name, namespace, (p) => {
      p.phase = 'Failed';
      p.ready = false;
      p.ip = null;
      p.statusReason = 'Evicted';
      p.statusMessage = 'The node was low on resource: memory.';
    });
  }

  /** The container was OOM-killed: not Ready, its last state terminated with reason OOMKilled. */
  oomKill(name: string, namespace = 'default'): void {
    this.updatePod(name, namespace, (p) => {
      p.ready = false;
      p.terminated = { reason: 'OOMKilled', exitCode: 137 };
    });
  }

  /**
   * The container exited on its own (a crash: `reason` Error and its exit code, as the kubelet
   * writes containerStatuses[].lastState.terminated while it restarts the container): not Ready.
   */
  crashContainer(name: string, exitCode: number, reason = 'Error', namespace = 'default'): void {
    this.updatePod(name, namespace, (p) => {
      p.ready = false;
      p.terminated = { reason, exitCode };
    });
  }

  /** A Service and its EndpointSlice, kept current by the fake's endpointslice controller. */
  createService(name: string, selector: Record<string, string>, port: number, namespace = 'default'): void {
    const s: ServiceModel = { namespace, name, selector, port, sliceUid: randomUUID(), sliceRv: 0, sliceJson: '' };
    this.services.set(`${namespace}/${name}`, s);
    this.syncSlice(s, true);
  }

  /** Forbid a verb ('list', 'watch', '*') on a resource ('pods', 'endpointslices'); `allow()` clears. */
  forbid(resource: string, verb = '*'): void {
    this.forbidden.push({ resource, verb });
  }

  allow(): void {
    this.forbidden = [];
  }

  /** etcd compaction: watches from a resourceVersion before now get 410 Gone. */
  compact(): void {
    this.compactedRv = this.rvCounter;
    this.log.length = 0;
  }

  /** Sends an ERROR 410 to every open watch and ends it (a watch cache that fell behind). */
  expireWatches(): void {
    for (const w of this.watchers) this.expire(w);
  }

  /** Cuts every open watch at once: `close` ends the streams, `reset` destroys the sockets, `silent` stops sending. */
  faultWatches(kind: 'close' | 'reset' | 'silent'): void {
    for (const w of [...this.watchers]) this.applyFault(w, kind);
  }

  /** Watches open now (a test waits for the source's watch before faulting it). */
  get openWatches(): number {
    return this.watchers.size;
  }

  get resourceVersion(): string {
    return String(this.rvCounter);
  }

  // ---- internals ----

  private mustPod(name: string, namespace: string): PodModel {
    const p = this.pods.get(`${namespace}/${name}`);
    if (!p) throw new Error(`pods "${name}" not found`);
    return p;
  }

  private random(): number {
    // xorshift32: a seeded schedule, replayable.
    let x = this.rngState;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    this.rngState = x;
    return x / 4294967296;
  }

  private removePod(p: PodModel): void {
    const prev = podJson(p);
    this.pods.delete(`${p.namespace}/${p.name}`);
    p.rv = ++this.rvCounter;
    const obj = podJson(p);
    this.record({ rv: p.rv, kind: 'Pod', type: 'DELETED', namespace: p.namespace, obj, prev });
    this.syncSlices();
  }

  private commitPod(p: PodModel, type: 'ADDED' | 'MODIFIED', prev: Record<string, unknown> | null): void {
    p.rv = ++this.rvCounter;
    this.record({ rv: p.rv, kind: 'Pod', type, namespace: p.namespace, obj: podJson(p), prev });
    this.syncSlices();
  }

  private syncSlices(): void {
    for (const s of this.services.values()) this.syncSlice(s, false);
  }

  private syncSlice(s: ServiceModel, created: boolean): void {
    const pods = [...this.pods.values()].filter((p) => p.namespace === s.namespace && matchesMap(s.selector, p.labels) && p.ip !== null && p.phase === 'Running');
    // podToEndpoint: serving = the pod's readiness; terminating = deletionTimestamp set; ready = serving && !terminating.
    const endpoints = pods.map((p) => ({
      addresses: [p.ip],
      conditions: { ready: p.ready && p.deletionTimestamp === null, serving: p.ready, terminating: p.deletionTimestamp !== null },
      nodeName: p.node,
      targetRef: { kind: 'Pod', namespace: p.namespace, name: p.name, uid: p.uid },
    }));
    const body = JSON.stringify(endpoints);
    if (!created && body === s.sliceJson) return;
    const prev = s.sliceRv ? this.sliceJson(s, JSON.parse(s.sliceJson)) : null;
    s.sliceJson = body;
    s.sliceRv = ++this.rvCounter;
    this.record({ rv: s.sliceRv, kind: 'EndpointSlice', type: created ? 'ADDED' : 'MODIFIED', namespace: s.namespace, obj: this.sliceJson(s, endpoints), prev });
  }

  private sliceJson(s: ServiceModel, endpoints: unknown): Record<string, unknown> {
    return {
      kind: 'EndpointSlice',
      apiVersion: 'discovery.k8s.io/v1',
      metadata: {
        name: `${s.name}-abcde`,
        namespace: s.namespace,
        uid: s.sliceUid,
        resourceVersion: String(s.sliceRv),
        generateName: `${s.name}-`,
        labels: { 'kubernetes.io/service-name': s.name, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
      },
      addressType: 'IPv4',
      endpoints,
      ports: [{ name: 'http', port: s.port, protocol: 'TCP' }],
    };
  }

  private currentSlices(): Record<string, unknown>[] {
    return [...this.services.values()].map((s) => this.sliceJson(s, JSON.parse(s.sliceJson)));
  }

  private record(e: LogEntry): void {
    this.log.push(e);
    const md = e.obj.metadata as { name: string };
    this.emitted.push({ type: e.type, kind: e.kind, name: md.name, namespace: e.namespace, rv: String(e.rv) });
    for (const w of this.watchers) this.deliver(w, e);
  }

  private deliver(w: Watcher, e: LogEntry): void {
    if (w.silent || w.kind !== e.kind || e.rv <= w.rv) return;
    if (w.namespace && w.namespace !== e.namespace) return;
    const match = (o: Record<string, unknown> | null) => {
      if (!o) return false;
      const md = o.metadata as { name: string; labels?: Record<string, string> };
      if (w.fieldName && md.name !== w.fieldName) return false;
      return w.selector(md.labels ?? {});
    };
    const now = match(e.obj);
    const before = e.type === 'ADDED' ? false : match(e.prev);
    let type: EmittedEvent['type'] | null = null;
    if (e.type === 'DELETED') type = before ? 'DELETED' : null;
    else if (now && before) type = 'MODIFIED';
    else if (now) type = 'ADDED';
    else if (before) type = 'DELETED';
    w.rv = e.rv;
    if (type) send(w, type, e.obj);
  }

  private status(res: http.ServerResponse, code: number, reason: string, message: string, details?: Record<string, unknown>): void {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code }));
  }

  private json(res: http.ServerResponse, body: unknown): void {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const q = url.searchParams;
    if (req.method === 'GET') {
      const d = discovery(path, this.url);
      if (d) return this.json(res, d);
    }
    // /api/v1[/namespaces/NS]/pods[/NAME], /apis/discovery.k8s.io/v1[/namespaces/NS]/endpointslices[/NAME]
    const m = /^\/(?:api\/v1|apis\/([a-z0-9.]+)\/v1)(?:\/namespaces\/([^/]+))?\/([a-z]+)(?:\/([^/]+))?$/.exec(path);
    if (!m) return this.status(res, 404, 'NotFound', 'the server could not find the requested resource');
    const [, group = '', namespace = null, resource, name = null] = m;
    const kind = resource === 'pods' && group === '' ? 'Pod' : resource === 'endpointslices' && group === 'discovery.k8s.io' ? 'EndpointSlice' : null;
    if (!kind) {
      // Other kinds (the manifests' Deployment, Service, ...): none exist here, as in an empty namespace.
      const stored = name ? this.stored.get(`${path}`) : undefined;
      if (req.method === 'GET' && stored) return this.json(res, stored);
      if (req.method === 'GET' && name) return this.status(res, 404, 'NotFound', `${resource}${group ? `.${group}` : ''} "${name}" not found`, { name, group, kind: resource });
      if (req.method === 'GET') return this.json(res, { kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: this.resourceVersion }, items: [] });
      // A create (kubectl create namespace / secret, kubectl apply) is answered as the API server
      // does, with the object it stored; the fake keeps none of them (it runs no controllers).
      if (req.method === 'POST' && !name) return this.created(req, res, path);
      return this.status(res, 405, 'MethodNotAllowed', `${req.method} is not supported on ${resource} by this fake API server`);
    }
    const watch = q.get('watch') === 'true' || q.get('watch') === '1';
    const verb = req.method === 'DELETE' ? 'delete' : req.method !== 'GET' ? 'update' : watch ? 'watch' : name ? 'get' : 'list';
    const refused = this.forbidden.find((f) => f.resource === resource && (f.verb === '*' || f.verb === verb));
    if (refused) {
      const where = namespace ? ` in the namespace "${namespace}"` : ' at the cluster scope';
      return this.status(res, 403, 'Forbidden', `${resource}${group ? `.${group}` : ''} is forbidden: User "system:serviceaccount:default:baton" cannot ${verb} resource "${resource}" in API group "${group}"${where}`, { kind: resource, group });
    }
    let selector: Selector;
    try {
      selector = parseSelector(q.get('labelSelector') ?? '');
    } catch (err) {
      return this.status(res, 400, 'BadRequest', `unable to parse requirement: ${(err as Error).message}`);
    }
    const field = q.get('fieldSelector') ?? '';
    const fm = /^metadata\.name=(.+)$/.exec(field);
    const fieldName = name ?? (fm ? fm[1]! : null);
    if (req.method === 'DELETE') {
      if (kind !== 'Pod' || !namespace || !name) return this.status(res, 405, 'MethodNotAllowed', 'only a pod can be deleted here');
      return this.deleteFromRequest(req, res, namespace, name, q);
    }
    if (req.method !== 'GET') return this.status(res, 405, 'MethodNotAllowed', `${req.method} is not supported by this fake API server`);
    if (watch) return this.watch(res, kind, namespace, selector, fieldName, q);
    const all = kind === 'Pod' ? [...this.pods.values()].map((p) => podJson(p)) : this.currentSlices();
    const items = all.filter((o) => {
      const md = o.metadata as { name: string; namespace: string; labels?: Record<string, string> };
      return (!namespace || md.namespace === namespace) && (!fieldName || md.name === fieldName) && selector(md.labels ?? {});
    });
    if (name) {
      if (!items[0]) return this.status(res, 404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource });
      return this.json(res, items[0]);
    }
    this.counts.list++;
    for (const it of items) {
      delete it.kind;
      delete it.apiVersion;
    }
    return this.json(res, { kind: `${kind}List`, apiVersion: kind === 'Pod' ? 'v1' : 'discovery.k8s.io/v1', metadata: { resourceVersion: this.resourceVersion }, items });
  }

  private created(req: http.IncomingMessage, res: http.ServerResponse, collection: string): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let obj: { metadata?: Record<string, unknown> };
      try {
        // kubectl create sends built-in kinds as protobuf (application/vnd.kubernetes.protobuf).
        obj = (req.headers['content-type'] ?? '').includes('protobuf') ? protoObject(body) : (JSON.parse(body.toString('utf8')) as { metadata?: Record<string, unknown> });
      } catch (err) {
        return this.status(res, 400, 'BadRequest', `the body cannot be read: ${(err as Error).message}`);
      }
      const iso = new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
      obj.metadata = { ...(obj.metadata ?? {}), uid: randomUUID(), resourceVersion: String(++this.rvCounter), creationTimestamp: iso };
      const name = obj.metadata.name;
      if (typeof name !== 'string' || name === '') return this.status(res, 422, 'Invalid', 'metadata.name: Required value');
      if (this.stored.has(`${collection}/${name}`)) return this.status(res, 409, 'AlreadyExists', `"${name}" already exists`);
      this.stored.set(`${collection}/${name}`, obj);
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify(obj));
    });
  }

  private deleteFromRequest(req: http.IncomingMessage, res: http.ServerResponse, namespace: string, name: string, q: URLSearchParams): void {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { body += c; });
    req.on('end', () => {
      const p = this.pods.get(`${namespace}/${name}`);
      if (!p) return this.status(res, 404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' });
      let grace: number | undefined = q.has('gracePeriodSeconds') ? Number(q.get('gracePeriodSeconds')) : undefined;
      if (body.trim()) {
        try {
          const opts = JSON.parse(body) as { gracePeriodSeconds?: number };
          if (typeof opts.gracePeriodSeconds === 'number') grace = opts.gracePeriodSeconds;
        } catch {
          return this.status(res, 400, 'BadRequest', 'DeleteOptions: the body is not JSON');
        }
      }
      this.deletePod(name, grace, namespace);
      const still = this.pods.get(`${namespace}/${name}`);
      this.json(res, podJson(still ?? p));
    });
  }

  private watch(res: http.ServerResponse, kind: 'Pod' | 'EndpointSlice', namespace: string | null, selector: Selector, fieldName: string | null, q: URLSearchParams): void {
    this.counts.watch++;
    const rvParam = q.get('resourceVersion');
    const from = rvParam && rvParam !== '0' ? Number(rvParam) : null;
    if (from !== null && !Number.isFinite(from)) return this.status(res, 400, 'BadRequest', `invalid resource version: ${rvParam}`);
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const w: Watcher = { kind, namespace, selector, fieldName, res, sent: [], silent: false, timers: [], rv: from ?? this.rvCounter };
    this.watches.push({ query: q.toString(), sent: w.sent });
    if (from !== null && from < this.compactedRv) {
      res.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${this.compactedRv})`, reason: 'Expired', code: 410 } }) + '\n');
      return;
    }
    this.watchers.add(w);
    res.on('close', () => this.endWatch(w));
    if (from === null) {
      const all = kind === 'Pod' ? [...this.pods.values()].map((p) => podJson(p)) : this.currentSlices();
      for (const o of all) {
        const md = o.metadata as { name: string; namespace: string; labels?: Record<string, string> };
        if ((!namespace || md.namespace === namespace) && (!fieldName || md.name === fieldName) && selector(md.labels ?? {})) send(w, 'ADDED', o);
      }
    } else {
      for (const e of this.log) if (e.rv > from) this.deliver(w, e);
    }
    const bookmarks = q.get('allowWatchBookmarks') === 'true';
    const bookmark = () => {
      if (w.silent || res.writableEnded) return;
      send(w, 'BOOKMARK', { kind, apiVersion: kind === 'Pod' ? 'v1' : 'discovery.k8s.io/v1', metadata: { resourceVersion: String(Math.max(w.rv, this.rvCounter)), annotations: { 'k8s.io/initial-events-end': 'false' } } });
    };
    if (bookmarks) w.timers.push(setInterval(bookmark, this.bookmarkMs));
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    if (timeout > 0) {
      w.timers.push(setTimeout(() => {
        if (w.silent) return; // a stuck server holds the watch past its timeout
        if (bookmarks) bookmark();
        this.endWatch(w);
      }, timeout * 1000));
    }
    const plan = this.faults;
    if (plan && plan.kinds.length && this.random() < plan.rate) {
      const kindOf = plan.kinds[Math.floor(this.random() * plan.kinds.length)]!;
      const delay = Math.floor(this.random() * plan.maxDelayMs);
      w.timers.push(setTimeout(() => this.applyFault(w, kindOf), delay));
    }
  }

  private applyFault(w: Watcher, kind: WatchFault): void {
    if (!this.watchers.has(w)) return;
    this.counts.watchFaults++;
    if (kind === 'close') this.endWatch(w);
    else if (kind === 'reset') {
      w.res.socket?.destroy();
      this.endWatch(w);
    } else if (kind === 'silent') w.silent = true;
    else this.expire(w);
  }

  private expire(w: Watcher): void {
    if (!this.watchers.has(w)) return;
    send(w, 'ERROR', { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${w.rv} (${this.rvCounter})`, reason: 'Expired', code: 410 });
    this.endWatch(w);
  }

  private endWatch(w: Watcher): void {
    if (!this.watchers.delete(w)) return;
    for (const t of w.timers) clearTimeout(t);
    if (!w.res.writableEnded) w.res.end();
  }
}

/**
 * The kind and metadata of a protobuf-encoded object (k8s.io/apimachinery runtime.Unknown after
 * the "k8s\0" magic: 1 typeMeta {1 apiVersion, 2 kind}, 2 raw object whose field 1 is ObjectMeta
 * {1 name, 3 namespace}). The rest of the object is not read: the fake stores no spec.
 */
export function protoObject(buf: Buffer): { apiVersion?: string; kind?: string; metadata: Record<string, unknown> } {
  if (buf.subarray(0, 4).toString('latin1') !== 'k8s\0') throw new Error('no k8s protobuf magic');
  const unknown = protoFields(buf.subarray(4));
  const tm = unknown.get(1) ? protoFields(unknown.get(1)!) : new Map<number, Buffer>();
  const raw = unknown.get(2) ? protoFields(unknown.get(2)!) : new Map<number, Buffer>();
  const md = raw.get(1) ? protoFields(raw.get(1)!) : new Map<number, Buffer>();
  const str = (m: Map<number, Buffer>, f: number) => m.get(f)?.toString('utf8');
  return { apiVersion: str(tm, 1), kind: str(tm, 2), metadata: { name: str(md, 1), ...(str(md, 3) ? { namespace: str(md, 3) } : {}) } };
}

/** The length-delimited fields of one protobuf message (the first of each number). */
function protoFields(buf: Buffer): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  let i = 0;
  const varint = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated protobuf');
      const b = buf[i++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
      shift += 7;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const wire = key & 7;
    const field = Math.floor(key / 8);
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = varint();
      if (!out.has(field)) out.set(field, buf.subarray(i, i + len));
      i += len;
    } else throw new Error(`protobuf wire type ${wire}`);
  }
  return out;
}

function send(w: Watcher, type: string, object: Record<string, unknown>): void {
  w.sent.push({ type, object });
  w.res.write(JSON.stringify({ type, object }) + '\n');
}

/** A pod as the API server renders it (v1.Pod). */
export function podJson(p: PodModel): Record<string, unknown> {
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const conditions = [
    { type: 'PodScheduled', status: 'True' },
    { type: 'Initialized', status: 'True' },
    { type: 'ContainersReady', status: p.ready ? 'True' : 'False' },
    { type: 'Ready', status: p.ready ? 'True' : 'False' },
  ].map((c) => ({ ...c, lastProbeTime: null, lastTransitionTime: iso(p.created) }));
  // After an OOM kill the kubelet restarts the container: ready again means running again.
  const running = p.phase === 'Running' && (p.ready || !p.terminated);
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: {
      name: p.name,
      namespace: p.namespace,
      uid: p.uid,
      resourceVersion: String(p.rv),
      creationTimestamp: iso(p.created),
      labels: { ...p.labels },
      ...(Object.keys(p.annotations).length ? { annotations: { ...p.annotations } } : {}),
      ...(p.deletionTimestamp !== null ? { deletionTimestamp: iso(p.deletionTimestamp), deletionGracePeriodSeconds: p.deletionGracePeriodSeconds } : {}),
      ...(p.finalizers.length ? { finalizers: [...p.finalizers] } : {}),
    },
    spec: {
      nodeName: p.node,
      terminationGracePeriodSeconds: p.terminationGracePeriodSeconds,
      containers: [{ name: 'worker', image: 'lmsysorg/sglang:latest', ports: [{ name: 'http', containerPort: p.port, protocol: 'TCP' }] }],
    },
    status: {
      phase: p.phase,
      ...(p.statusReason ? { reason: p.statusReason, message: p.statusMessage ?? '' } : {}),
      conditions,
      hostIP: '10.0.0.1',
      ...(p.ip ? { podIP: p.ip, podIPs: [{ ip: p.ip }] } : {}),
      startTime: iso(p.created),
      containerStatuses: [{
        name: 'worker',
        ready: p.ready,
        restartCount: p.terminated ? 1 : 0,
        image: 'lmsysorg/sglang:latest',
        imageID: '',
        started: running,
        // An OOM-killed container is restarted by the kubelet (CrashLoopBackOff), its kill in lastState.
        state: running ? { running: { startedAt: iso(p.created) } } : p.phase === 'Pending' ? { waiting: { reason: 'ContainerCreating' } } : p.terminated ? { waiting: { reason: 'CrashLoopBackOff' } } : { terminated: { reason: 'Error', exitCode: 1 } },
        ...(p.terminated ? { lastState: { terminated: { reason: p.terminated.reason, exitCode: p.terminated.exitCode } } } : {}),
      }],
    },
  };
}

function matchesMap(sel: Record<string, string>, labels: Record<string, string>): boolean {
  const keys = Object.keys(sel);
  return keys.length > 0 && keys.every((k) => labels[k] === sel[k]);
}

/** A label selector (k8s.io/apimachinery/pkg/labels.Parse): =, ==, !=, in, notin, exists, !exists. */
export function parseSelector(text: string): Selector {
  const terms: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (cur.trim() || terms.length) terms.push(cur);
  const tests = terms.map((raw): Selector => {
    const t = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)$/.exec(t))) {
      const [, k, op, v] = m;
      return op === '!=' ? (l) => l[k!] !== v : (l) => l[k!] === v;
    }
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(t))) {
      const [, k, op, list] = m;
      const vals = new Set(list!.split(',').map((s) => s.trim()));
      return op === 'in' ? (l) => l[k!] !== undefined && vals.has(l[k!]!) : (l) => l[k!] === undefined || !vals.has(l[k!]!);
    }
    if ((m = /^!([\w./-]+)$/.exec(t))) return (l) => !(m![1]! in l);
    if ((m = /^([\w./-]+)$/.exec(t))) {
      const k = m[1]!;
      return (l) => k in l;
    }
    throw new Error(`invalid label selector term ${JSON.stringify(t)}`);
  });
  return (labels) => tests.every((f) => f(labels));
}

const POD_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function apiResource(name: string, kind: string, namespaced = true, shortNames?: string[]) {
  return { name, singularName: kind.toLowerCase(), namespaced, kind, verbs: POD_VERBS, ...(shortNames ? { shortNames } : {}) };
}

const GROUPS: Record<string, { resources: ReturnType<typeof apiResource>[] }> = {
  'discovery.k8s.io': { resources: [apiResource('endpointslices', 'EndpointSlice')] },
  apps: { resources: [apiResource('deployments', 'Deployment', true, ['deploy']), apiResource('replicasets', 'ReplicaSet', true, ['rs'])] },
  'rbac.authorization.k8s.io': { resources: [apiResource('roles', 'Role'), apiResource('rolebindings', 'RoleBinding'), apiResource('clusterroles', 'ClusterRole', false), apiResource('clusterrolebindings', 'ClusterRoleBinding', false)] },
};

/** The legacy discovery documents kubectl reads before anything else (/api, /apis, /api/v1, /apis/G/v1, /version). */
function discovery(path: string, server: string): unknown {
  const hostPort = server.replace(/^https?:\/\//, '');
  if (path === '/version') return { major: '1', minor: '32', gitVersion: 'v1.32.0-baton-fake', platform: 'linux/amd64' };
  if (path === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: hostPort }] };
  if (path === '/api/v1') {
    return {
      kind: 'APIResourceList',
      groupVersion: 'v1',
      resources: [apiResource('pods', 'Pod', true, ['po']), apiResource('services', 'Service', true, ['svc']), apiResource('configmaps', 'ConfigMap', true, ['cm']), apiResource('secrets', 'Secret'), apiResource('serviceaccounts', 'ServiceAccount', true, ['sa']), apiResource('namespaces', 'Namespace', false, ['ns'])],
    };
  }
  if (path === '/apis') {
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: Object.keys(GROUPS).map((g) => ({ name: g, versions: [{ groupVersion: `${g}/v1`, version: 'v1' }], preferredVersion: { groupVersion: `${g}/v1`, version: 'v1' } })),
    };
  }
  const m = /^\/apis\/([a-z0-9.]+)\/v1$/.exec(path);
  if (m && GROUPS[m[1]!]) return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${m[1]}/v1`, resources: GROUPS[m[1]!]!.resources };
  return null;
}
