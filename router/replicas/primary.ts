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
import cluster from 'node:cluster';
import { fork } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { AggregatorRegistry } from 'prom-client';
import type { RouterConfig } from '../config.ts';
import { BY_REPLICA_METRICS } from '../metrics.ts';
import { replicaId, type ReplicaEntry, type ReplicaIdentity, type ReplicaState } from './identity.ts';
import type { FromPrimary, FromReplica, ReplicaSpec } from './ipc.ts';
import { randomBytes } from 'node:crypto';

const ENTRY = fileURLToPath(new URL('./replica-entry.js', import.meta.url));

/** Exits within this window count toward a crash loop. */
const CRASH_WINDOW_MS = 60_000;
/** More exits than this within the window: the slot is left down and reported crashed. */
const CRASH_LIMIT = 5;
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;
const ASK_TIMEOUT_MS = 3_000;

/** Whether this Node's net.Server.listen takes `reusePort` (added in v22.12.0 and v23.1.0). */
export function reusePortSupported(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/** A replica process, whichever way it was started. */
interface Child {
  pid: number;
  send(m: FromPrimary): void;
  kill(signal: NodeJS.Signals): void;
}

interface Slot extends ReplicaIdentity {
  pid: number;
  url: string;
  ownUrl: string;
  started_at: number;
  state: ReplicaState | 'starting' | 'stopped';
  child: Child | null;
  exits: number[];
  timer: NodeJS.Timeout | null;
}

export interface PrimaryHandle {
  /** The shared address every replica serves. */
  readonly url: string;
  readonly mode: 'cluster' | 'reuseport';
  list(): ReplicaEntry[];
  /** SIGTERM each replica (in index order; each drains as a lone router does) and wait for them, SIGKILL after `graceMs` + 5 s. */
  stop(graceMs: number, signal?: NodeJS.Signals): Promise<void>;
}

export interface PrimaryOptions {
  log(line: string): void;
  /** Called when every replica has crashed (none left to restart). */
  onAllCrashed?(): void;
}

export async function startPrimary(config: RouterConfig, opts: PrimaryOptions): Promise<PrimaryHandle> {
  const mode: 'cluster' | 'reuseport' = reusePortSupported() ? 'reuseport' : 'cluster';
  let port = config.port;
  if (mode === 'reuseport' && port === 0) port = await freePort(config.host); // each process must bind the same port
  // Distinct ids among this primary's replicas; random across primaries (two pods, two runs).
  const base = randomBytes(2).readUInt16BE(0);
  const slots: Slot[] = Array.from({ length: config.replicas }, (_, index) => ({
    id: replicaId(base + index), index, epoch: 0, pid: 0, url: '', ownUrl: '', started_at: 0, state: 'starting', child: null, exits: [], timer: null,
  }));
  let stopping = false;
  let sharedUrl = '';
  let n = 0;
  const pending = new Map<number, (m: unknown[] | null) => void>();
  let startup: { resolve(): void; reject(e: Error): void } | null = null;

  if (mode === 'cluster') cluster.schedulingPolicy = cluster.SCHED_NONE;
  if (mode === 'cluster') cluster.setupPrimary({ exec: ENTRY, args: [], serialization: 'advanced' });

  function spawn(slot: Slot): void {
    const spec: ReplicaSpec = {
      config: { ...config, port },
      identity: { id: slot.id, index: slot.index, epoch: slot.epoch },
      ownPort: config.replicaAdminPortBase > 0 ? config.replicaAdminPortBase + slot.index : 0,
      reusePort: mode === 'reuseport',
    };
    const env = { ...process.env, BATON_REPLICA_SPEC: JSON.stringify(spec) };
    let child: Child;
    const onMessage = (m: FromReplica) => void onReplicaMessage(slot, child, m);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => onReplicaExit(slot, child, code, signal);
    if (mode === 'cluster') {
      const w = cluster.fork(env);
      child = { pid: w.process.pid ?? 0, send: (m) => void w.send(m), kill: (sig) => void w.process.kill(sig) };
      w.on('message', onMessage);
      w.on('exit', onExit);
    } else {
      const cp = fork(ENTRY, [], { env, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child = { pid: cp.pid ?? 0, send: (m) => void cp.send(m), kill: (sig) => void cp.kill(sig) };
      cp.on('message', onMessage);
      cp.on('exit', onExit);
    }
    slot.child = child;
    slot.pid = child.pid;
  }

  async function onReplicaMessage(slot: Slot, child: Child, m: FromReplica): Promise<void> {
    if (slot.child !== child) return;
    if (m.t === 'up') {
      Object.assign(slot, { state: 'up', url: m.ownUrl, ownUrl: m.ownUrl, started_at: m.startedAt, pid: m.pid });
      sharedUrl ||= m.url;
      if (slot.epoch > 0) opts.log(`replica ${slot.index} (id ${slot.id}) is back: pid ${m.pid}, epoch ${slot.epoch}, ${m.ownUrl}`);
      if (startup && slots.every((s) => s.state === 'up')) startup.resolve();
    } else if (m.t === 'fatal') {
      if (startup) startup.reject(new ReplicaStartError(m.message, m.usage));
      else opts.log(`replica ${slot.index} failed to start: ${m.message}`);
    } else if (m.t === 'metrics') {
      pending.get(m.n)?.(m.metrics);
    } else if (m.t === 'ask') {
      try {
        const body = m.what === 'replicas' ? list() : await aggregate();
        child.send({ t: 'answer', n: m.n, body });
      } catch (err) {
        child.send({ t: 'answer', n: m.n, error: (err as Error).message });
      }
    }
  }

  function onReplicaExit(slot: Slot, child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    if (slot.child !== child) return;
    slot.child = null;
    if (stopping) {
      slot.state = 'stopped';
      return;
    }
    const how = signal ? `signal ${signal}` : `code ${code}`;
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
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (slot.exits.length - 1));
    slot.state = 'restarting';
    opts.log(`replica ${slot.index} (id ${slot.id}, pid ${slot.pid}) exited (${how}); restarting in ${delay} ms`);
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (stopping) return;
      slot.epoch++;
      spawn(slot);
    }, delay);
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
    for (const s of slots) spawn(s);
  }).catch(async (err: unknown) => {
    startup = null;
    await stop(1_000);
    throw err;
  });
  startup = null;

  async function stop(graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    stopping = true;
    const live = slots.filter((s) => s.child !== null);
    for (const s of slots) if (s.timer) clearTimeout(s.timer);
    const exited = live.map((s) => new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (s.child === null) {
          clearInterval(check);
          resolve();
        }
      }, 20);
    }));
    for (const s of live) s.child?.kill(signal);
    const kill = setTimeout(() => { for (const s of live) s.child?.kill('SIGKILL'); }, graceMs + 5_000);
    await Promise.all(exited);
    clearTimeout(kill);
  }

  return { url: sharedUrl, mode, list, stop };
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
