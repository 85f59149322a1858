// The conformance suite's targets: every assertion runs against a simulated SGLang worker directly
// and against the Baton router in front of simulated workers, in both of SGLang's streaming modes
// (cumulative, the default, and `--incremental-streaming-output`). A client must not be able to
// tell the router from the worker, so the same assertion must hold on all of them.
//
// Usage in a test file:
//
//   describe.each(TARGETS)('$name', (spec) => {
//     const t = useTarget(spec);          // starts the workers (and router) in beforeAll
//     it('...', async () => { await fetch(t.url + '/generate', ...) });
//   });
//
// In-process workers and routers on loopback (real sockets, no mocks), like
// test/router/harness/setup.ts, so a file starts in milliseconds.
import { afterAll, beforeAll } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';

export interface TargetSpec {
  name: string;
  /** A router in front of `ROUTER_WORKERS` workers, or one worker directly. */
  router: boolean;
  /** The workers run with --incremental-streaming-output. */
  incremental: boolean;
  /** Text mode (a tokenizer); otherwise token-only, like --skip-tokenizer-init. */
  text: boolean;
}

export interface Target extends TargetSpec {
  /** Base URL a client talks to. */
  url: string;
  /** The simulated workers behind `url` (one for a worker target). Setup only, never asserted on. */
  workers: SimWorker[];
  /** Slows every worker down to one token per `ms` (so requests are still running when a test acts). */
  slow(ms: number): Promise<void>;
  /** Undoes `slow`. */
  clear(): Promise<void>;
}

export const ROUTER_WORKERS = 2;

const spec = (name: string, router: boolean, incremental: boolean, text: boolean): TargetSpec => ({ name, router, incremental, text });

/** Token-only targets (the simulator's default, like --skip-tokenizer-init). */
export const TARGETS: TargetSpec[] = [
  spec('worker-cumulative', false, false, false),
  spec('worker-incremental', false, true, false),
  spec('router-over-cumulative', true, false, false),
  spec('router-over-incremental', true, true, false),
];

/** The same four, with the workers in text mode. */
export const TEXT_TARGETS: TargetSpec[] = [
  spec('text-worker-cumulative', false, false, true),
  spec('text-worker-incremental', false, true, true),
  spec('text-router-over-cumulative', true, false, true),
  spec('text-router-over-incremental', true, true, true),
];

/** Starts a target's processes; the caller closes them with the returned function. */
export async function startTarget(s: TargetSpec): Promise<{ target: Target; close: () => Promise<void> }> {
  const n = s.router ? ROUTER_WORKERS : 1;
  const workers = await Promise.all(
    Array.from({ length: n }, () => startWorker({ tokenIntervalMs: 0, prefillUsPerToken: 20, incremental: s.incremental, text: s.text })),
  );
  let router: RouterHandle | null = null;
  if (s.router) {
    router = await startRouter({
      port: 0,
      workers: workers.map((w) => w.url),
      benchMs: 0,
      healthIntervalMs: 0,
      circuitFailureThreshold: 1_000_000,
      interTokenTimeoutMs: 10_000,
      // The SGLang model gateway's default policy: requests that share a prefix meet where it is
      // cached, as they would on one worker (test_cache_tokens).
      policy: 'cache_aware',
    });
  }
  const target: Target = {
    ...s,
    url: router ? router.url : workers[0]!.url,
    workers,
    slow: async (ms) => workers.forEach((w) => w.fault({ kind: 'slow', intervalMs: ms })),
    clear: async () => workers.forEach((w) => w.fault({ kind: 'clear' })),
  };
  const close = async () => {
    await router?.close();
    await Promise.all(workers.map((w) => w.close()));
  };
  return { target, close };
}

/**
 * Registers beforeAll/afterAll that start and stop the target; the returned object is filled in
 * by beforeAll (read its fields inside tests only).
 */
export function useTarget(s: TargetSpec): Target {
  const handle = { ...s } as Target;
  let close: (() => Promise<void>) | null = null;
  beforeAll(async () => {
    const started = await startTarget(s);
    Object.assign(handle, started.target);
    close = started.close;
  });
  afterAll(async () => {
    await close?.();
  });
  return handle;
}
