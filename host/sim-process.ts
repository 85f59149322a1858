// The simulated cluster in a process group of its own. Ctrl-C in a terminal signals the whole
// foreground process group: simulated workers that were children of `baton serve` died at that
// instant, before the router had stopped, and their broken streams became migrations and failures
// in the traces. So the cluster runs in a detached helper (host/sim-process-child.ts) that a
// terminal's Ctrl-C does not reach; the host stops the router first, then asks the helper to stop
// the workers. The helper exits when its IPC channel closes, so a host that dies (even by
// SIGKILL) still leaves no worker behind: the helper stops its cluster, whose workers exit with it.
import { fileURLToPath } from 'node:url';
import { helperStarted, spawnDetached, stopHelper } from './detached-helper.ts';
import type { ClusterOptions } from '../sim/cluster.ts';
import type { SimClusterLike, SimFaultKind } from './sim-control.ts';

const CHILD = fileURLToPath(new URL('./sim-process-child.ts', import.meta.url));
const START_TIMEOUT_MS = 60_000;

/**
 * The simulated workers' wire format: one for all, or half SGLang and half vLLM; `pd`: SGLang
 * workers in P/D roles, half prefill and half decode (the host passes them as `roles`).
 */
export type SimFormatChoice = 'sglang' | 'vllm' | 'mixed' | 'openai' | 'pd';

/** A simulated cluster's settings as the host asks for them (sim/cluster.ts's, and 'mixed'). */
export type HostClusterOptions = Omit<ClusterOptions, 'format'> & { format?: SimFormatChoice };

export interface SimWorkerMirror {
  index: number;
  url: string;
  port: number;
  pid: number;
  alive: boolean;
  /** How its process last ended while it served; null while it runs (sim/cluster.ts). */
  exit?: { code: number | null; signal: string | null } | null;
}

/** Parent → helper. */
export interface HelperCall {
  id: number;
  op: 'kill' | 'restart' | 'fault' | 'stop';
  args: unknown[];
}

/** Helper → parent. */
export type HelperMessage =
  | { type: 'ready'; workers: SimWorkerMirror[] }
  | { type: 'failed'; message: string }
  | { type: 'workers'; workers: SimWorkerMirror[] }
  | { type: 'reply'; id: number; ok: boolean; message?: string };

export async function startDetachedCluster(opts: HostClusterOptions): Promise<SimClusterLike> {
  const h = spawnDetached(CHILD, opts);
  const { child } = h;
  let workers: SimWorkerMirror[] = [];
  const listeners = new Set<() => void>();
  const pending = new Map<number, { resolve(): void; reject(err: Error): void }>();
  let nextId = 1;
  child.on('message', (m: HelperMessage) => {
    if (m.type === 'workers') {
      workers = m.workers;
      for (const l of listeners) l();
    } else if (m.type === 'reply') {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.ok) p?.resolve();
      else p?.reject(new Error(m.message ?? 'simulated cluster: failed'));
    }
  });
  child.once('exit', () => {
    for (const p of pending.values()) p.reject(new Error('the simulated cluster exited'));
    pending.clear();
    workers = workers.map((w) => ({ ...w, alive: false }));
  });
  workers = await helperStarted<SimWorkerMirror[]>(h, 'the simulated cluster', START_TIMEOUT_MS, (msg) => {
    const m = msg as HelperMessage;
    if (m.type === 'ready') return { ready: m.workers };
    if (m.type === 'failed') return { failed: new Error(m.message) };
    return undefined;
  });

  const call = (op: HelperCall['op'], ...args: unknown[]): Promise<void> => new Promise((resolve, reject) => {
    if (!child.connected) return reject(new Error('the simulated cluster is not running'));
    const id = nextId++;
    pending.set(id, { resolve, reject });
    child.send({ id, op, args } satisfies HelperCall);
  });

  let stopped: Promise<void> | null = null;
  return {
    workers: () => workers.map((w) => ({ ...w })),
    kill: (i: number) => call('kill', i),
    restart: (i: number) => call('restart', i),
    fault: (i: number, f: { kind: SimFaultKind; afterTokens?: number; intervalMs?: number }) => call('fault', i, f),
    onChange(listener: () => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      stopped ??= stopHelper(h, () => call('stop').catch(() => undefined), 10_000);
      return stopped;
    },
  };
}
