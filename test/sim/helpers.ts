// Test-side HTTP helpers that see what a client really sees on the wire: every SSE frame with its
// arrival time, and how the connection ended (cleanly, by error, with or without [DONE]).

import { request } from 'node:http';

export interface Frame {
  data: string;
  at: number;
}

export interface StreamEnd {
  sawDone: boolean;
  /** The socket error that ended the stream, if any (e.g. ECONNRESET). */
  error: NodeJS.ErrnoException | null;
  /** The response ended without error (a clean end of the body). */
  complete: boolean;
}

export interface SseStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  frames: Frame[];
  /** Parsed JSON of every frame but [DONE]. */
  chunks(): Record<string, unknown>[];
  ended: Promise<StreamEnd>;
  isEnded(): boolean;
  /** Resolves once at least `n` frames have arrived (rejects if the stream ends first). */
  waitFrames(n: number, timeoutMs?: number): Promise<void>;
  destroy(): void;
}

export function openSse(url: string, body: unknown): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } });
    req.on('error', reject);
    req.on('response', (res) => {
      const frames: Frame[] = [];
      const waiters: { n: number; resolve: () => void; reject: (e: Error) => void }[] = [];
      let buf = '';
      let ended = false;
      let endInfo: StreamEnd = { sawDone: false, error: null, complete: false };
      let finish!: (e: StreamEnd) => void;
      const endedP = new Promise<StreamEnd>((r) => (finish = r));
      const settle = () => {
        for (const w of [...waiters]) {
          if (frames.length >= w.n) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          } else if (ended) {
            waiters.splice(waiters.indexOf(w), 1);
            w.reject(new Error(`stream ended after ${frames.length} frames, wanted ${w.n}`));
          }
        }
      };
      const end = (patch: Partial<StreamEnd>) => {
        if (ended) return;
        ended = true;
        endInfo = { ...endInfo, ...patch, sawDone: frames.some((f) => f.data === '[DONE]') };
        finish(endInfo);
        settle();
      };
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        buf += text;
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (frame.startsWith('data: ')) frames.push({ data: frame.slice(6), at: performance.now() });
        }
        settle();
      });
      res.on('end', () => end({ complete: true }));
      res.on('error', (e: NodeJS.ErrnoException) => end({ error: e }));
      res.on('aborted', () => end({ error: Object.assign(new Error('aborted'), { code: 'ECONNRESET' }) }));
      req.on('error', (e: NodeJS.ErrnoException) => end({ error: e }));
      res.on('close', () => end({}));
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        frames,
        chunks: () => frames.filter((f) => f.data !== '[DONE]').map((f) => JSON.parse(f.data) as Record<string, unknown>),
        ended: endedP,
        isEnded: () => ended,
        waitFrames: (n, timeoutMs = 30_000) =>
          new Promise<void>((ok, fail) => {
            const timer = setTimeout(() => fail(new Error(`timed out waiting for ${n} frames (have ${frames.length})`)), timeoutMs);
            waiters.push({ n, resolve: () => (clearTimeout(timer), ok()), reject: (e) => (clearTimeout(timer), fail(e)) });
            settle();
          }),
        destroy: () => req.destroy(),
      });
    });
    req.end(payload);
  });
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; body: unknown; text: string; headers: Headers }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: callers look at `text`
  }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

export async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** Polls `check` until it returns a value other than undefined. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether a process id is still alive. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
