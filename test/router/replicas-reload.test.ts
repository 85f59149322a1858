// `baton router --replicas 2` reloaded by SIGHUP (docs/replicas.md, "Reload"): real processes.
// Streams run through the shared port while each replica is replaced; every one ends whole and
// token for token the simulator's uninterrupted answer. Afterwards both slots run epoch 1 in new
// processes that read the config file again, and the old processes are gone. A new replica that
// cannot start stops the reload and leaves the old one serving.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { ridReplica } from '../../router/migration/rid.ts';
import { spawnRouter, stream, traceRows, waitUntil, type RouterProc, type StreamResult } from './harness/procs.ts';
import { fold } from './harness/setup.ts';
import { pidAlive } from '../sim/helpers.ts';

interface Entry { id: string; index: number; epoch: number; pid: number; url: string; state: string }
interface Reload { state: string; slot: number | null; message: string | null; draining: { index: number; epoch: number; pid: number }[] }
interface List { replicas: Entry[]; reload?: Reload }

const TOKENS = 80;

let cluster: SimCluster;
let router: RouterProc;
let dir: string;
let configFile: string;

function writeConfig(settings: string): void {
  writeFileSync(configFile, `health_interval_ms: 200\nshutdown_grace_ms: 20000\n${settings}`);
}

beforeAll(async () => {
  // 10 ms a token: a stream of 80 lasts ~1 s, so that streams are in flight on a replica when it
  // is retired.
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 10 });
  dir = mkdtempSync(join(tmpdir(), 'baton-reload-'));
  configFile = join(dir, 'router.yaml');
  writeConfig(`workers: [${cluster.workers()[0]!.url}]\n`);
  router = await spawnRouter(['--replicas', '2', '--config', configFile], 100_000);
}, 120_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function replicas(url: string): Promise<List> {
  const res = await fetch(`${url}/replicas`);
  expect(res.status).toBe(200);
  return (await res.json()) as List;
}

interface Run { prompt: number[]; result: StreamResult | null; error: string | null; endedAt: number }

describe('SIGHUP to the primary of --replicas 2', () => {
  it('replaces each replica in turn while streams run; every stream ends token-exact; new pids, epoch 1, the config file read again', async () => {
    const before = await replicas(router.url);
    expect(before.replicas.map((r) => [r.index, r.epoch, r.state])).toEqual([[0, 0, 'up'], [1, 0, 'up']]);
    expect(before.reload).toBeUndefined();

    // Clients keep streams running through the shared port (keep-alive connections, as fetch
    // pools them) until the reload is over.
    let go = true;
    const runs: Run[] = [];
    let n = 0;
    const client = async (c: number) => {
      while (go) {
        const i = n++;
        const prompt = [100 + c, 7, i % 50, 3];
        const run: Run = { prompt, result: null, error: null, endedAt: 0 };
        runs.push(run);
        try {
          run.result = await stream(router.url, { rid: `reload-${i}`, input_ids: prompt, sampling_params: { max_new_tokens: TOKENS, ignore_eos: true } });
        } catch (err) {
          run.error = String((err as Error).cause ?? err);
        }
        run.endedAt = Date.now();
      }
    };
    const clients = Array.from({ length: 6 }, (_, c) => client(c));
    await waitUntil(() => runs.filter((r) => r.endedAt > 0).length >= 6, 30_000, 'streams flowing');

    // The config file now lists both workers: the new replicas read it; the old ones had one.
    writeConfig(`workers: [${cluster.workers().map((w) => w.url).join(', ')}]\n`);
    const hupAt = Date.now();
    router.proc.kill('SIGHUP');
    let after: List = before;
    await waitUntil(async () => {
      after = await replicas(router.url);
      return after.reload?.state === 'done';
    }, 100_000, 'the reload done');
    // A little traffic on the new replicas alone, then the clients stop.
    const doneAt = Date.now();
    await waitUntil(() => runs.filter((r) => r.endedAt > doneAt).length >= 6, 30_000, 'streams after the reload');
    go = false;
    await Promise.all(clients);

    const ref = new Map<string, number[]>();
    const bad: string[] = [];
    for (const r of runs) {
      const key = r.prompt.join(',');
      if (!ref.has(key)) ref.set(key, runModel(r.prompt, { max_new_tokens: TOKENS, ignore_eos: true }).output_ids);
      const res = r.result;
      if (r.error || !res || res.status !== 200 || !res.done || res.error) {
        bad.push(`[${key}]: ${r.error ?? JSON.stringify({ status: res?.status, done: res?.done, error: res?.error })}`);
        continue;
      }
      const answer = fold(res.frames, false);
      if (JSON.stringify(answer.output_ids) !== JSON.stringify(ref.get(key))) bad.push(`[${key}]: not the reference answer`);
      else expect((answer.meta_info as { finish_reason: unknown }).finish_reason).toEqual({ type: 'length', length: TOKENS });
    }
    expect(bad).toEqual([]);
    // Streams ran across the reload, not only around it.
    expect(runs.filter((r) => r.endedAt > hupAt && r.endedAt < doneAt).length).toBeGreaterThanOrEqual(6);

    expect(after.replicas.map((r) => [r.index, r.epoch, r.state])).toEqual([[0, 1, 'up'], [1, 1, 'up']]);
    expect(after.replicas.map((r) => r.id)).toEqual(before.replicas.map((r) => r.id));
    const oldPids = before.replicas.map((r) => r.pid);
    for (const r of after.replicas) expect(oldPids).not.toContain(r.pid);
    // The old processes drain (their idle keep-alive connections end within the 5 s the server
    // announced) and exit.
    await waitUntil(() => oldPids.every((pid) => !pidAlive(pid)), 40_000, 'the old replicas gone');
    await waitUntil(async () => (await replicas(router.url)).reload?.draining.length === 0, 10_000, 'no replica draining');
    const out = router.output.join('\n');
    for (const r of before.replicas) expect(out).toContain(`replica ${r.index} epoch 0 (pid ${r.pid}) retired: drained and exited`);

    // The new replicas took both workers from the file, and served: their rids carry epoch 1.
    for (const r of after.replicas) {
      const workers = (await (await fetch(`${r.url}/workers`)).json()) as unknown[] | { workers: unknown[] };
      expect(Array.isArray(workers) ? workers : workers.workers).toHaveLength(2);
      const rows = await traceRows(r.url, 'kind=attempt');
      for (const row of rows) expect(ridReplica(row.rid as string)).toEqual({ replica: r.id, epoch: 1 });
    }
  }, 200_000);

  it('a new replica that cannot start stops the reload, and the old one keeps serving', async () => {
    const before = await replicas(router.url);
    // The primary reads the file; the replica fails on it (the worker file does not exist).
    writeConfig(`workers: [${cluster.workers()[0]!.url}]\nworker_file: ${join(dir, 'missing.yaml')}\n`);
    router.proc.kill('SIGHUP');
    let after: List = before;
    await waitUntil(async () => {
      after = await replicas(router.url);
      return after.reload?.state === 'failed';
    }, 100_000, 'the reload failed');
    expect(after.reload).toMatchObject({ state: 'failed', slot: 0 });
    expect(after.reload!.message).toMatch(/replica 0's new process failed to start: .*missing\.yaml.*the old process keeps serving/s);
    expect(after.replicas).toEqual(before.replicas);
    expect(router.output.join('\n')).toMatch(/reload failed: replica 0's new process failed to start/);
    // The old replicas answer, on the shared port and on their own.
    for (const url of [router.url, ...after.replicas.map((r) => r.url)]) {
      const res = await stream(url, { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4, ignore_eos: true } });
      expect(res.done).toBe(true);
    }
  }, 200_000);

  it('a second SIGHUP during a reload is queued and runs after it', async () => {
    writeConfig(`workers: [${cluster.workers()[0]!.url}]\n`);
    const before = await replicas(router.url);
    router.proc.kill('SIGHUP');
    await waitUntil(async () => (await replicas(router.url)).reload?.state === 'reloading', 30_000, 'a reload running');
    // One signal at a time: the kernel merges a signal sent while the same one is pending.
    router.proc.kill('SIGHUP');
    await waitUntil(() => router.output.join('\n').includes('reload: one is running; another is queued to follow it'), 30_000, 'a reload queued');
    router.proc.kill('SIGHUP');
    await waitUntil(() => router.output.join('\n').includes('this request joins the queued one'), 30_000, 'a request joining the queued reload');
    let after: List = before;
    await waitUntil(async () => {
      after = await replicas(router.url);
      return after.reload?.state === 'done' && after.replicas.every((r) => r.epoch === 3);
    }, 150_000, 'two reloads done');
    // Exactly two reloads: epoch 1 -> 2 -> 3, not a third.
    expect(after.replicas.map((r) => [r.epoch, r.state])).toEqual([[3, 'up'], [3, 'up']]);
  }, 200_000);
});

describe('SIGHUP with --replica-admin-port-base', () => {
  it('hands each fixed own port to the new replica, and back to the old one when the new one fails', async () => {
    const base = await freePortPair();
    const sub = join(dir, 'fixed.yaml');
    const write = (extra: string) => writeFileSync(sub, `health_interval_ms: 200\nworkers: [${cluster.workers()[0]!.url}]\n${extra}`);
    write('');
    const r = await spawnRouter(['--replicas', '2', '--replica-admin-port-base', String(base), '--config', sub], 100_000);
    try {
      const urls = [`http://127.0.0.1:${base}`, `http://127.0.0.1:${base + 1}`];
      expect((await replicas(r.url)).replicas.map((e) => e.url)).toEqual(urls);
      r.proc.kill('SIGHUP');
      let after: List | null = null;
      await waitUntil(async () => {
        after = await replicas(r.url);
        return after.reload?.state === 'done';
      }, 100_000, 'the reload done');
      expect(after!.replicas.map((e) => [e.url, e.epoch, e.state])).toEqual([[urls[0], 1, 'up'], [urls[1], 1, 'up']]);
      // The own url is the new process's: it lists epoch 1 and its rids carry it.
      const res = await stream(urls[0]!, { input_ids: [9, 9], sampling_params: { max_new_tokens: 3, ignore_eos: true } });
      expect(res.done).toBe(true);
      expect((await traceRows(urls[0]!, 'kind=attempt')).map((row) => ridReplica(row.rid as string)!.epoch)).toEqual([1]);

      write(`worker_file: ${join(dir, 'missing.yaml')}\n`);
      r.proc.kill('SIGHUP');
      await waitUntil(() => r.output.join('\n').includes('replica 0: the old process listens on its own port again'), 100_000, 'the own port back on the old process');
      const failed = await replicas(urls[0]!);
      expect(failed.reload).toMatchObject({ state: 'failed', slot: 0 });
      expect(failed.replicas.map((e) => [e.url, e.epoch])).toEqual([[urls[0], 1], [urls[1], 1]]);
    } finally {
      await r.stop();
    }
  }, 200_000);
});

/** A port P with P + 1 free too (for --replica-admin-port-base). */
async function freePortPair(): Promise<number> {
  const { createServer } = await import('node:net');
  const listen = (port: number) => new Promise<import('node:net').Server | null>((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(null));
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
  for (;;) {
    const a = (await listen(0))!;
    const p = (a.address() as { port: number }).port;
    const b = p < 65535 ? await listen(p + 1) : null;
    await Promise.all([a, b].map((s) => s && new Promise((done) => s.close(done))));
    if (b) return p;
  }
}
