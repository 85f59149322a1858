// Worker processes for real: a crash or a kill ends the process and its streams the way a dead
// SGLang worker would; a restart comes back on the same port.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ClusterChange, type SimCluster } from '../../sim/cluster.ts';
import { startControlServer } from '../../sim/control.ts';
import { eventually, getJson, openSse, pidAlive, postJson } from './helpers.ts';

const PROMPT = [3, 1, 4, 1, 5];
const long = { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 20_000, ignore_eos: true } };

let cluster: SimCluster;
const changes: ClusterChange[] = [];

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 5 });
  cluster.onChange((c) => changes.push(c));
}, 120_000);

afterAll(async () => {
  const pids = cluster?.workers().map((w) => w.pid) ?? [];
  await cluster?.stop();
  for (const pid of pids) expect(pidAlive(pid)).toBe(false);
});

describe('sim cluster', () => {
  it('starts separate processes on distinct ports', async () => {
    const ws = cluster.workers();
    expect(ws).toHaveLength(2);
    expect(new Set(ws.map((w) => w.port)).size).toBe(2);
    expect(ws.every((w) => w.alive && pidAlive(w.pid) && w.pid !== process.pid)).toBe(true);
    for (const w of ws) expect((await fetch(`${w.url}/health`)).status).toBe(200);
  });

  it('crash fault: the process exits mid-stream, the client sees the connection end without [DONE]', async () => {
    const before = cluster.workers()[0]!;
    const s = await openSse(`${before.url}/generate`, long);
    await s.waitFrames(3);
    await cluster.fault(0, { kind: 'crash' });
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    await eventually(() => (!pidAlive(before.pid) ? true : undefined), 20_000, 'crashed worker to exit');
    expect(cluster.workers()[0]!.alive).toBe(false);
    expect(changes.some((c) => c.index === 0 && !c.alive && c.pid === before.pid)).toBe(true);
    await expect(fetch(`${before.url}/health`)).rejects.toThrow();

    await cluster.restart(0);
    const after = cluster.workers()[0]!;
    expect(after.port).toBe(before.port);
    expect(after.pid).not.toBe(before.pid);
    expect((await fetch(`${after.url}/health`)).status).toBe(200);
  }, 60_000);

  it('crash after N tokens: the client gets exactly N tokens from the dying process', async () => {
    await cluster.fault(0, { kind: 'crash', afterTokens: 6 });
    const s = await openSse(`${cluster.workers()[0]!.url}/generate`, long);
    const end = await s.ended;
    expect(end.sawDone).toBe(false);
    expect(s.chunks()).toHaveLength(6);
    await eventually(() => (!cluster.workers()[0]!.alive ? true : undefined));
    await cluster.restart(0);
  }, 60_000);

  it('kill (SIGKILL from the manager) breaks open streams; stats and faults reach the worker over HTTP', async () => {
    const w1 = cluster.workers()[1]!;
    const s = await openSse(`${w1.url}/generate`, { ...long, rid: 'seen-by-1' });
    await s.waitFrames(2);
    const stats = await cluster.stats(1);
    expect(stats.rids).toContain('seen-by-1');
    expect(stats.inFlight).toBe(1);
    await cluster.kill(1);
    expect(pidAlive(w1.pid)).toBe(false);
    expect((await s.ended).sawDone).toBe(false);
    await cluster.restart(1);
    await cluster.fault(1, { kind: 'reject' });
    expect((await postJson(`${cluster.workers()[1]!.url}/generate`, { input_ids: PROMPT })).status).toBe(503);
    await cluster.fault(1, { kind: 'clear' });
    expect((await postJson(`${cluster.workers()[1]!.url}/generate`, { input_ids: PROMPT })).status).toBe(200);
  }, 60_000);

  it('control API: lists workers, injects faults, kills and restarts over HTTP', async () => {
    const control = await startControlServer(cluster, 0);
    try {
      const list = await getJson(`${control.url}/workers`);
      expect(list.body).toEqual(cluster.workers());
      expect((await postJson(`${control.url}/workers/1/fault`, { kind: 'reject' })).status).toBe(200);
      expect((await fetch(`${cluster.workers()[1]!.url}/health`)).status).toBe(503);
      expect((await postJson(`${control.url}/workers/1/fault`, { kind: 'clear' })).status).toBe(200);
      const pid = cluster.workers()[1]!.pid;
      const killed = await postJson(`${control.url}/workers/1/kill`, {});
      expect(killed.body).toMatchObject({ index: 1, alive: false });
      expect(pidAlive(pid)).toBe(false);
      const restarted = await postJson(`${control.url}/workers/1/restart`, {});
      expect(restarted.body).toMatchObject({ index: 1, alive: true });
      expect((await getJson(`${control.url}/workers/1/stats`)).body).toMatchObject({ inFlight: 0 });
      expect((await postJson(`${control.url}/workers/1/fault`, { kind: 'melt' })).status).toBe(400);
      expect((await postJson(`${control.url}/workers/7/kill`, {})).status).toBe(400);
    } finally {
      await control.close();
    }
  }, 60_000);
});
