// `baton chaos --discovery k8s`: the campaign's workers are pods of an in-process fake Kubernetes
// API server (sim/k8s/apiserver.ts), each on its own loopback address (127.0.0.11, .12, ...) on
// one port, as pods have distinct IPs, and the router finds them with --service-discovery. On
// top of the campaign's faults, a seeded schedule:
//  - deletes a pod with a grace: the router must drain it (nothing new, its streams continued
//    elsewhere before the deadline); at the deadline the pod object goes and its process is
//    SIGKILLed, as the kubelet does; a new pod (new UID) comes up on the same address;
//  - evicts a pod (phase Failed, podIP cleared): the router removes it at once; the process is
//    killed a moment later; a new pod comes up;
//  - breaks the watches: closes, resets, silences them, expires them with 410 Gone.
// The verdict adds: attempts started on a draining pod, streams cut by a drained pod's kill,
// and the workers whose discovery disagrees with the pods at the end (stale or missing).
import { FakeApiServer } from '../sim/k8s/apiserver.ts';
import type { SimCluster } from '../sim/cluster.ts';
import { Rng } from './rng.ts';

export const K8S_NAMESPACE = 'chaos';
export const K8S_LABELS = { app: 'chaos-worker' };
/** The router's discovery settings in a k8s campaign: a short re-list so a 120 s run sees many. */
export const K8S_RELIST_MS = 5_000;
export const K8S_WATCHDOG_MS = 1_000;

export interface PodWorker {
  url: string;
  host: string;
  cluster: SimCluster;
  local: number;
  pod: string;
  generation: number;
}

/** A window in which a pod's process was down or going (the verifier's fault windows). */
export interface PodWindow {
  url: string;
  kind: 'pod_delete' | 'pod_evict';
  /** When the drain (delete) or the removal (evict) began. */
  start: number;
  /** When the process was killed. */
  killedAt: number;
  /** When the router first reported the worker draining (null: not before the kill, or evicted). */
  drainSeenAt: number | null;
  /** When the new pod was created (the worker serving again). */
  end: number;
}

export class K8sChaos {
  readonly windows: PodWindow[] = [];
  readonly errors: string[] = [];
  deletions = 0;
  evictions = 0;
  watchFaults = 0;
  private timers = new Set<NodeJS.Timeout>();
  private busy = new Set<string>();
  private running: Promise<void>[] = [];
  private stopped = false;

  /** Pod events skipped: a pod was out already (by this schedule or a fault). */
  skipped = 0;
  /**
   * Shared with the campaign's fault injector: take a worker (false: it is faulted now), give it
   * back, and how many of the pods are out. A pod event waits for no fault and leaves at least one
   * pod serving, as the injector's plan does for its own faults.
   */
  gate: { hold(url: string): boolean; release(url: string): void; out(): number } = { hold: () => true, release: () => undefined, out: () => 0 };
  /** The router's health of a worker URL (undefined: not in its pool); set once the router runs. */
  health: (url: string) => Promise<string | undefined> = async () => undefined;

  constructor(
    readonly fake: FakeApiServer,
    readonly pods: PodWorker[],
    private readonly log: (line: string) => void,
  ) {}

  /** Starts the fake API server with its seeded watch faults, and creates one pod per worker. */
  static async start(workers: Omit<PodWorker, 'pod' | 'generation'>[], seed: number, log: (line: string) => void): Promise<K8sChaos> {
    const fake = await new FakeApiServer({ seed, bookmarkMs: 1_000, faults: { rate: 0.3, kinds: ['close', 'reset', 'silent', 'expire'], maxDelayMs: 4_000 } }).start();
    const pods = workers.map((w, i) => ({ ...w, pod: `chaos-worker-${i}-0`, generation: 0 }));
    const k = new K8sChaos(fake, pods, log);
    for (const p of pods) k.createPod(p);
    return k;
  }

  private createPod(p: PodWorker): void {
    const port = Number(new URL(p.url).port);
    this.fake.createPod({ name: p.pod, namespace: K8S_NAMESPACE, labels: K8S_LABELS, ip: p.host, port, terminationGracePeriodSeconds: 6 });
  }

  /** The seeded schedule: a pod event every `meanGapMs` on average until `tEnd`. */
  run(seed: number, t0: number, tEnd: number, meanGapMs = 6_000): void {
    const rng = new Rng(seed, 0x6b38);
    let at = t0 + 3_000;
    for (;;) {
      at += Math.round(meanGapMs * (0.5 + rng.float()));
      // Each event needs up to ~10 s to play out (grace, kill, a new pod) before the traffic ends.
      if (at > tEnd - 10_000) break;
      const i = rng.int(0, this.pods.length - 1);
      const r = rng.float();
      const grace = rng.int(3, 8);
      const t = setTimeout(() => {
        this.timers.delete(t);
        if (this.stopped) return;
        const p = this.pods[i]!;
        if (r < 0.8) {
          // One pod out at a time by this schedule, and none while a fault has another pod: the
          // injector's own faults already take up to all but one worker.
          if (this.busy.size > 0 || this.gate.out() > 0 || !this.gate.hold(p.url)) {
            this.skipped++;
            return;
          }
          const done = r < 0.55 ? this.deleteWithGrace(p, grace) : this.evict(p);
          this.running.push(done.finally(() => this.gate.release(p.url)));
        } else {
          const kind = (['close', 'reset', 'silent', 'expire'] as const)[rng.int(0, 3)]!;
          this.watchFaults++;
          if (kind === 'expire') this.fake.expireWatches();
          else this.fake.faultWatches(kind);
        }
      }, at - Date.now());
      this.timers.add(t);
    }
  }

  private async deleteWithGrace(p: PodWorker, graceS: number): Promise<void> {
    this.busy.add(p.url);
    this.deletions++;
    try {
      const start = Date.now();
      const deadline = this.fake.deletePod(p.pod, graceS, K8S_NAMESPACE);
      this.log(`k8s: delete pod ${p.pod} (${p.url}) with a ${graceS} s grace`);
      // When the router shows it draining (its watch may be broken on purpose at that moment).
      let drainSeenAt: number | null = null;
      while (Date.now() < deadline - 50) {
        if ((await this.health(p.url).catch(() => undefined)) === 'draining') {
          drainSeenAt = Date.now();
          break;
        }
        await sleep(50);
      }
      // The kubelet's SIGKILL at the deadline (the fake removes the pod object then).
      await sleep(Math.max(0, deadline - Date.now()));
      const killedAt = Date.now();
      await p.cluster.kill(p.local);
      this.fake.finalizePod(p.pod, K8S_NAMESPACE);
      await this.replace(p, { kind: 'pod_delete', start, killedAt, drainSeenAt });
    } catch (err) {
      this.errors.push(`delete ${p.pod}: ${(err as Error).message}`);
    } finally {
      this.busy.delete(p.url);
    }
  }

  private async evict(p: PodWorker): Promise<void> {
    this.busy.add(p.url);
    this.evictions++;
    try {
      const start = Date.now();
      this.fake.evictPod(p.pod, K8S_NAMESPACE);
      this.log(`k8s: evict pod ${p.pod} (${p.url})`);
      await sleep(500);
      const killedAt = Date.now();
      await p.cluster.kill(p.local);
      this.fake.finalizePod(p.pod, K8S_NAMESPACE);
      await this.replace(p, { kind: 'pod_evict', start, killedAt, drainSeenAt: null });
    } catch (err) {
      this.errors.push(`evict ${p.pod}: ${(err as Error).message}`);
    } finally {
      this.busy.delete(p.url);
    }
  }

  /** The ReplicaSet's new pod: the process restarted on the same address, a new pod object (new UID). */
  private async replace(p: PodWorker, w: Omit<PodWindow, 'url' | 'end'>): Promise<void> {
    await sleep(500);
    await p.cluster.restart(p.local);
    p.generation++;
    p.pod = p.pod.replace(/-\d+$/, `-${p.generation}`);
    this.createPod(p);
    // The new pod's worker is probed before it takes requests: the pod is back when the router says so.
    const until = Date.now() + 5_000;
    while (Date.now() < until && (await this.health(p.url).catch(() => undefined)) !== 'healthy') await sleep(50);
    this.windows.push({ url: p.url, ...w, end: Date.now() });
  }

  /** Stops scheduling and waits for the events under way to finish. */
  async finish(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all(this.running);
    // No more faults: the settling check must see the truth, not a watch broken on purpose.
    this.fake.faults = null;
  }

  /** URLs of the pods that are Running and Ready now: the workers discovery must have. */
  truth(): Set<string> {
    const port = (p: { port: number }) => p.port;
    return new Set(this.fake.podList().filter((p) => p.namespace === K8S_NAMESPACE && p.ip && p.phase === 'Running' && p.ready && p.deletionTimestamp === null).map((p) => `http://${p.ip}:${port(p)}`));
  }

  async close(): Promise<void> {
    await this.fake.close();
  }
}

/**
 * The verdict's drain checks, from the attempt rows, for each deleted pod the router saw draining
 * in time (`marginMs` + a second before the kill; a drain the router learned later, through a
 * watch broken on purpose, is counted apart): no attempt started on it after the router showed
 * it draining, and no attempt on it cut by its kill.
 */
export function drainViolations(windows: readonly PodWindow[], attempts: readonly { worker: string; started_at: number; ended_at: number; outcome: string; error_kind?: string | null; request_id: string }[], marginMs: number): { violations: string[]; lateDrains: number; drainLagMs: number[] } {
  const violations: string[] = [];
  let lateDrains = 0;
  const drainLagMs: number[] = [];
  for (const w of windows) {
    if (w.kind !== 'pod_delete') continue;
    if (w.drainSeenAt === null || w.drainSeenAt > w.killedAt - marginMs - 1000) {
      lateDrains++;
      continue;
    }
    drainLagMs.push(w.drainSeenAt - w.start);
    for (const a of attempts) {
      if (a.worker !== w.url || a.started_at >= w.killedAt) continue;
      // Nothing new once draining (the poll that saw it may be up to 50 ms late).
      if (a.started_at > w.drainSeenAt + 50) violations.push(`${a.request_id}: an attempt started on draining pod ${w.url} ${a.started_at - w.drainSeenAt} ms after the router showed it draining`);
      // A stream the drain left on the pod until the kill.
      if (a.ended_at >= w.killedAt - 20 && a.outcome === 'failed' && a.error_kind !== 'drain') violations.push(`${a.request_id}: an attempt on ${w.url} was cut by the pod's kill (${a.error_kind}) instead of being continued before it`);
    }
  }
  return { violations, lateDrains, drainLagMs };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
