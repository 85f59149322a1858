// A cluster of simulated workers, each its own OS process, so that killing one is a real kill:
// its sockets close the way a dead SGLang worker's do. Children are spawned with an IPC channel;
// they report their port over it and exit when it closes, so a parent that dies (even by SIGKILL)
// leaves no orphan behind.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { SimStats } from './core.ts';
import type { Fault } from './faults.ts';
import { workerFlags, type AnyWorkerOptions } from './flags.ts';
import type { DisaggregationMode } from './pd.ts';
import type { ListeningMessage } from './worker-main.ts';

/**
 * A cluster's workers and their options: every option of the worker of its format (sim/worker.ts
 * WorkerOptions, sim/vllm/worker.ts VllmWorkerOptions), passed to each child as its flags
 * (sim/flags.ts). SGLang-only options and vLLM-only ones are refused for the other format. A
 * tokenizer directory is checked here, so that a wrong path is one clear error, not N dead children.
 */
export interface ClusterOptions extends Omit<AnyWorkerOptions, 'inProcess'> {
  workers: number;
  /**
   * The wire format every worker of this cluster speaks: SGLang's native `/generate` (default) or
   * vLLM's `/inference/v1/generate` (sim/vllm/worker.ts).
   */
  format?: 'sglang' | 'vllm';
  /** 0 (default): each worker picks a free port. Otherwise workers listen on port, port+1, ... */
  port?: number;
  /**
   * Each worker's P/D role (its --disaggregation-mode), by index; workers past the list take
   * `disaggregationMode` (default "null"). A prefill's bootstrap server keeps its port across a
   * restart, as routers cache it.
   */
  roles?: DisaggregationMode[];
}

export interface SimWorkerProc {
  index: number;
  url: string;
  port: number;
  pid: number;
  alive: boolean;
  /** Its P/D role ("null": aggregated). */
  role: DisaggregationMode;
  /** A prefill's bootstrap port (null otherwise). */
  bootstrapPort: number | null;
  /** How its process last ended while it served (an exit code, or the signal that killed it); null while it runs. */
  exit: ProcessExit | null;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ClusterChange {
  index: number;
  alive: boolean;
  pid: number;
  url: string;
  /** How a worker that died ended. */
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SimCluster {
  workers(): SimWorkerProc[];
  /** SIGKILL; resolves once the process has exited. */
  kill(i: number): Promise<void>;
  /** Starts a dead worker again on the same port; resolves once it listens. */
  restart(i: number): Promise<void>;
  fault(i: number, f: Fault): Promise<void>;
  stats(i: number): Promise<SimStats>;
  /** Tokens of `ids`' longest prefix worker i's cache holds now (read without touching its LRU): the oracle's view. */
  cacheMatch(i: number, ids: readonly number[]): Promise<number>;
  /** Hears every alive/dead transition; returns the unsubscribe function. */
  onChange(fn: (change: ClusterChange) => void): () => void;
  /** Ends every child and waits for them. */
  stop(): Promise<void>;
}

const WORKER_MAIN = fileURLToPath(new URL('./worker-main.ts', import.meta.url));
// Resolved here rather than left to the child: `--import tsx` would be looked up from the
// child's working directory, which need not be inside this package.
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const START_TIMEOUT_MS = 30_000;

interface Slot {
  index: number;
  role: DisaggregationMode;
  bootstrapPort: number | null;
  port: number;
  url: string;
  child: ChildProcess | null;
  alive: boolean;
  exited: Promise<void>;
  exit: ProcessExit | null;
}

export async function startCluster(opts: ClusterOptions): Promise<SimCluster> {
  if (!Number.isInteger(opts.workers) || opts.workers < 1) throw new Error(`workers must be a positive integer, got ${opts.workers}`);
  const host = opts.host ?? '127.0.0.1';
  const listeners = new Set<(c: ClusterChange) => void>();
  const slots: Slot[] = [];
  let stopping = false;

  const format = opts.format ?? 'sglang';
  if (format !== 'sglang' && format !== 'vllm') throw new Error(`format must be sglang or vllm, got ${String(format)}`);
  if (opts.tokenizer !== undefined && opts.vocabSize !== undefined) throw new Error('a tokenizer sets the vocabulary: give tokenizer or vocabSize, not both');
  // Absolute, so that no child's working directory matters; checked here so that a wrong path is one clear error, not N dead children.
  const tokenizer = opts.tokenizer === undefined ? undefined : resolve(opts.tokenizer);
  if (tokenizer !== undefined && !existsSync(join(tokenizer, 'tokenizer.json'))) throw new Error(`tokenizer directory ${tokenizer} has no tokenizer.json`);
  const { workers: _workers, format: _format, port: _port, host: _host, roles, disaggregationMode, disaggregationBootstrapPort, ...options } = opts;
  if (roles !== undefined && format === 'vllm') throw new Error('P/D roles are SGLang worker options (not with format vllm)');
  for (const r of roles ?? []) if (r !== 'null' && r !== 'prefill' && r !== 'decode') throw new Error(`a role must be prefill, decode or null, got ${String(r)}`);
  const perWorker = workerFlags({ ...options, tokenizer });
  const flags = (slot: Slot): string[] => {
    const f = ['--host', host, '--port', String(slot.port)];
    if (format === 'vllm') f.push('--format', 'vllm');
    if (slot.role !== 'null') f.push('--disaggregation-mode', slot.role);
    if (slot.role === 'prefill') f.push('--disaggregation-bootstrap-port', String(slot.bootstrapPort ?? 0));
    return [...f, ...perWorker];
  };

  const notify = (slot: Slot, code: number | null, signal: NodeJS.Signals | null) => {
    const change: ClusterChange = { index: slot.index, alive: slot.alive, pid: slot.child?.pid ?? 0, url: slot.url, code, signal };
    for (const fn of listeners) fn(change);
  };

  const launch = (slot: Slot): Promise<void> => {
    const child = spawn(process.execPath, ['--import', TSX_LOADER, WORKER_MAIN, ...flags(slot)], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    slot.child = child;
    slot.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`worker ${slot.index} did not start within ${START_TIMEOUT_MS} ms`));
      }, START_TIMEOUT_MS);
      child.on('message', (m: ListeningMessage) => {
        if (m?.type !== 'listening') return;
        clearTimeout(timer);
        slot.port = m.port;
        slot.url = m.url;
        if (m.bootstrapPort !== undefined) slot.bootstrapPort = m.bootstrapPort;
        slot.alive = true;
        slot.exit = null;
        notify(slot, null, null);
        resolve();
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (slot.child !== child) return;
        const wasAlive = slot.alive;
        slot.alive = false;
        if (wasAlive) {
          slot.exit = { code, signal };
          notify(slot, code, signal);
        }
        else reject(new Error(`worker ${slot.index} exited before listening (code ${code}, signal ${signal})`));
      });
    });
  };

  const slot = (i: number): Slot => {
    const s = slots[i];
    if (!s) throw new Error(`no worker ${i} (cluster has ${slots.length})`);
    return s;
  };

  const kill = async (i: number): Promise<void> => {
    const s = slot(i);
    if (s.child && s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    await s.exited;
  };

  const stop = async (): Promise<void> => {
    stopping = true;
    await Promise.all(
      slots.map(async (s) => {
        const c = s.child;
        if (!c || c.exitCode !== null || c.signalCode !== null) return;
        c.kill('SIGTERM');
        const forced = setTimeout(() => c.kill('SIGKILL'), 3000);
        await s.exited;
        clearTimeout(forced);
      }),
    );
  };

  for (let i = 0; i < opts.workers; i++) {
    const port = opts.port ? opts.port + i : 0;
    const role = roles?.[i] ?? disaggregationMode ?? 'null';
    // A fixed bootstrap port is given to the first prefill (more would collide); the others pick free ones.
    const bootstrapPort = role === 'prefill' && disaggregationBootstrapPort && !slots.some((s) => s.role === 'prefill') ? disaggregationBootstrapPort : null;
    slots.push({ index: i, role, bootstrapPort, port, url: '', child: null, alive: false, exited: Promise.resolve(), exit: null });
  }
  try {
    await Promise.all(slots.map(launch));
  } catch (err) {
    await stop();
    throw err;
  }

  const control = async (i: number, path: string, init?: RequestInit): Promise<Response> => {
    const s = slot(i);
    if (!s.alive) throw new Error(`worker ${i} is not running`);
    const res = await fetch(s.url + path, init);
    if (!res.ok) throw new Error(`worker ${i} ${path}: ${res.status} ${await res.text()}`);
    return res;
  };

  return {
    workers: () => slots.map((s) => ({ index: s.index, url: s.url, port: s.port, pid: s.child?.pid ?? 0, alive: s.alive, role: s.role, bootstrapPort: s.bootstrapPort, exit: s.exit })),
    kill,
    restart: async (i) => {
      if (stopping) throw new Error('cluster is stopping');
      const s = slot(i);
      if (s.alive) await kill(i);
      await launch(s);
    },
    fault: async (i, f) => {
      const body = JSON.stringify({ kind: f.kind, after_tokens: f.afterTokens, interval_ms: f.intervalMs });
      await (await control(i, '/_sim/fault', { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text();
    },
    stats: async (i) => (await (await control(i, '/_sim/stats')).json()) as SimStats,
    cacheMatch: async (i, ids) => {
      const r = await control(i, '/_sim/cache_match', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: ids }) });
      const body = (await r.json()) as { cached_tokens?: number; error?: { message: string } };
      if (typeof body.cached_tokens !== 'number') throw new Error(`cache_match on worker ${i}: ${JSON.stringify(body).slice(0, 200)}`);
      return body.cached_tokens;
    },
    onChange: (fn) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    stop,
  };
}
