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
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { RouterConfig } from '../router/config.ts';
import type { ReplicaEntry } from '../router/replicas/identity.ts';

const CHILD = fileURLToPath(new URL('./replicas-process-child.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
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
  const child = spawn(process.execPath, ['--import', TSX_LOADER, CHILD, JSON.stringify(config)], {
    detached: true,
    // The replicas write their warnings to stderr as a lone router does.
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    // Under Electron, process.execPath is Electron itself: run it as plain Node.
    env: { ...process.env, ...(process.versions.electron ? { ELECTRON_RUN_AS_NODE: '1' } : {}) },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.on('message', (m: ReplicasHelperMessage) => {
    if (m.type === 'log') log(m.line);
  });
  const ready = await new Promise<Extract<ReplicasHelperMessage, { type: 'ready' }>>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the router replicas did not start within ${START_TIMEOUT_MS} ms`));
    }, START_TIMEOUT_MS);
    child.on('message', (m: ReplicasHelperMessage) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve(m);
      } else if (m.type === 'failed') {
        clearTimeout(timer);
        reject(new ReplicasStartError(m.message, m.usage));
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the router replicas' primary exited while starting (code ${code}, signal ${signal})`));
    });
  });

  let stopped: Promise<void> | null = null;
  return {
    url: ready.url,
    mode: ready.mode,
    replicas: ready.replicas,
    stop() {
      stopped ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        if (child.connected) child.send({ op: 'stop' } satisfies ReplicasHelperCall);
        else child.kill('SIGTERM');
        const forced = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(forced);
      })();
      return stopped;
    },
  };
}
