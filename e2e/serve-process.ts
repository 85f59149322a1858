// `baton serve` as a real child process for end-to-end tests: started with its own flags, its
// URL parsed from the line it prints, and stopped with everything it started.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Pids of the simulated workers, read from the host while it runs (for a last-resort kill). */
  workerPids(): Promise<number[]>;
  stop(): Promise<void>;
}

function isSimWorker(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('worker-main');
  } catch {
    return false;
  }
}

/** `baton view FILE`: the dashboard over a trace file, no router (no simulated workers either). */
export function startView(file: string, timeoutMs = 60_000): Promise<ServeProcess> {
  return startServe([file], timeoutMs, 'view');
}

export async function startServe(args: string[], timeoutMs = 90_000, command: 'serve' | 'view' = 'serve'): Promise<ServeProcess> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/baton.js'), command, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`baton ${command} printed no URL within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const check = () => {
      const m = /dashboard on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`baton ${command} exited with ${code} before printing its URL:\n${out}`));
    });
  });

  let knownPids: number[] = [];
  const workerPids = async () => {
    if (command === 'view') return [];
    try {
      const res = await fetch(new URL('/api/sim', url));
      const body = (await res.json()) as { workers: { pid: number | null }[] | null };
      knownPids = (body.workers ?? []).flatMap((w) => (w.pid ? [w.pid] : []));
    } catch {
      // the host is gone: keep the pids we knew
    }
    return knownPids;
  };
  await workerPids();

  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.once('exit', () => resolve());
  });

  return {
    url,
    child,
    output: () => out,
    workerPids,
    async stop() {
      const pids = await workerPids();
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const forced = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(forced);
      }
      // The simulated workers exit with their parent; make sure, since a leak outlives the test.
      // Only a process that is still a simulated worker is killed (pids get reused).
      for (const pid of pids) if (isSimWorker(pid)) process.kill(pid, 'SIGKILL');
    },
  };
}
