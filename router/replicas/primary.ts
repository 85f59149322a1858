// The primary of `baton router --replicas N` (docs/replicas.md): N full routers on one port, each
// with its own pool, breakers, trace ring and event bus; nothing shared on the request path.
//
// - Node 20: node:cluster with SCHED_NONE: the replicas accept on the one listening socket the
//   primary shares with them. Not node:cluster's round-robin default on Linux: there the primary
//   accepts and hands each connection over IPC, and a connection handed to a replica that has just
//   died is never answered nor closed (the handoff waits for a reply that never comes: the
//   client hangs). With SCHED_NONE the kernel resets what the dead process had accepted and keeps
//   the rest in the accept queue for the survivors, and no connection passes through the primary.
// - Node >= 22.12 (and 23.1+), where `net.Server.listen` takes `reusePort`: independent processes,
//   each binding the port with SO_REUSEPORT, so that the kernel spreads connections and no
//   connection passes through the primary.
//
// The primary supervises: a replica that exits is restarted with backoff under a new epoch; one
// that keeps exiting is reported as crashed and left down (a crash loop is not spun). It keeps the
// list GET /replicas answers (replicas ask it over IPC) and aggregates /metrics over the replicas.
// It carries what the replicas share (docs/replicas.md, "What replicas share"): each one's
// cache_aware prefixes, relayed to the others as they come, and the worker writes made on the
// shared port, applied on the others and kept (the latest per worker URL) for every process that
// starts later.
//
// A reload (SIGHUP, `reload()`) replaces the replicas one slot at a time: the new process (epoch
// + 1, same id, so its rids differ from the old one's by the epoch) starts beside the old one and
// joins the shared port (node:cluster's `queryServer`, lib/internal/cluster/primary.js, hands it
// the existing SharedHandle for the same address, port and listen index, which stays open while
// any replica holds it; with SO_REUSEPORT it binds the port beside the old one). Once it listens, the
// old one is told to retire: it leaves the shared port and drains (replica-main.ts).
import cluster from 'node:cluster';
import { fork } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { AggregatorRegistry } from 'prom-client';
import type { RouterConfig } from '../config.ts';
import { BY_REPLICA_METRICS } from '../metrics.ts';
import { replicaId, type ReloadStatus, type ReplicaEntry, type ReplicaIdentity, type ReplicaList, type ReplicaState } from './identity.ts';
import type { FromPrimary, FromReplica, ReplicaSpec } from './ipc.ts';
import type { ReplicaOutcome, WorkerWrite } from '../http/worker-writes.ts';
import { WriteJournal } from './write-journal.ts';
import { randomBytes } from 'node:crypto';

const ENTRY = fileURLToPath(new URL('./replica-entry.js', import.meta.url));

/** Exits within this window count toward a crash loop. */
const CRASH_WINDOW_MS = 60_000;
/** More exits than this within the window: the slot is left down and reported crashed. */
const CRASH_LIMIT = 5;
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;
const ASK_TIMEOUT_MS = 3_000;
/**
 * Prefix batches relayed to one replica and not yet written to its channel: past this, the next
 * are dropped for it (a replica that cannot keep up is not queued for without bound).
 */
const MAX_UNSENT_PREFIXES = 8;
/**
 * A reload's new replica that neither listens nor exits within this long fails the reload. Long:
 * a replica loads the sources through tsx, up to 30 s on a loaded machine (docs/replicas.md).
 */
const RELOAD_START_MS = 120_000;

/** Whether this Node's net.Server.listen takes `reusePort` (added in v22.12.0 and v23.1.0). */
export function reusePortSupported(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/** A replica process, whichever way it was started. */
interface Child {
  pid: number;
  epoch: number;
  /** `written`: once the channel has written it (or failed to). */
  send(m: FromPrimary, written?: () => void): void;
  kill(signal: NodeJS.Signals): void;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  alive: boolean;
  /** Prefix batches relayed to it and not yet written. */
  unsentPrefixes: number;
  /** It has its configured workers and took the worker writes so far (`sync`): it takes writes and prefixes from now on. */
  synced: boolean;
}

interface Slot extends ReplicaIdentity {
  pid: number;
  url: string;
  ownUrl: string;
  started_at: number;
  state: ReplicaState | 'starting' | 'stopped';
  child: Child | null;
  /** A reload's new process for this slot, until it listens (then it becomes `child`). */
  next: { child: Child; up(m: Extract<FromReplica, { t: 'up' }>): void; fail(message: string): void } | null;
  /** The config this slot's process runs (a restart after a crash runs the same). */
  config: RouterConfig;
  exits: number[];
  timer: NodeJS.Timeout | null;
}

/** Replaced processes still draining after a reload: what GET /replicas shows under `reload.draining`. */
interface Retired { index: number; epoch: number; pid: number; child: Child }

export interface PrimaryHandle {
  /** The shared address every replica serves. */
  readonly url: string;
  readonly mode: 'cluster' | 'reuseport';
  list(): ReplicaEntry[];
  /** The latest reload, or null when none ran. */
  reloadStatus(): ReloadStatus | null;
  /**
   * Replace every replica, one slot at a time (docs/replicas.md, "Reload"). During a reload a
   * further call is queued (several coalesce into one) and resolves when that one has run.
   */
  reload(): Promise<ReloadStatus>;
  /** SIGTERM each replica (in index order; each drains as a lone router does) and wait for them, SIGKILL after `graceMs` + 5 s. */
  stop(graceMs: number, signal?: NodeJS.Signals): Promise<void>;
}

export interface PrimaryOptions {
  log(line: string): void;
  /** Called when every replica has crashed (none left to restart). */
  onAllCrashed?(): void;
  /**
   * A reload's config: the flags and environment as given, the config file read again. Throws
   * (a ConfigError) when the file no longer parses: the reload then replaces nothing.
   */
  reloadConfig?(): RouterConfig;
}

/** Settings that belong to the primary itself (its socket, its slots): a reload keeps them. */
const PRIMARY_KEYS = ['host', 'port', 'replicas', 'replicaAdminPortBase'] as const;

export async function startPrimary(config: RouterConfig, opts: PrimaryOptions): Promise<PrimaryHandle> {
  const mode: 'cluster' | 'reuseport' = reusePortSupported() ? 'reuseport' : 'cluster';
  let port = config.port;
  if (mode === 'reuseport' && port === 0) port = await freePort(config.host); // each process must bind the same port
  // Distinct ids among this primary's replicas; random across primaries (two pods, two runs).
  const base = randomBytes(2).readUInt16BE(0);
  const slots: Slot[] = Array.from({ length: config.replicas }, (_, index) => ({
    id: replicaId(base + index), index, epoch: 0, pid: 0, url: '', ownUrl: '', started_at: 0, state: 'starting', child: null, next: null, config: { ...config, port }, exits: [], timer: null,
  }));
  const retired: Retired[] = [];
  const ownPortReplies = new Map<Child, (m: Extract<FromReplica, { t: 'own-port' }>) => void>();
  let reloadState: ReloadStatus | null = null;
  let reloading: Promise<ReloadStatus> | null = null;
  let queued: Promise<ReloadStatus> | null = null;
  let stopping = false;
  let sharedUrl = '';
  let n = 0;
  const pending = new Map<number, (m: unknown[] | null) => void>();
  const applied = new Map<number, (error: string | null) => void>();
  const writes = new WriteJournal();
  let startup: { resolve(): void; reject(e: Error): void } | null = null;

  if (mode === 'cluster') cluster.schedulingPolicy = cluster.SCHED_NONE;
  if (mode === 'cluster') cluster.setupPrimary({ exec: ENTRY, args: [], serialization: 'advanced' });

  /** Start a process for `slot` under `epoch`; the caller makes it the slot's `child` or `next`. */
  function spawn(slot: Slot, epoch: number, cfg: RouterConfig): Child {
    const spec: ReplicaSpec = {
      config: cfg,
      identity: { id: slot.id, index: slot.index, epoch },
      ownPort: config.replicaAdminPortBase > 0 ? config.replicaAdminPortBase + slot.index : 0,
      reusePort: mode === 'reuseport',
    };
    const env = { ...process.env, BATON_REPLICA_SPEC: JSON.stringify(spec) };
    let child: Child;
    let exited!: () => void;
    const exitedP = new Promise<void>((resolve) => (exited = resolve));
    const onMessage = (m: FromReplica) => void onReplicaMessage(slot, child, m);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      child.alive = false;
      exited();
      onReplicaExit(slot, child, code, signal);
    };
    // A send to a process that has just exited throws (ERR_IPC_CHANNEL_CLOSED): its exit is handled.
    const safe = (f: () => void) => { try { f(); } catch { /* exiting */ } };
    if (mode === 'cluster') {
      const w = cluster.fork(env);
      child = { pid: w.process.pid ?? 0, epoch, exited: exitedP, alive: true, unsentPrefixes: 0, synced: false, send: (m, written) => safe(() => void w.send(m, undefined, undefined, () => written?.())), kill: (sig) => safe(() => void w.process.kill(sig)) };
      w.on('message', onMessage);
      w.on('exit', onExit);
    } else {
      const cp = fork(ENTRY, [], { env, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child = { pid: cp.pid ?? 0, epoch, exited: exitedP, alive: true, unsentPrefixes: 0, synced: false, send: (m, written) => safe(() => void cp.send(m, () => written?.())), kill: (sig) => safe(() => void cp.kill(sig)) };
      cp.on('message', onMessage);
      cp.on('exit', onExit);
    }
    return child;
  }

  /** Start the slot's process anew (first start, restart): it becomes the slot's current one. */
  function start(slot: Slot, epoch: number): void {
    const child = spawn(slot, epoch, slot.config);
    slot.epoch = epoch;
    slot.child = child;
    slot.pid = child.pid;
  }

  async function onReplicaMessage(slot: Slot, child: Child, m: FromReplica): Promise<void> {
    if (m.t === 'own-port') return ownPortReplies.get(child)?.(m);
    if (m.t === 'prefixes') return relayPrefixes(child, m.batch);
    if (m.t === 'sync') {
      // The writes so far, then (in the channel's order) each new one as `apply`.
      child.synced = true;
      child.send({ t: 'writes', ops: writes.ops() });
      return;
    }
    if (m.t === 'applied') return applied.get(m.n)?.(m.error);
    if (m.t === 'write') {
      // Any process, a retiring one too: it still serves the connections it holds.
      child.send({ t: 'written', n: m.n, outcomes: await fanOut(child, m.op) });
      return;
    }
    // From a process that a reload has just replaced too: the collection asked it.
    if (m.t === 'metrics') return pending.get(m.n)?.(m.metrics);
    if (m.t === 'ask') {
      // Any replica, a retiring one too: its own url still answers while it drains.
      try {
        const body = m.what === 'replicas' ? replicaList() : await aggregate();
        child.send({ t: 'answer', n: m.n, body });
      } catch (err) {
        child.send({ t: 'answer', n: m.n, error: (err as Error).message });
      }
      return;
    }
    if (slot.next?.child === child) {
      if (m.t === 'up') slot.next.up(m);
      else if (m.t === 'fatal') slot.next.fail(m.message);
      return;
    }
    if (slot.child !== child) return;
    if (m.t === 'up') {
      Object.assign(slot, { state: 'up', url: m.ownUrl, ownUrl: m.ownUrl, started_at: m.startedAt, pid: m.pid });
      sharedUrl ||= m.url;
      if (slot.epoch > 0) opts.log(`replica ${slot.index} (id ${slot.id}) is back: pid ${m.pid}, epoch ${slot.epoch}, ${m.ownUrl}`);
      if (startup && slots.every((s) => s.state === 'up')) startup.resolve();
    } else if (m.t === 'fatal') {
      if (startup) startup.reject(new ReplicaStartError(m.message, m.usage));
      else opts.log(`replica ${slot.index} failed to start: ${m.message}`);
    }
  }

  function onReplicaExit(slot: Slot, child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (slot.next?.child === child) return slot.next.fail(`exited while starting (${how})`);
    const r = retired.findIndex((x) => x.child === child);
    if (r >= 0) {
      retired.splice(r, 1);
      if (!stopping) opts.log(`replica ${slot.index} epoch ${child.epoch} (pid ${child.pid}) retired: drained and exited (${how})`);
      return;
    }
    if (slot.child !== child) return;
    slot.child = null;
    if (stopping) {
      slot.state = 'stopped';
      return;
    }
    if (startup) {
      // A replica that cannot start (a bad setting, a port in use) fails the whole start.
      startup.reject(new ReplicaStartError(`replica ${slot.index} exited while starting (${how})`, false));
      return;
    }
    const now = Date.now();
    slot.exits = slot.exits.filter((t) => now - t < CRASH_WINDOW_MS);
    slot.exits.push(now);
    if (slot.exits.length > CRASH_LIMIT) {
      slot.state = 'crashed';
      opts.log(`replica ${slot.index} (id ${slot.id}) exited ${slot.exits.length} times within ${CRASH_WINDOW_MS / 1000} s (last: ${how}): a crash loop; not restarting it`);
      if (slots.every((s) => s.state === 'crashed')) opts.onAllCrashed?.();
      return;
    }
    slot.state = 'restarting';
    // A reload is starting this slot's next process: that one takes the slot.
    if (slot.next) return opts.log(`replica ${slot.index} (id ${slot.id}, pid ${slot.pid}) exited (${how}); its reload replacement is on its way`);
    scheduleRestart(slot, how);
  }

  function scheduleRestart(slot: Slot, how: string): void {
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (Math.max(1, slot.exits.length) - 1));
    slot.state = 'restarting';
    opts.log(`replica ${slot.index} (id ${slot.id}, pid ${slot.pid}) exited (${how}); restarting in ${delay} ms`);
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (stopping) return;
      start(slot, slot.epoch + 1);
    }, delay);
  }

  /** Every synced process of the router but `from`: the slots' current ones, a reload's new and old ones. */
  function processes(from: Child): Child[] {
    const all = [...slots.flatMap((s) => [s.child, s.next?.child ?? null]), ...retired.map((r) => r.child)];
    return all.filter((c): c is Child => c !== null && c !== from && c.alive && c.synced);
  }

  /** One replica's prefixes to every other process that serves (one that cannot keep up misses some). */
  function relayPrefixes(from: Child, batch: unknown): void {
    for (const c of processes(from)) {
      if (c.unsentPrefixes >= MAX_UNSENT_PREFIXES) continue;
      c.unsentPrefixes++;
      c.send({ t: 'prefixes', batch }, () => c.unsentPrefixes--);
    }
  }

  /**
   * A worker write `from` has applied: kept for the processes that start later, applied on every
   * other synced process (one still starting gets it with the others when it syncs). Each slot's
   * outcome: its running replica's answer within ASK_TIMEOUT_MS, applied by `from` itself, or
   * pending (not running: it applies the write when it starts).
   */
  async function fanOut(from: Child, op: WorkerWrite): Promise<ReplicaOutcome[]> {
    writes.add(op);
    const answers = new Map<Child, Promise<string | null>>();
    for (const c of processes(from)) answers.set(c, applyOn(c, op));
    return Promise.all(slots.map(async (s): Promise<ReplicaOutcome> => {
      const o = { id: s.id, index: s.index };
      if (s.child === from) return { ...o, state: 'applied' };
      const answer = s.state === 'up' && s.child ? answers.get(s.child) : undefined;
      if (answer === undefined) return { ...o, state: 'pending' };
      const error = await answer;
      return error === null ? { ...o, state: 'applied' } : { ...o, state: 'failed', error };
    }));
  }

  function applyOn(c: Child, op: WorkerWrite): Promise<string | null> {
    const k = ++n;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(`did not answer within ${ASK_TIMEOUT_MS} ms; it applies the write when it reads it`), ASK_TIMEOUT_MS);
      const done = (error: string | null) => {
        clearTimeout(timer);
        applied.delete(k);
        resolve(error);
      };
      applied.set(k, done);
      void c.exited.then(() => done('exited before it answered'));
      c.send({ t: 'apply', n: k, op });
    });
  }

  function replicaList(): ReplicaList {
    return reloadState ? { replicas: list(), reload: reloadStatus() } : { replicas: list() };
  }

  function reloadStatus(): ReloadStatus | null {
    if (!reloadState) return null;
    return { ...reloadState, draining: retired.map((r) => ({ index: r.index, epoch: r.epoch, pid: r.pid })) };
  }

  /**
   * Replace one slot's process: start the next (epoch + 1) beside it, and once it listens retire
   * the old one (it leaves the shared port and drains). Rejects, leaving the old one serving,
   * when the new one fails to start.
   */
  async function replace(slot: Slot, cfg: RouterConfig): Promise<void> {
    if (slot.timer) {
      // Waiting to be restarted after an exit: the reload's process is that restart.
      clearTimeout(slot.timer);
      slot.timer = null;
    }
    // A fixed own port (--replica-admin-port-base): the old process lets go of it for the new one.
    const handOver = cfg.replicaAdminPortBase > 0 && slot.child?.alive === true ? slot.child : null;
    if (handOver) {
      const reply = await ownPort(handOver, false);
      if (reply.error) throw new Error(`the old process could not let go of its own port: ${reply.error}`);
    }
    const epoch = slot.epoch + 1;
    const child = spawn(slot, epoch, cfg);
    const up = await new Promise<Extract<FromReplica, { t: 'up' }>>((resolve, reject) => {
      const timer = setTimeout(() => slot.next?.fail(`did not listen within ${RELOAD_START_MS / 1000} s`), RELOAD_START_MS);
      slot.next = {
        child,
        up: (m) => { clearTimeout(timer); slot.next = null; resolve(m); },
        fail: (message) => { clearTimeout(timer); slot.next = null; reject(new Error(message)); },
      };
    }).catch((err: unknown) => {
      if (child.alive) child.kill('SIGKILL');
      if (handOver?.alive) {
        void child.exited.then(() => ownPort(handOver, true)).then((reply) => {
          opts.log(reply.error ? `replica ${slot.index}: the old process could not listen on its own port again: ${reply.error}` : `replica ${slot.index}: the old process listens on its own port again`);
        });
      }
      // The old process may have died meanwhile: it is restarted as after any exit.
      if (!slot.child && !stopping && slot.state !== 'crashed') scheduleRestart(slot, 'during a reload that could not replace it');
      throw err;
    });
    const old = slot.child;
    const oldGraceMs = slot.config.shutdownGraceMs;
    Object.assign(slot, { child, epoch, config: cfg, state: 'up', url: up.ownUrl, ownUrl: up.ownUrl, started_at: up.startedAt, pid: up.pid, exits: [] });
    opts.log(`replica ${slot.index} (id ${slot.id}) reloaded: pid ${up.pid}, epoch ${epoch}, ${up.ownUrl}`);
    if (!old || !old.alive) return;
    retired.push({ index: slot.index, epoch: old.epoch, pid: old.pid, child: old });
    old.send({ t: 'retire' });
    // The retiring replica ends itself after its drain; one that does not is killed.
    const kill = setTimeout(() => old.kill('SIGKILL'), oldGraceMs + 5_000);
    void old.exited.then(() => clearTimeout(kill));
  }

  /** Ask a replica to stop or start listening on its own port; an answer within ASK_TIMEOUT_MS or an error. */
  function ownPort(child: Child, listen: boolean): Promise<Extract<FromReplica, { t: 'own-port' }>> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done({ t: 'own-port', listening: !listen, error: `no answer within ${ASK_TIMEOUT_MS} ms` }), ASK_TIMEOUT_MS);
      const done = (m: Extract<FromReplica, { t: 'own-port' }>) => {
        clearTimeout(timer);
        ownPortReplies.delete(child);
        resolve(m);
      };
      ownPortReplies.set(child, done);
      child.send({ t: 'own-port', listen });
    });
  }

  async function runReload(): Promise<ReloadStatus> {
    const startedAt = Date.now();
    reloadState = { state: 'reloading', started_at: startedAt, ended_at: null, slot: null, message: null, draining: [] };
    let fresh: RouterConfig;
    try {
      fresh = opts.reloadConfig ? opts.reloadConfig() : config;
    } catch (err) {
      return endReload('failed', null, `the config could not be read again: ${(err as Error).message}; every replica keeps running`);
    }
    const kept = PRIMARY_KEYS.filter((k) => fresh[k] !== config[k]);
    if (kept.length) opts.log(`reload: ${kept.join(', ')} changed in the config but belong to the primary (its socket and slots); kept as started`);
    const cfg: RouterConfig = { ...fresh, host: config.host, port, replicas: config.replicas, replicaAdminPortBase: config.replicaAdminPortBase };
    opts.log(`reload: replacing ${slots.length} replicas one at a time`);
    for (const slot of slots) {
      if (stopping) return endReload('failed', slot.index, 'the primary is stopping');
      reloadState.slot = slot.index;
      try {
        await replace(slot, cfg);
      } catch (err) {
        const message = `replica ${slot.index}'s new process failed to start: ${(err as Error).message}; the reload stopped there, the old process keeps serving`;
        return endReload('failed', slot.index, message);
      }
    }
    return endReload('done', null, null);
  }

  function endReload(state: 'done' | 'failed', slot: number | null, message: string | null): ReloadStatus {
    reloadState = { state, started_at: reloadState!.started_at, ended_at: Date.now(), slot, message, draining: [] };
    opts.log(state === 'done' ? `reload: done in ${reloadState.ended_at! - reloadState.started_at} ms` : `reload failed: ${message}`);
    return reloadStatus()!;
  }

  function reload(): Promise<ReloadStatus> {
    if (stopping) return Promise.reject(new Error('the primary is stopping'));
    if (!reloading) {
      reloading = runReload().finally(() => { reloading = null; });
      return reloading;
    }
    // A reload is running: it may have read the config file before the latest edit, so one more
    // follows it (several requests coalesce into that one) rather than the request being dropped.
    if (!queued) {
      opts.log('reload: one is running; another is queued to follow it');
      queued = reloading.catch(() => undefined).then(() => {
        queued = null;
        return reload();
      });
    } else opts.log('reload: one is running and another is queued already; this request joins the queued one');
    return queued;
  }

  function list(): ReplicaEntry[] {
    return slots.map((s) => ({
      id: s.id, index: s.index, epoch: s.epoch, pid: s.pid, url: s.url, started_at: s.started_at,
      state: s.state === 'up' ? 'up' : s.state === 'crashed' ? 'crashed' : 'restarting',
    }));
  }

  /** Every live replica's metrics, merged by prom-client's AggregatorRegistry (docs/metrics.md, "Replicas"). */
  async function aggregate(): Promise<string> {
    const live = slots.filter((s) => s.state === 'up' && s.child);
    const all = await Promise.all(live.map(async (s) => {
      const metrics = await collect(s);
      if (metrics === null) return null;
      return (metrics as { name: string; values: { labels: Record<string, string> }[] }[]).map((m) => (
        BY_REPLICA_METRICS.has(m.name) ? { ...m, values: m.values.map((v) => ({ ...v, labels: { ...v.labels, replica: s.id } })) } : m));
    }));
    const got = all.filter((m) => m !== null);
    if (got.length === 0) throw new Error('no replica answered');
    const registry = AggregatorRegistry.aggregate(got as Parameters<typeof AggregatorRegistry.aggregate>[0]);
    return (await registry.metrics()).replace(/ Nan$/gm, ' NaN');
  }

  function collect(s: Slot): Promise<unknown[] | null> {
    const k = ++n;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(null), ASK_TIMEOUT_MS);
      const done = (m: unknown[] | null) => {
        clearTimeout(timer);
        pending.delete(k);
        resolve(m);
      };
      pending.set(k, done);
      s.child!.send({ t: 'collect', n: k });
    });
  }

  await new Promise<void>((resolve, reject) => {
    startup = { resolve, reject };
    for (const s of slots) start(s, 0);
  }).catch(async (err: unknown) => {
    startup = null;
    await stop(1_000);
    throw err;
  });
  startup = null;

  async function stop(graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    stopping = true;
    for (const s of slots) if (s.timer) clearTimeout(s.timer);
    // A reload's starting process is not serving yet: it ends at once.
    for (const s of slots) if (s.next) s.next.fail('the primary is stopping');
    const live = [...slots.flatMap((s) => (s.child ? [s.child] : [])), ...retired.map((r) => r.child)].filter((c) => c.alive);
    for (const c of live) c.kill(signal);
    const kill = setTimeout(() => { for (const c of live) c.kill('SIGKILL'); }, graceMs + 5_000);
    await Promise.all(live.map((c) => c.exited));
    clearTimeout(kill);
  }

  return { url: sharedUrl, mode, list, reloadStatus, reload, stop };
}

/** A replica could not start; `usage`: the reason is a bad setting (the CLI's usage error). */
export class ReplicaStartError extends Error {
  constructor(message: string, readonly usage: boolean) {
    super(message);
  }
}

async function freePort(host: string): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ port: 0, host }, () => resolve());
  });
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}
