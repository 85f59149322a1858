// How the primary of `--replicas` starts a replica process: a spawner per way of sharing the port
// (docs/replicas.md). The supervisor (supervisor.ts) and the reload (reload.ts) see only `Child`.
//
// - Node 20: node:cluster with SCHED_NONE (cluster-spawner.ts).
// - Node >= 22.12 (and 23.1+), where `net.Server.listen` takes `reusePort`: independent processes,
//   each binding the port with SO_REUSEPORT (reuseport-spawner.ts).
import { fileURLToPath } from 'node:url';
import type { FromPrimary, FromReplica, ReplicaSpec } from './ipc.ts';

/** The file a replica process runs: tsx's loader, then replica-main.ts. */
export const ENTRY = fileURLToPath(new URL('./replica-entry.js', import.meta.url));

/** A replica process, whichever way it was started. */
export interface Child {
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

/** What a spawned process reports: its messages, then its exit (once `alive` is false and `exited` resolved). */
export interface ChildEvents {
  message(child: Child, m: FromReplica): void;
  exit(child: Child, code: number | null, signal: NodeJS.Signals | null): void;
}

export interface Spawner {
  readonly mode: 'cluster' | 'reuseport';
  /** The port every process is given: the configured one, or (when a spawner needs a fixed one) a free one for 0. */
  port(host: string, configured: number): Promise<number>;
  spawn(spec: Omit<ReplicaSpec, 'reusePort'>, events: ChildEvents): Child;
}

/** The process a spawner started, as the channel and the process reach it. */
export interface Process {
  pid: number | undefined;
  send(m: FromPrimary, written: () => void): void;
  kill(signal: NodeJS.Signals): void;
  onMessage(f: (m: FromReplica) => void): void;
  onExit(f: (code: number | null, signal: NodeJS.Signals | null) => void): void;
}

/** A `Child` over a started process, reporting to `events`. */
export function childOf(p: Process, epoch: number, events: ChildEvents): Child {
  let exited!: () => void;
  // A send to a process that has just exited throws (ERR_IPC_CHANNEL_CLOSED): its exit is handled.
  const safe = (f: () => void) => { try { f(); } catch { /* exiting */ } };
  const child: Child = {
    pid: p.pid ?? 0, epoch, alive: true, unsentPrefixes: 0, synced: false,
    exited: new Promise<void>((resolve) => (exited = resolve)),
    send: (m, written) => safe(() => p.send(m, () => written?.())),
    kill: (sig) => safe(() => p.kill(sig)),
  };
  p.onMessage((m) => events.message(child, m));
  p.onExit((code, signal) => {
    child.alive = false;
    exited();
    events.exit(child, code, signal);
  });
  return child;
}

/** The environment a replica process starts with: the primary's, and its spec. */
export function replicaEnv(spec: ReplicaSpec): NodeJS.ProcessEnv {
  return { ...process.env, BATON_REPLICA_SPEC: JSON.stringify(spec) };
}
