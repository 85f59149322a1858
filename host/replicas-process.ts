// The router replicas of `baton serve --replicas N` in a process group of their own: a detached
// helper (host/replicas-process-child.ts) is the primary (router/replicas/primary.ts startPrimary)
// and the replicas are its children. Not the host process itself, for three reasons:
// - a terminal's Ctrl-C signals the whole foreground process group, and node:cluster cannot start
//   its workers detached: replicas forked by the host would close at that instant, under the
//   traffic still running, instead of after it (the same hazard as host/sim-process.ts);
// - under Electron, process.execPath is Electron: the helper runs it as plain Node, and the
//   replicas it forks inherit that;
// - node:cluster's settings (the scheduling policy, the entry file) are process-wide.
// The helper exits when its IPC channel closes, and the replicas exit when the helper does, so a
// host that dies (even by SIGKILL) leaves no router behind.
import { fileURLToPath } from 'node:url';
import { helperStarted, spawnDetached, stopHelper } from './detached-helper.ts';
import type { RouterConfig } from '../router/config.ts';
import type { ReplicaEntry } from '../router/replicas/identity.ts';

const CHILD = fileURLToPath(new URL('./replicas-process-child.ts', import.meta.url));
const START_TIMEOUT_MS = 60_000;
/** After the stop is asked for: the replicas close at once (SIGINT), the primary waits for them. */
const STOP_TIMEOUT_MS = 10_000;

/** Helper → parent. */
export type ReplicasHelperMessage =
  | { type: 'ready'; url: string; mode: 'cluster' | 'reuseport'; replicas: ReplicaEntry[] }
  /** `usage`: a bad setting or a port in use (router/replicas/primary.ts ReplicaStartError). */
  | { type: 'failed'; message: string; usage: boolean }
  /** The primary's own lines (a replica restarted, a crash loop). */
  | { type: 'log'; line: string };

/** Parent → helper. */
export type ReplicasHelperCall = { op: 'stop' };

export interface ReplicasLike {
  /** The shared address every replica serves. */
  url: string;
  mode: 'cluster' | 'reuseport';
  /** The replicas as they started. */
  replicas: ReplicaEntry[];
  /** Closes every replica (SIGINT: at once, as the embedded router's close), then the primary exits. */
  stop(): Promise<void>;
}

/** A replica could not start: a setting, or its port in use (then `code` is EADDRINUSE, as a lone router's error). */
export class ReplicasStartError extends Error {
  constructor(message: string, readonly usage: boolean, readonly code: string | undefined = /already in use/.test(message) ? 'EADDRINUSE' : undefined) {
    super(message);
  }
}

/** `config`: each replica's router settings, `replicas` among them. */
export async function startDetachedReplicas(config: Partial<RouterConfig> & { replicas: number }, log: (line: string) => void): Promise<ReplicasLike> {
  const h = spawnDetached(CHILD, config);
  // The replicas write their warnings to the host's stderr as a lone router does; the primary's
  // own lines (a replica restarted, a crash loop) come as messages.
  h.child.on('message', (m: ReplicasHelperMessage) => {
    if (m.type === 'log') log(m.line);
  });
  const ready = await helperStarted<Extract<ReplicasHelperMessage, { type: 'ready' }>>(h, "the router replicas' primary", START_TIMEOUT_MS, (msg) => {
    const m = msg as ReplicasHelperMessage;
    if (m.type === 'ready') return { ready: m };
    if (m.type === 'failed') return { failed: new ReplicasStartError(m.message, m.usage) };
    return undefined;
  });

  let stopped: Promise<void> | null = null;
  return {
    url: ready.url,
    mode: ready.mode,
    replicas: ready.replicas,
    stop() {
      stopped ??= stopHelper(h, () => void (h.child.connected ? h.child.send({ op: 'stop' } satisfies ReplicasHelperCall) : h.child.kill('SIGTERM')), STOP_TIMEOUT_MS);
      return stopped;
    },
  };
}
