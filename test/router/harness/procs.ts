// Real processes for the integration tests: the router as `baton router`, workers as
// `baton sim` children (sim/cluster.ts). Everything started here is stopped by `stopAll`.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../../bin/baton.js', import.meta.url));

export interface RouterProc {
  url: string;
  proc: ChildProcess;
  output: string[];
  stop(): Promise<void>;
}

/** `startMs`: how long it may take to print its `listening on` line (`--replicas` starts several processes). */
export async function spawnRouter(args: string[], startMs = 30_000): Promise<RouterProc> {
  const proc = spawn(process.execPath, [BIN, 'router', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout! });
    rl.on('line', (line) => {
      output.push(line);
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    proc.once('exit', (code) => reject(new Error(`router exited with ${code}: ${output.join('')}`)));
    setTimeout(() => reject(new Error(`router did not start: ${output.join('')}`)), startMs);
  });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  };
  return { url, proc, output, stop };
}

export interface StreamResult {
  status: number;
  frames: Record<string, unknown>[];
  done: boolean;
  error: string | null;
}

/**
 * POST a streaming /generate and read it frame by frame; `onFrame(n)` is called after the
 * n-th frame (1-based) so a test can kill a worker mid-stream.
 */
export async function stream(url: string, body: Record<string, unknown>, onFrame?: (n: number, frame: Record<string, unknown>) => void | Promise<void>, signal?: AbortSignal): Promise<StreamResult> {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }), signal });
  const frames: Record<string, unknown>[] = [];
  if (!res.headers.get('content-type')?.includes('text/event-stream')) {
    const json = (await res.json()) as { error?: { message: string } };
    return { status: res.status, frames, done: false, error: json.error?.message ?? null };
  }
  let done = false;
  let error: string | null = null;
  for await (const frame of sseFrames(res)) {
    if (frame === 'data: [DONE]') {
      done = true;
      continue;
    }
    const obj = JSON.parse(frame.slice(6)) as Record<string, unknown>;
    if (obj.error) {
      error = (obj.error as { message: string }).message;
      continue;
    }
    frames.push(obj);
    await onFrame?.(frames.length, obj);
  }
  return { status: res.status, frames, done, error };
}

/** The SSE frames of a response's body as they arrive, each without its blank line (`data: ...`). */
export async function* sseFrames(res: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    pending += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = pending.indexOf('\n\n')) >= 0) {
      yield pending.slice(0, i);
      pending = pending.slice(i + 2);
    }
  }
}

export async function traceRows(routerUrl: string, query: string): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${routerUrl}/traces?format=jsonl&${query}`);
  const text = await res.text();
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

export async function waitUntil(fn: () => Promise<boolean> | boolean, ms = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Every event object in one SSE `data:` payload: an array of events, one event, or an envelope holding them. */
function eventsIn(data: unknown): Record<string, unknown>[] {
  if (Array.isArray(data)) return data.flatMap(eventsIn);
  if (data === null || typeof data !== 'object') return [];
  const o = data as Record<string, unknown>;
  if (Array.isArray(o.events)) return o.events.flatMap(eventsIn);
  if (o.event !== undefined && typeof o.event === 'object') return eventsIn(o.event);
  return [o];
}

/**
 * Resolves once the router reports (its /events progress) that `requestId` has produced at least
 * `tokens` tokens: a test that must act mid-generation waits for the fact, not for the clock
 * (a loaded machine can take any time to produce the first tokens).
 */
export async function waitForTokens(routerUrl: string, requestId: string, tokens: number, ms = 20_000): Promise<void> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  try {
    const res = await fetch(`${routerUrl}/events`, { signal: ac.signal });
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.startsWith('data:')) continue;
        for (const e of eventsIn(JSON.parse(line.slice(5)))) {
          if (e.request_id === requestId && typeof e.completion_tokens === 'number' && e.completion_tokens >= tokens) return;
        }
      }
    }
    throw new Error(`the event stream ended before ${requestId} had ${tokens} tokens`);
  } catch (err) {
    if (ac.signal.aborted) throw new Error(`timed out after ${ms} ms waiting for ${requestId} to have ${tokens} tokens`);
    throw err;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}
