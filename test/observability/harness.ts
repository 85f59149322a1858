// Shared by the observability tests: a real simulated cluster (one OS process per worker), the
// router in-process or as its own `node bin/baton.js router` process, clients that read whole
// answers, and readers of /traces and /metrics.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startRouter, type RouterHandle, type RouterConfig } from '../../router/index.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import { parsePrometheusText, type Family } from './prom-text.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BATON = fileURLToPath(new URL('../../bin/baton.js', import.meta.url));

export interface Stack {
  cluster: SimCluster;
  router: RouterHandle;
  close(): Promise<void>;
}

export async function startStack(workers: number, tokenIntervalMs: number, router: Partial<RouterConfig> = {}): Promise<Stack> {
  const cluster = await startCluster({ workers, port: 0, tokenIntervalMs });
  const r = await startRouter({
    port: 0,
    workers: cluster.workers().map((w) => w.url),
    healthIntervalMs: 200,
    interTokenTimeoutMs: 2000,
    ...router,
  });
  return {
    cluster,
    router: r,
    close: async () => {
      await r.close();
      await cluster.stop();
    },
  };
}

export interface GenerateOptions {
  id: string;
  stream: boolean;
  maxNewTokens: number;
  promptLength?: number;
  /** Merged into sampling_params. */
  sampling?: Record<string, unknown>;
  /** The client gives up (closes its connection) when this fires. */
  signal?: AbortSignal;
}

export interface Answer {
  id: string;
  status: number;
  /** Output tokens the client received (the final cumulative chunk, or the unary answer). */
  tokens: number | null;
  /** The answer carried an error (a JSON error body or an in-band error frame). */
  error: boolean;
}

export function promptIds(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 104729) % 30000));
}

/** One /generate call, read to the end. Never throws on an HTTP error: the status says it. */
export async function generate(routerUrl: string, o: GenerateOptions): Promise<Answer> {
  const body = {
    input_ids: promptIds(o.promptLength ?? 16, o.id.length + o.maxNewTokens),
    sampling_params: { max_new_tokens: o.maxNewTokens, ignore_eos: true, temperature: 0, ...o.sampling },
    stream: o.stream,
  };
  let res;
  try {
    res = await request(`${routerUrl}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': o.id },
      body: JSON.stringify(body),
      ...(o.signal ? { signal: o.signal } : {}),
    });
  } catch {
    return { id: o.id, status: 0, tokens: null, error: true };
  }
  let text: string;
  try {
    text = await res.body.text();
  } catch {
    return { id: o.id, status: res.statusCode, tokens: null, error: true };
  }
  if (res.statusCode !== 200) return { id: o.id, status: res.statusCode, tokens: null, error: true };
  if (!o.stream) {
    const json = JSON.parse(text) as { output_ids?: unknown[]; error?: unknown };
    return { id: o.id, status: 200, tokens: Array.isArray(json.output_ids) ? json.output_ids.length : null, error: json.error !== undefined };
  }
  let tokens: number | null = null;
  let error = false;
  for (const frame of text.split('\n\n')) {
    if (!frame.startsWith('data: ') || frame === 'data: [DONE]') continue;
    const chunk = JSON.parse(frame.slice(6)) as { output_ids?: unknown[]; error?: unknown };
    if (chunk.error !== undefined) error = true;
    // The simulated workers stream cumulatively: the last chunk holds every token.
    if (Array.isArray(chunk.output_ids)) tokens = chunk.output_ids.length;
  }
  return { id: o.id, status: 200, tokens, error };
}

export async function scrape(routerUrl: string): Promise<Map<string, Family>> {
  const res = await request(`${routerUrl}/metrics`);
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}`);
  return parsePrometheusText(await res.body.text());
}

export async function fetchText(url: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string; text: string }> {
  const res = await request(url, { headers });
  return { status: res.statusCode, type: String(res.headers['content-type'] ?? ''), text: await res.body.text() };
}

export function parseJsonl(text: string): TraceRow[] {
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as TraceRow);
}

export async function until(cond: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A seeded PRNG (mulberry32), so that a failing random run can be replayed from its seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface RouterProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** `node bin/baton.js router --port 0 ...` as a child; resolves once it says where it listens. */
export async function spawnRouter(args: string[]): Promise<RouterProcess> {
  const child = spawn(process.execPath, [BATON, 'router', '--port', '0', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`router did not start: ${err}`)), 30_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`router exited (${code}) before listening: ${err}`));
    });
  });
  return {
    url,
    child,
    stderr: () => err,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
