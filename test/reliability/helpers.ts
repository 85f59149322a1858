// Small fixtures for the reliability tests: an in-process router over in-process simulated
// workers, raw HTTP over a socket (for what fetch will not send: slow bytes, bad framing), and
// waiting on a condition.
import { connect, type Socket } from 'node:net';
import { startWorker, type SimWorker, type WorkerOptions } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { RouterConfig } from '../../router/config.ts';

export async function waitUntil<T>(fn: () => T | Promise<T>, timeoutMs = 5000, what = 'condition'): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export interface Bench {
  router: RouterHandle;
  workers: SimWorker[];
  close(): Promise<void>;
}

/** Workers first, then a router over them that has probed every one. */
export async function startBench(workerOpts: WorkerOptions[], config: Partial<RouterConfig> = {}): Promise<Bench> {
  const workers: SimWorker[] = [];
  for (const o of workerOpts) workers.push(await startWorker(o));
  const router = await startRouter({ port: 0, workers: workers.map((w) => w.url), healthIntervalMs: 0, ...config });
  return {
    router,
    workers,
    close: async () => {
      await router.close();
      for (const w of workers) await w.close();
    },
  };
}

/** Everything a server sends on a raw connection until it closes it (or `ms` passes). */
export function rawExchange(url: string, write: (s: Socket) => void | Promise<void>, ms = 5000): Promise<{ text: string; closed: boolean; elapsedMs: number }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const s = connect(Number(u.port), u.hostname);
    let text = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ text, closed: false, elapsedMs: Date.now() - started });
    }, ms);
    s.on('data', (c: Buffer) => (text += c.toString('latin1')));
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closed: true, elapsedMs: Date.now() - started });
    });
    s.on('error', () => undefined);
    s.on('connect', () => {
      Promise.resolve(write(s)).catch(reject);
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A stream of cumulative logprob frames, which repeat the prompt's logprobs: ~200 KB a frame,
 * far more than the sockets between a worker and a client that stops reading buffer.
 */
export function bigLogprobStream(maxNew: number, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    input_ids: Array.from({ length: 1024 }, (_, i) => 100 + (i % 500)),
    sampling_params: { max_new_tokens: maxNew, ignore_eos: true, temperature: 0 },
    return_logprob: true,
    logprob_start_len: 0,
    top_logprobs_num: 5,
    stream: true,
    ...extra,
  });
}

/** The status code of the first HTTP response in raw socket text, or 0. */
export function statusOf(raw: string): number {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
  return m ? Number(m[1]) : 0;
}

/** The JSON body of a raw HTTP response (content-length or chunked), or null. */
export function bodyOf(raw: string): unknown {
  const i = raw.indexOf('\r\n\r\n');
  if (i < 0) return null;
  let body = raw.slice(i + 4);
  if (/transfer-encoding: chunked/i.test(raw.slice(0, i))) {
    let out = '';
    for (;;) {
      const nl = body.indexOf('\r\n');
      const n = parseInt(body.slice(0, nl), 16);
      if (!n) break;
      out += body.slice(nl + 2, nl + 2 + n);
      body = body.slice(nl + 2 + n + 2);
    }
    body = out;
  }
  try {
    return JSON.parse(body);
  } catch {
    return null;
  }
}
