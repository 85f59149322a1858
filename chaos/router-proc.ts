// Starting and talking to the router process of a campaign (see router-main.ts for why it is a
// process of its own).

import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { RouterConfig } from '../router/config.ts';
import type { FromRouter, ToRouter } from './router-main.ts';

const MAIN = fileURLToPath(new URL('./router-main.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface MemorySample {
  t: number;
  heapUsed: number;
  rss: number;
}

export interface RouterProcess {
  url: string;
  pid: number;
  /** Everything the router process wrote to stdout and stderr. */
  output(): string;
  /** Whether the process is still running. */
  alive(): boolean;
  exitInfo(): { code: number | null; signal: NodeJS.Signals | null } | null;
  memory(): Promise<MemorySample>;
  stop(): Promise<void>;
}

export async function startRouterProcess(config: Partial<RouterConfig>, startTimeoutMs = 30_000): Promise<RouterProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--expose-gc', '--import', TSX_LOADER, MAIN], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString('utf8')));
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      resolve();
    }),
  );
  const send = (m: ToRouter) => child.send(m);
  const waiters = new Map<number, (m: Extract<FromRouter, { type: 'memory' }>) => void>();
  let seq = 0;

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`router process did not start within ${startTimeoutMs} ms:\n${output}`)), startTimeoutMs);
    child.on('message', (m: FromRouter) => {
      if (m.type === 'listening') {
        clearTimeout(timer);
        resolve(m.url);
      } else if (m.type === 'error') {
        clearTimeout(timer);
        reject(new Error(`router refused to start: ${m.message}`));
      } else if (m.type === 'memory') {
        waiters.get(m.seq)?.(m);
        waiters.delete(m.seq);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`router process exited before listening:\n${output}`));
    });
    send({ type: 'start', config });
  });

  return {
    url,
    pid: child.pid ?? 0,
    output: () => output,
    alive: () => exit === null,
    exitInfo: () => exit,
    memory: () =>
      new Promise<MemorySample>((resolve, reject) => {
        if (exit) return reject(new Error('router process has exited'));
        const n = ++seq;
        const timer = setTimeout(() => {
          waiters.delete(n);
          reject(new Error('router process did not report its memory within 10 s'));
        }, 10_000);
        waiters.set(n, (m) => {
          clearTimeout(timer);
          resolve({ t: Date.now(), heapUsed: m.heapUsed, rss: m.rss });
        });
        send({ type: 'memory', seq: n });
      }),
    stop: async () => {
      if (exit) return;
      send({ type: 'stop' });
      const forced = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(forced);
    },
  };
}
