// `baton router --replicas N` (router/replicas/): real processes. A primary and two replicas on
// one port; GET /replicas (the hub's contract); each replica's own url; rids distinct across
// replicas; /metrics on the shared port equal to the sum of the replicas' own; a SIGKILLed
// replica restarted under a new epoch while the other keeps serving; SIGTERM stops them all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startRouter } from '../../router/index.ts';
import { ridReplica } from '../../router/migration/rid.ts';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../router/config.ts';
import { reusePortSupported } from '../../router/replicas/primary.ts';
import { spawnRouter, traceRows, waitUntil, type RouterProc } from './harness/procs.ts';
import { parsePrometheusText, total, histogramCount } from '../observability/prom-text.ts';

interface Entry { id: string; index: number; epoch: number; pid: number; url: string; started_at: number; state: string }

let cluster: SimCluster;
let router: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 2 });
  // Each replica loads the sources through tsx: on a loaded 2-core machine two took ~30 s.
  router = await spawnRouter(['--replicas', '2', '--health-interval-ms', '200', ...cluster.workers().flatMap((w) => ['--worker', w.url])], 100_000);
}, 120_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

async function replicas(url: string): Promise<Entry[]> {
  const res = await fetch(`${url}/replicas`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { replicas: Entry[] }).replicas;
}

/** A unary /generate on a connection of its own, so that node:cluster hands each to the next replica. */
function generate(url: string, id: string): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ rid: id, input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 4, ignore_eos: true } });
  return new Promise((resolve, reject) => {
    const req = request(`${url}/generate`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    // A request that neither ends nor fails hangs: that is the failure this guards against.
    req.setTimeout(20_000, () => req.destroy(new Error('hung: no answer within 20 s')));
    req.end(body);
  });
}

async function metrics(url: string) {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  return parsePrometheusText(await res.text());
}

describe('router replicas', () => {
  it('lists its replicas, each with its own url serving that replica alone; rids carry the replica; /metrics sums them', async () => {
    const list = await replicas(router.url);
    expect(list.map((r) => [r.index, r.epoch, r.state])).toEqual([[0, 0, 'up'], [1, 0, 'up']]);
    expect(new Set(list.map((r) => r.id)).size).toBe(2);
    for (const r of list) {
      expect(r.id).toMatch(/^[0-9a-f]{4}$/);
      expect(r.url).not.toBe(router.url);
      expect(r.pid).toBeGreaterThan(0);
      expect(r.started_at).toBeGreaterThan(Date.now() - 300_000);
      // Whichever replica answers, the primary's list.
      expect(await replicas(r.url)).toEqual(list);
    }

    // 12 on the shared port (the kernel picks the replica), and 2 on each replica's own url, so
    // that both serve some whatever the kernel picked.
    const answers = await Promise.all([
      ...Array.from({ length: 12 }, (_, i) => generate(router.url, `rep-${i}`)),
      ...list.flatMap((r) => [generate(r.url, `own-${r.index}-a`), generate(r.url, `own-${r.index}-b`)]),
    ]);
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));

    // Each replica's own /traces holds the requests it served; their rids carry its id and epoch.
    const served = new Map<string, string[]>();
    for (const r of list) {
      const rows = await traceRows(r.url, 'kind=attempt');
      served.set(r.id, rows.map((row) => row.rid as string));
      for (const row of rows) expect(ridReplica(row.rid as string)).toEqual({ replica: r.id, epoch: 0 });
    }
    const rids = [...served.values()].flat();
    expect(rids).toHaveLength(16);
    expect(new Set(rids).size).toBe(16);
    for (const r of list) expect(served.get(r.id)!.length).toBeGreaterThanOrEqual(2);

    const shared = await metrics(router.url);
    const own = await Promise.all(list.map((r) => metrics(r.url)));
    for (const name of ['baton_requests_total', 'baton_attempts_total', 'baton_tokens_streamed_total', 'baton_attempts_started_total']) {
      expect(total(shared, name)).toBe(own.reduce((n, m) => n + total(m, name), 0));
    }
    expect(total(shared, 'baton_requests_total', { outcome: 'finished', format: 'sglang' })).toBe(16);
    expect(histogramCount(shared, 'baton_time_to_first_token_seconds')).toBe(own.reduce((n, m) => n + histogramCount(m, 'baton_time_to_first_token_seconds'), 0));
    // A worker's health is what one replica sees: one series per replica, not a sum.
    const healthy = shared.get('baton_worker_healthy')!.samples;
    expect(new Set(healthy.map((s) => s.labels.replica))).toEqual(new Set(list.map((r) => r.id)));
    expect(healthy.every((s) => s.value === 1)).toBe(true);
    // A replica's own /metrics has no replica label (it is the one replica there).
    expect(own[0]!.get('baton_worker_healthy')!.samples.every((s) => s.labels.replica === undefined)).toBe(true);
  }, 60_000);

  it('restarts a SIGKILLed replica under a new epoch while the other keeps serving', async () => {
    const before = await replicas(router.url);
    const victim = before[0]!;
    process.kill(victim.pid, 'SIGKILL');
    // The shared port answers meanwhile, or refuses at once: under node:cluster the other replica
    // accepts what the dead one had not; with SO_REUSEPORT a connection the kernel had queued on
    // the dead process's socket is reset. Never a hang.
    // (Under SO_REUSEPORT the kernel hashes each new connection to a socket: all four may land on
    // the dying one, so which of the two answers these get is chance, not a property.)
    const during = await Promise.all(Array.from({ length: 4 }, (_, i) => generate(router.url, `during-${i}`).then((a) => a.status, (e: NodeJS.ErrnoException) => e.code ?? e.message)));
    for (const d of during) expect([200, 'ECONNRESET']).toContain(d);
    // Once the dead process is gone, its socket left the port with it: every connection is answered
    // (by the other replica, or by the victim's successor if it is already back).
    await waitUntil(async () => { try { process.kill(victim.pid, 0); return false; } catch { return true; } }, 10_000, 'the victim reaped');
    const meanwhile = await Promise.all(Array.from({ length: 4 }, (_, i) => generate(router.url, `meanwhile-${i}`).then((a) => a.status)));
    expect(meanwhile).toEqual([200, 200, 200, 200]);
    let after: Entry[] = [];
    await waitUntil(async () => {
      after = await replicas(before[1]!.url);
      return after[0]!.state === 'up' && after[0]!.epoch === 1;
    }, 60_000, 'replica 0 back with epoch 1');
    expect(after[0]).toMatchObject({ id: victim.id, index: 0, epoch: 1, state: 'up' });
    expect(after[0]!.pid).not.toBe(victim.pid);
    expect(after[1]).toEqual(before[1]);
    expect(router.output.join('\n')).toMatch(/replica 0 \(id [0-9a-f]{4}, pid \d+\) exited \(signal SIGKILL\); restarting in \d+ ms/);
    // The new process serves on its own url, and its rids carry the new epoch.
    await generate(after[0]!.url, 'after-restart');
    const rows = await traceRows(after[0]!.url, 'kind=attempt');
    // (The successor may also have answered some of the requests above.)
    expect(rows.length).toBeGreaterThanOrEqual(1);
    for (const r of rows) expect(ridReplica(r.rid as string)).toEqual({ replica: victim.id, epoch: 1 });
  }, 100_000);

  it('stops every replica on SIGTERM and exits 0', async () => {
    const list = await replicas(router.url);
    const exited = new Promise<number | null>((resolve) => router.proc.once('exit', (code) => resolve(code)));
    router.proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    for (const r of list) expect(() => process.kill(r.pid, 0)).toThrow();
  }, 60_000);
});

describe('a lone router', () => {
  it('answers GET /replicas with itself, and its stats name it', async () => {
    const r = await startRouter({ port: 0 });
    try {
      const list = await replicas(r.url);
      expect(list).toEqual([{ id: expect.stringMatching(/^[0-9a-f]{4}$/), index: 0, epoch: 0, pid: process.pid, url: r.url, started_at: expect.any(Number), state: 'up' }]);
      expect((await r.stats!()).replica).toEqual({ id: list[0]!.id, index: 0, epoch: 0 });
    } finally {
      await r.close();
    }
  });
});

describe('replica settings', () => {
  it('refuse what cannot run, with the setting named', () => {
    expect(loadConfig({ flags: { replicas: '3' } }).replicas).toBe(3);
    expect(loadConfig({ env: { BATON_REPLICAS: '2' } }).replicas).toBe(2);
    expect(() => loadConfig({ flags: { replicas: '0' } })).toThrow(/replicas must be from 1 to 64, or auto, got "0"/);
    expect(() => loadConfig({ flags: { replicas: 'Auto' } })).toThrow(/replicas must be from 1 to 64, or auto, got "Auto"/);
    expect(() => loadConfig({ flags: { replicas: '65' } })).toThrow(/replicas must be from 1 to 64/);
    expect(() => loadConfig({ flags: { replicas: '2', replicaAdminPortBase: '65535' } })).toThrow(/replica-admin-port-base 65535 \+ 2 replicas passes port 65535/);
  });

  it('auto: one per core the process may use, at most 64, from a flag, the environment or the file', () => {
    // No cgroup files under this root: no CPU limit, one per core of the affinity mask (a limit:
    // test/router/cores.test.ts).
    const dir = mkdtempSync(join(tmpdir(), 'baton-replicas-'));
    const env = { BATON_CGROUP_ROOT: dir };
    const auto = Math.min(64, availableParallelism());
    try {
      expect(loadConfig({ flags: { replicas: 'auto' }, env }).replicas).toBe(auto);
      expect(loadConfig({ env: { ...env, BATON_REPLICAS: 'auto' } }).replicas).toBe(auto);
      writeFileSync(join(dir, 'r.yaml'), 'replicas: auto\n');
      expect(loadConfig({ file: join(dir, 'r.yaml'), env }).replicas).toBe(auto);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('use SO_REUSEPORT exactly where net.Server.listen takes reusePort (Node 22.12+, 23.1+)', () => {
    expect(['20.19.0', '22.11.0', '22.12.0', '23.0.0', '23.1.0', '24.0.0'].map((v) => reusePortSupported(v))).toEqual([false, false, true, false, true, true]);
  });

  it('a port in use fails the start with a clear error', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const err = await spawnRouter(['--replicas', '2', '--port', String(port)], 100_000).then(() => null, (e: Error) => e.message);
      expect(err).toMatch(new RegExp(`exited with 2: .*port ${port} on 127.0.0.1 is already in use`, 's'));
    } finally {
      blocker.close();
    }
  }, 120_000);
});
