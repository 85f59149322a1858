// Every process the bench starts goes through here, so that one call stops them all: at the end,
// on Ctrl-C and on error. Node children also get an IPC channel and exit when it closes, so even
// a bench killed outright leaves none of them behind.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
export const BATON_BIN = fileURLToPath(new URL('../bin/baton.js', import.meta.url));

/** A started process and the tail of what it said on stderr, for error messages. */
export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  exited: Promise<void>;
  stderrTail(): string;
}

export class ProcessGroup {
  private readonly procs = new Set<Proc>();

  /** Start `command`; `ipc` adds an IPC channel (Node children). */
  spawn(name: string, command: string, args: string[], opts: { ipc?: boolean; env?: NodeJS.ProcessEnv; stdout?: boolean } = {}): Proc {
    const so: SpawnOptions = {
      stdio: ['ignore', opts.stdout ? 'pipe' : 'ignore', 'pipe', ...(opts.ipc ? (['ipc'] as const) : [])],
      env: { ...process.env, ...opts.env },
    };
    const child = spawn(command, args, so);
    if (child.pid === undefined) throw new Error(`could not start ${name} (${command})`);
    const tail: string[] = [];
    // BENCH_TEE_DIR: keep a copy of each piped stdout (e.g. a router's --trace-gc-nvp lines).
    if (process.env.BENCH_TEE_DIR && child.stdout) child.stdout.pipe(createWriteStream(`${process.env.BENCH_TEE_DIR}/${name.replace(/\W+/g, '_')}-${child.pid}.out`));
    child.stderr?.setEncoding('utf8').on('data', (s: string) => {
      tail.push(s);
      if (tail.length > 20) tail.shift();
    });
    const p: Proc = {
      name,
      child,
      pid: child.pid,
      exited: new Promise((resolve) => child.once('exit', () => resolve())),
      stderrTail: () => tail.join('').trim().split('\n').slice(-5).join('\n'),
    };
    this.procs.add(p);
    void p.exited.then(() => this.procs.delete(p));
    return p;
  }

  /** A Node child running a TypeScript file through tsx, with an IPC channel. */
  spawnNode(name: string, script: string, args: string[], opts: { preload?: string[]; nodeFlags?: string[]; env?: NodeJS.ProcessEnv; stdout?: boolean } = {}): Proc {
    const imports = ['--import', TSX_LOADER, ...(opts.preload ?? []).flatMap((f) => ['--import', pathToFileURL(f).href])];
    return this.spawn(name, process.execPath, [...(opts.nodeFlags ?? []), ...imports, script, ...args], { ipc: true, env: opts.env, stdout: opts.stdout });
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  async stop(p: Proc, graceMs = 3000): Promise<void> {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return;
    p.child.kill('SIGTERM');
    const force = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
    await p.exited;
    clearTimeout(force);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.procs].map((p) => this.stop(p)));
  }

  /** Synchronous last resort (process 'exit'): no waiting possible. */
  killAllNow(): void {
    for (const p of this.procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  }
}

/** Resolves with the first IPC message `accept` returns a value for; rejects if the process exits first. */
export function waitForMessage<T>(p: Proc, accept: (m: unknown) => T | undefined, timeoutMs = 30_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`${p.name} did not answer within ${timeoutMs} ms. ${p.stderrTail()}`)), timeoutMs);
    const onMessage = (m: unknown) => {
      const v = accept(m);
      if (v !== undefined) done(null, v);
    };
    const onExit = (code: number | null, signal: string | null) => done(new Error(`${p.name} exited (${signal ?? `code ${code}`}). ${p.stderrTail()}`));
    const done = (err: Error | null, v?: T) => {
      clearTimeout(timer);
      p.child.off('message', onMessage);
      p.child.off('exit', onExit);
      if (err) reject(err);
      else resolve(v as T);
    };
    p.child.on('message', onMessage);
    p.child.once('exit', onExit);
  });
}

/** Resolves with the first stdout line that `match` returns a value for. */
export function waitForLine<T>(p: Proc, match: (line: string) => T | undefined, timeoutMs = 30_000): Promise<T> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => done(new Error(`${p.name} did not start within ${timeoutMs} ms. ${p.stderrTail()}`)), timeoutMs);
    const onData = (s: string) => {
      buf += s;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const v = match(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (v !== undefined) return done(null, v);
      }
    };
    const onExit = (code: number | null, signal: string | null) => done(new Error(`${p.name} exited (${signal ?? `code ${code}`}). ${p.stderrTail()}`));
    const done = (err: Error | null, v?: T) => {
      clearTimeout(timer);
      p.child.stdout?.off('data', onData);
      p.child.off('exit', onExit);
      // Keep draining stdout so a chatty child never blocks on a full pipe.
      p.child.stdout?.resume();
      if (err) reject(err);
      else resolve(v as T);
    };
    p.child.stdout?.setEncoding('utf8').on('data', onData);
    p.child.once('exit', onExit);
  });
}

/** Resolves once a TCP connection to host:port succeeds (nginx has no readiness message). */
export async function waitForPort(port: number, p: Proc, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`${p.name} exited. ${p.stderrTail()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${p.name} did not listen on port ${port} within ${timeoutMs} ms. ${p.stderrTail()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
