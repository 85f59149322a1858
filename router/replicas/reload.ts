// The rolling reload of a `--replicas` primary (SIGHUP, `reload()`; docs/replicas.md, "Reload"):
// the replicas are replaced one slot at a time. The new process (epoch + 1, same id, so its rids
// differ from the old one's by the epoch) starts beside the old one and joins the shared port (how
// depends on the spawner: cluster-spawner.ts, reuseport-spawner.ts). Once it listens, the old one
// is told to retire: it leaves the shared port and drains (replica-main.ts).
import type { RouterConfig } from '../config.ts';
import type { ReloadStatus } from './identity.ts';
import type { FromReplica } from './ipc.ts';
import type { Child } from './spawner.ts';
import type { Slot, Supervisor, UpMessage } from './supervisor.ts';

const ASK_TIMEOUT_MS = 3_000;
/**
 * A reload's new replica that neither listens nor exits within this long fails the reload. Long:
 * a replica loads the sources through tsx, up to 30 s on a loaded machine (docs/replicas.md).
 */
const RELOAD_START_MS = 120_000;

/** Settings that belong to the primary itself (its socket, its slots): a reload keeps them. */
const PRIMARY_KEYS = ['host', 'port', 'replicas', 'replicaAdminPortBase'] as const;

type OwnPortReply = Extract<FromReplica, { t: 'own-port' }>;

export interface ReloadOptions {
  log(line: string): void;
  /** A reload's config; throws when the file no longer parses (primary.ts PrimaryOptions). */
  reloadConfig?(): RouterConfig;
}

export class ReloadCoordinator {
  private state: ReloadStatus | null = null;
  private reloading: Promise<ReloadStatus> | null = null;
  private queued: Promise<ReloadStatus> | null = null;
  private readonly ownPortReplies = new Map<Child, (m: OwnPortReply) => void>();

  /** `config`: as the primary started; `port`: the one its processes bind. */
  constructor(private readonly sup: Supervisor, private readonly config: RouterConfig, private readonly port: number, private readonly opts: ReloadOptions) {}

  /** The latest reload, or null when none ran. */
  status(): ReloadStatus | null {
    if (!this.state) return null;
    return { ...this.state, draining: this.sup.retired.map((r) => ({ index: r.index, epoch: r.epoch, pid: r.pid })) };
  }

  /** A further call during a reload is queued (several coalesce into one) and resolves when that one has run. */
  reload(): Promise<ReloadStatus> {
    if (this.sup.stopping) return Promise.reject(new Error('the primary is stopping'));
    if (!this.reloading) {
      this.reloading = this.run().finally(() => { this.reloading = null; });
      return this.reloading;
    }
    // A reload is running: it may have read the config file before the latest edit, so one more
    // follows it (several requests coalesce into that one) rather than the request being dropped.
    if (!this.queued) {
      this.opts.log('reload: one is running; another is queued to follow it');
      this.queued = this.reloading.catch(() => undefined).then(() => {
        this.queued = null;
        return this.reload();
      });
    } else this.opts.log('reload: one is running and another is queued already; this request joins the queued one');
    return this.queued;
  }

  /** A process's answer to `own-port`. */
  onOwnPort(child: Child, m: OwnPortReply): void {
    this.ownPortReplies.get(child)?.(m);
  }

  private async run(): Promise<ReloadStatus> {
    const state: ReloadStatus = { state: 'reloading', started_at: Date.now(), ended_at: null, slot: null, message: null, draining: [] };
    this.state = state;
    let fresh: RouterConfig;
    try {
      fresh = this.opts.reloadConfig ? this.opts.reloadConfig() : this.config;
    } catch (err) {
      return this.end('failed', null, `the config could not be read again: ${(err as Error).message}; every replica keeps running`);
    }
    const { config } = this;
    const kept = PRIMARY_KEYS.filter((k) => fresh[k] !== config[k]);
    if (kept.length) this.opts.log(`reload: ${kept.join(', ')} changed in the config but belong to the primary (its socket and slots); kept as started`);
    const cfg: RouterConfig = { ...fresh, host: config.host, port: this.port, replicas: config.replicas, replicaAdminPortBase: config.replicaAdminPortBase };
    this.opts.log(`reload: replacing ${this.sup.slots.length} replicas one at a time`);
    for (const slot of this.sup.slots) {
      if (this.sup.stopping) return this.end('failed', slot.index, 'the primary is stopping');
      state.slot = slot.index;
      try {
        await this.replace(slot, cfg);
      } catch (err) {
        const message = `replica ${slot.index}'s new process failed to start: ${(err as Error).message}; the reload stopped there, the old process keeps serving`;
        return this.end('failed', slot.index, message);
      }
    }
    return this.end('done', null, null);
  }

  private end(state: 'done' | 'failed', slot: number | null, message: string | null): ReloadStatus {
    const ended = { state, started_at: this.state!.started_at, ended_at: Date.now(), slot, message, draining: [] };
    this.state = ended;
    this.opts.log(state === 'done' ? `reload: done in ${ended.ended_at - ended.started_at} ms` : `reload failed: ${message}`);
    return this.status()!;
  }

  /**
   * Replace one slot's process: start the next (epoch + 1) beside it, and once it listens retire
   * the old one (it leaves the shared port and drains). Rejects, leaving the old one serving,
   * when the new one fails to start.
   */
  private async replace(slot: Slot, cfg: RouterConfig): Promise<void> {
    // Waiting to be restarted after an exit: the reload's process is that restart.
    this.sup.cancelRestart(slot);
    // A fixed own port (--replica-admin-port-base): the old process lets go of it for the new one.
    const handOver = cfg.replicaAdminPortBase > 0 && slot.child?.alive === true ? slot.child : null;
    if (handOver) {
      const reply = await this.ownPort(handOver, false);
      if (reply.error) throw new Error(`the old process could not let go of its own port: ${reply.error}`);
    }
    const epoch = slot.epoch + 1;
    const child = this.sup.spawn(slot, epoch, cfg);
    const up = await this.listening(slot, child).catch((err: unknown) => {
      this.undo(slot, child, handOver);
      throw err;
    });
    const old = slot.child;
    const oldGraceMs = slot.config.shutdownGraceMs;
    Object.assign(slot, { child, epoch, config: cfg, state: 'up', url: up.ownUrl, ownUrl: up.ownUrl, started_at: up.startedAt, pid: up.pid, exits: [] });
    this.opts.log(`replica ${slot.index} (id ${slot.id}) reloaded: pid ${up.pid}, epoch ${epoch}, ${up.ownUrl}`);
    if (old?.alive) this.retire(slot, old, oldGraceMs);
  }

  /** The slot's new process as its `next`, until it listens (resolves) or fails to (rejects). */
  private listening(slot: Slot, child: Child): Promise<UpMessage> {
    return new Promise<UpMessage>((resolve, reject) => {
      const timer = setTimeout(() => slot.next?.fail(`did not listen within ${RELOAD_START_MS / 1000} s`), RELOAD_START_MS);
      slot.next = {
        child,
        up: (m) => { clearTimeout(timer); slot.next = null; resolve(m); },
        fail: (message) => { clearTimeout(timer); slot.next = null; reject(new Error(message)); },
      };
    });
  }

  /** A new process that failed: it ends, the old one takes its own port back, a dead old one is restarted. */
  private undo(slot: Slot, child: Child, handOver: Child | null): void {
    if (child.alive) child.kill('SIGKILL');
    if (handOver?.alive) {
      void child.exited.then(() => this.ownPort(handOver, true)).then((reply) => {
        this.opts.log(reply.error ? `replica ${slot.index}: the old process could not listen on its own port again: ${reply.error}` : `replica ${slot.index}: the old process listens on its own port again`);
      });
    }
    // The old process may have died meanwhile: it is restarted as after any exit.
    if (!slot.child && !this.sup.stopping && slot.state !== 'crashed') this.sup.scheduleRestart(slot, 'during a reload that could not replace it');
  }

  /** The replaced process leaves the shared port and drains; it ends itself after, or is killed. */
  private retire(slot: Slot, old: Child, graceMs: number): void {
    this.sup.retired.push({ index: slot.index, epoch: old.epoch, pid: old.pid, child: old });
    old.send({ t: 'retire' });
    const kill = setTimeout(() => old.kill('SIGKILL'), graceMs + 5_000);
    void old.exited.then(() => clearTimeout(kill));
  }

  /** Ask a replica to stop or start listening on its own port; an answer within ASK_TIMEOUT_MS or an error. */
  private ownPort(child: Child, listen: boolean): Promise<OwnPortReply> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done({ t: 'own-port', listening: !listen, error: `no answer within ${ASK_TIMEOUT_MS} ms` }), ASK_TIMEOUT_MS);
      const done = (m: OwnPortReply) => {
        clearTimeout(timer);
        this.ownPortReplies.delete(child);
        resolve(m);
      };
      this.ownPortReplies.set(child, done);
      child.send({ t: 'own-port', listen });
    });
  }
}
