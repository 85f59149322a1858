// A helper process in a process group of its own, with an IPC channel to the host: what the
// simulated cluster (sim-process.ts) and the router replicas of `baton serve --replicas`
// (replicas-process.ts) run in. A terminal's Ctrl-C signals the whole foreground process group,
// and children of the host would die at that instant, before the host had stopped what depends
// on them; a detached helper is not reached by it, and the host stops it in order. Each helper
// exits when its IPC channel closes, so a host that dies (even by SIGKILL) leaves nothing behind.
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface DetachedHelper {
  child: ChildProcess;
  /** Resolves when the helper has exited. */
  exited: Promise<void>;
}

/** Starts `file` (TypeScript, through tsx) with `arg` as JSON on its command line; its stderr is the host's. */
export function spawnDetached(file: string, arg: unknown): DetachedHelper {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, file, JSON.stringify(arg)], {
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    // Under Electron, process.execPath is Electron itself: run it as plain Node.
    env: { ...process.env, ...(process.versions.electron ? { ELECTRON_RUN_AS_NODE: '1' } : {}) },
  });
  return { child, exited: new Promise<void>((resolve) => child.once('exit', () => resolve())) };
}

/**
 * The helper's start: `settle` reads each message and answers what it decides (`ready`, or
 * `failed` with the error to throw), undefined for any other. A helper that decides nothing
 * within `timeoutMs` is killed; one that exits first fails the start. `what` names it in errors.
 */
export function helperStarted<T>(h: DetachedHelper, what: string, timeoutMs: number, settle: (m: unknown) => { ready: T } | { failed: Error } | undefined): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      h.child.kill('SIGKILL');
      reject(new Error(`${what} did not start within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (m: unknown) => {
      const s = settle(m);
      if (!s) return;
      done();
      if ('ready' in s) resolve(s.ready);
      else reject(s.failed);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      done();
      reject(new Error(`${what} exited while starting (code ${code}, signal ${signal})`));
    };
    const done = () => {
      clearTimeout(timer);
      h.child.off('message', onMessage);
      h.child.off('exit', onExit);
    };
    h.child.on('message', onMessage);
    h.child.once('exit', onExit);
  });
}

/** Asks the helper to stop (`ask`), kills it if it has not exited `forceMs` later, and waits for its exit. */
export async function stopHelper(h: DetachedHelper, ask: () => Promise<void> | void, forceMs: number): Promise<void> {
  if (h.child.exitCode !== null || h.child.signalCode !== null) return;
  await ask();
  const forced = setTimeout(() => h.child.kill('SIGKILL'), forceMs);
  await h.exited;
  clearTimeout(forced);
}
