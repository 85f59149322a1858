// Adding a wire format is a folder and one registry line: the toy format of this folder
// (format.ts, which imports the core only) is registered with `registerFormat` and nothing else of
// the router is told about it. Its workers are toy processes on loopback (worker.mjs); the router
// probes them as toy workers, serves the format on its generate path (the plain front), admits a
// request of it, migrates it across a SIGKILL of the worker streaming it, and traces it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { registerFormat } from '../../../router/formats/registry.ts';
import { startRouter, type RouterHandle } from '../../../router/index.ts';
import type { AttemptRow, RequestRow } from '../../../router/trace/row.ts';
import { sseFrames, waitUntil } from '../harness/procs.ts';
import { TOY, TOY_PATH } from './format.ts';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));
const PROMPT = [3, 1, 4, 1, 5, 9, 2, 6];
const BUDGET = 60;

interface ToyWorker {
  url: string;
  proc: ChildProcess;
  /** The upstream rids of the generate calls it received. */
  rids: string[];
}

/** worker.mjs's token: a function of the whole sequence before it. */
function nextToken(seq: readonly number[]): number {
  return (seq.length * 7 + seq[seq.length - 1]! * 13) % 1000;
}

function reference(prompt: readonly number[], n: number): number[] {
  const seq = [...prompt];
  for (let i = 0; i < n; i++) seq.push(nextToken(seq));
  return seq.slice(prompt.length);
}

function startWorker(): Promise<ToyWorker> {
  const proc = spawn(process.execPath, [WORKER, '10'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const rids: string[] = [];
  return new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      const listening = /^listening (\d+)$/.exec(line);
      if (listening) resolve({ url: `http://127.0.0.1:${listening[1]}`, proc, rids });
      const generate = /^generate (\S+)$/.exec(line);
      if (generate) rids.push(generate[1]!);
    });
    proc.once('exit', (code) => reject(new Error(`toy worker exited with ${code}`)));
  });
}

let unregister: (() => void) | null = null;
let workers: ToyWorker[] = [];
let router: RouterHandle;

beforeAll(async () => {
  unregister = registerFormat(TOY);
  workers = await Promise.all([startWorker(), startWorker()]);
  router = await startRouter({ port: 0, workers: workers.map((w) => w.url), healthIntervalMs: 100, interTokenTimeoutMs: 5000, benchMs: 100, circuitOpenMs: 100 });
  await waitUntil(() => router.workers().length === 2 && router.workers().every((w) => w.health === 'healthy' && w.format === 'toy'), 10_000, 'two healthy toy workers');
});

afterAll(async () => {
  await router?.close();
  for (const w of workers) if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGKILL');
  unregister?.();
});

describe('a toy wire format added as a folder and one registry line', () => {
  it('is probed, served on its generate path, admitted, migrated across a SIGKILL of its worker, and traced', async () => {
    const id = 'toy-1';
    const res = await fetch(router.url + TOY_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ prompt: PROMPT, max_tokens: BUDGET, stream: true }),
    });
    expect(res.status).toBe(200);
    const frames: { id: string; index?: number; token?: number; finish?: string }[] = [];
    let killed: ToyWorker | null = null;
    let done = false;
    for await (const frame of sseFrames(res)) {
      if (frame === 'data: [DONE]') {
        done = true;
        continue;
      }
      frames.push(JSON.parse(frame.slice('data: '.length)));
      if (frames.length === 10 && killed === null) {
        killed = workers.find((w) => w.rids.some((r) => r.startsWith(`${id}~`))) ?? null;
        expect(killed).not.toBeNull();
        killed!.proc.kill('SIGKILL');
      }
    }
    expect(done).toBe(true);
    expect(killed).not.toBeNull();
    const survivor = workers.find((w) => w !== killed)!;

    // The client's answer is the uninterrupted one: every token once, in order, finished.
    expect(frames.map((f) => f.token)).toEqual(reference(PROMPT, BUDGET));
    expect(frames.map((f) => f.index)).toEqual(Array.from({ length: BUDGET }, (_, k) => k));
    expect(frames.at(-1)!.finish).toBe('length');
    expect(frames.every((f) => f.id === id)).toBe(true);
    // The continuation went to the other toy worker.
    expect(survivor.rids.some((r) => r.startsWith(`${id}~`))).toBe(true);

    // Traced: admitted, two attempts, one migration, each row in the toy format.
    await waitUntil(() => router.traceRows({ request: id }).some((r) => r.kind === 'request'), 5000, 'the request row');
    const rows = router.traceRows({ request: id });
    const request = rows.find((r): r is RequestRow => r.kind === 'request')!;
    expect(request).toMatchObject({ format: 'toy', admitted: true, admission_reason: null, attempts: 2, migrations: 1, outcome: 'finished', completion_tokens: BUDGET });
    const attempts = rows.filter((r): r is AttemptRow => r.kind === 'attempt').sort((a, b) => a.attempt - b.attempt);
    expect(attempts).toHaveLength(2);
    const [a0, a1] = attempts as [AttemptRow, AttemptRow];
    expect(a0).toMatchObject({ format: 'toy', attempt: 0, worker: killed!.url, outcome: 'failed', error_kind: 'stream_broken', replayed_tokens: 0 });
    expect(a0.tokens).toBeGreaterThanOrEqual(10);
    expect(a1).toMatchObject({ format: 'toy', attempt: 1, worker: survivor.url, outcome: 'finished', replayed_tokens: a0.tokens, tokens: BUDGET - a0.tokens });
  });
});
