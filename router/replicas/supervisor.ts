// The primary's supervision of its replicas (docs/replicas.md): one slot per replica, each with
// its process. A replica that exits is restarted with backoff under a new epoch; one that keeps
// exiting is reported as crashed and left down (a crash loop is not spun). The processes are
// started by a spawner (spawner.ts); a reload's new and replaced ones (reload.ts) are kept here
// too (`next`, `retired`), so that exits, the list and a stop see every process.
import { randomBytes } from 'node:crypto';
import type { RouterConfig } from '../config.ts';
import { replicaId, type ReplicaEntry, type ReplicaIdentity, type ReplicaState } from './identity.ts';
import type { FromReplica } from './ipc.ts';
import type { Child, Spawner } from './spawner.ts';

/** Exits within this window count toward a crash loop. */
const CRASH_WINDOW_MS = 60_000;
/** More exits than this within the window: the slot is left down and reported crashed. */
const CRASH_LIMIT = 5;
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;

export type UpMessage = Extract<FromReplica, { t: 'up' }>;

export interface Slot extends ReplicaIdentity {
  pid: number;
  url: string;
  ownUrl: string;
  started_at: number;
  state: ReplicaState | 'starting' | 'stopped';
  child: Child | null;
  /** A reload's new process for this slot, until it listens (then it becomes `child`). */
  next: { child: Child; up(m: UpMessage): void; fail(message: string): void } | null;
  /** The config this slot's process runs (a restart after a crash runs the same). */
  config: RouterConfig;
  exits: number[];
  timer: NodeJS.Timeout | null;
}

/** Replaced processes still draining after a reload: what GET /replicas shows under `reload.draining`. */
export interface Retired { index: number; epoch: number; pid: number; child: Child }

/** A replica could not start; `usage`: the reason is a bad setting (the CLI's usage error). */
export class ReplicaStartError extends Error {
  constructor(message: string, readonly usage: boolean) {
    super(message);
  }
}

export interface SupervisorOptions {
  log(line: string): void;
  /** Called when every replica has crashed (none left to restart). */
  onAllCrashed?(): void;
  /** Every message of every process; what is not the supervisor's own (`up`, `fatal`) is the caller's. */
  message(slot: Slot, child: Child, m: FromReplica): void;
}

export class Supervisor {
  readonly slots: Slot[];
  readonly retired: Retired[] = [];
  stopping = false;
  /** The shared address, from the first replica that listens. */
  sharedUrl = '';
  private startup: { resolve(): void; reject(e: Error): void } | null = null;

  /** `config`: with the port every process binds (the spawner's). */
  constructor(private readonly spawner: Spawner, private readonly config: RouterConfig, private readonly opts: SupervisorOptions) {
    // Distinct ids among this primary's replicas; random across primaries (two pods, two runs).
    const base = randomBytes(2).readUInt16BE(0);
    this.slots = Array.from({ length: config.replicas }, (_, index) => ({
      id: replicaId(base + index), index, epoch: 0, pid: 0, url: '', ownUrl: '', started_at: 0, state: 'starting', child: null, next: null, config, exits: [], timer: null,
    }));
  }

  /** Start a process for `slot` under `epoch`; the caller makes it the slot's `child` or `next`. */
  spawn(slot: Slot, epoch: number, cfg: RouterConfig): Child {
    const ownPort = this.config.replicaAdminPortBase > 0 ? this.config.replicaAdminPortBase + slot.index : 0;
    return this.spawner.spawn({ config: cfg, identity: { id: slot.id, index: slot.index, epoch }, ownPort }, {
      message: (child, m) => this.opts.message(slot, child, m),
      exit: (child, code, signal) => this.onExit(slot, child, code, signal),
    });
  }

  /** Start every slot's first process; resolves once all listen, rejects (all stopped) when one cannot start. */
  async startAll(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.startup = { resolve, reject };
      for (const s of this.slots) this.start(s, 0);
    }).catch(async (err: unknown) => {
      this.startup = null;
      await this.stop(1_000);
      throw err;
    });
    this.startup = null;
  }

  /** Start the slot's process anew (first start, restart): it becomes the slot's current one. */
  private start(slot: Slot, epoch: number): void {
    const child = this.spawn(slot, epoch, slot.config);
    slot.epoch = epoch;
    slot.child = child;
    slot.pid = child.pid;
  }

  /** A process's `up` or `fatal`: a reload's new one reports to its reload, the slot's current one here. */
  lifecycle(slot: Slot, child: Child, m: FromReplica): void {
    if (slot.next?.child === child) {
      if (m.t === 'up') slot.next.up(m);
      else if (m.t === 'fatal') slot.next.fail(m.message);
      return;
    }
    if (slot.child !== child) return;
    if (m.t === 'up') {
      Object.assign(slot, { state: 'up', url: m.ownUrl, ownUrl: m.ownUrl, started_at: m.startedAt, pid: m.pid });
      this.sharedUrl ||= m.url;
      if (slot.epoch > 0) this.opts.log(`replica ${slot.index} (id ${slot.id}) is back: pid ${m.pid}, epoch ${slot.epoch}, ${m.ownUrl}`);
      if (this.startup && this.slots.every((s) => s.state === 'up')) this.startup.resolve();
    } else if (m.t === 'fatal') {
      if (this.startup) this.startup.reject(new ReplicaStartError(m.message, m.usage));
      else this.opts.log(`replica ${slot.index} failed to start: ${m.message}`);
    }
  }

  private onExit(slot: Slot, child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (slot.next?.child === child) return slot.next.fail(`exited while starting (${how})`);
    const r = this.retired.findIndex((x) => x.child === child);
    if (r >= 0) {
      this.retired.splice(r, 1);
      if (!this.stopping) this.opts.log(`replica ${slot.index} epoch ${child.epoch} (pid ${child.pid}) retired: drained and exited (${how})`);
      return;
    }
    if (slot.child !== child) return;
    slot.child = null;
    if (this.stopping) {
      slot.state = 'stopped';
      return;
    }
    if (this.startup) {
      // A replica that cannot start (a bad setting, a port in use) fails the whole start.
      this.startup.reject(new ReplicaStartError(`replica ${slot.index} exited while starting (${how})`, false));
      return;
    }
    if (this.crashLoop(slot, how)) return;
    slot.state = 'restarting';
    // A reload is starting this slot's next process: that one takes the slot.
    if (slot.next) return this.opts.log(`replica ${slot.index} (id ${slot.id}, pid ${slot.pid}) exited (${how}); its reload replacement is on its way`);
    this.scheduleRestart(slot, how);
  }

  /** Count the exit; past CRASH_LIMIT within CRASH_WINDOW_MS the slot is left down as crashed. */
  private crashLoop(slot: Slot, how: string): boolean {
    const now = Date.now();
    slot.exits = slot.exits.filter((t) => now - t < CRASH_WINDOW_MS);
    slot.exits.push(now);
    if (slot.exits.length <= CRASH_LIMIT) return false;
    slot.state = 'crashed';
    this.opts.log(`replica ${slot.index} (id ${slot.id}) exited ${slot.exits.length} times within ${CRASH_WINDOW_MS / 1000} s (last: ${how}): a crash loop; not restarting it`);
    if (this.slots.every((s) => s.state === 'crashed')) this.opts.onAllCrashed?.();
    return true;
  }

  /** Restart the slot under the next epoch, after a backoff that doubles with its recent exits. */
  scheduleRestart(slot: Slot, how: string): void {
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (Math.max(1, slot.exits.length) - 1));
    slot.state = 'restarting';
    this.opts.log(`replica ${slot.index} (id ${slot.id}, pid ${slot.pid}) exited (${how}); restarting in ${delay} ms`);
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (this.stopping) return;
      this.start(slot, slot.epoch + 1);
    }, delay);
  }

  /** A restart the slot waits for, called off (a reload's process is that restart). */
  cancelRestart(slot: Slot): void {
    if (!slot.timer) return;
    clearTimeout(slot.timer);
    slot.timer = null;
  }

  /** Every synced process of the router but `from`: the slots' current ones, a reload's new and old ones. */
  processes(from: Child): Child[] {
    const all = [...this.slots.flatMap((s) => [s.child, s.next?.child ?? null]), ...this.retired.map((r) => r.child)];
    return all.filter((c): c is Child => c !== null && c !== from && c.alive && c.synced);
  }

  list(): ReplicaEntry[] {
    return this.slots.map((s) => ({
      id: s.id, index: s.index, epoch: s.epoch, pid: s.pid, url: s.url, started_at: s.started_at,
      state: s.state === 'up' ? 'up' : s.state === 'crashed' ? 'crashed' : 'restarting',
    }));
  }

  /** SIGTERM each process (in index order; each drains as a lone router does) and wait for them, SIGKILL after `graceMs` + 5 s. */
  async stop(graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    this.stopping = true;
    for (const s of this.slots) this.cancelRestart(s);
    // A reload's starting process is not serving yet: it ends at once.
    for (const s of this.slots) if (s.next) s.next.fail('the primary is stopping');
    const live = [...this.slots.flatMap((s) => (s.child ? [s.child] : [])), ...this.retired.map((r) => r.child)].filter((c) => c.alive);
    for (const c of live) c.kill(signal);
    const kill = setTimeout(() => { for (const c of live) c.kill('SIGKILL'); }, graceMs + 5_000);
    await Promise.all(live.map((c) => c.exited));
    clearTimeout(kill);
  }
}
