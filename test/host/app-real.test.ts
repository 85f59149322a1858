// The host on the real router and real simulated worker processes: the API drives real faults,
// the static routes hold on the router's own route table, and close() leaves no process behind.
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import type { Snapshot } from '../../host/contract.ts';
import { pidAlive } from '../sim/helpers.ts';

const dist = mkdtempSync(join(tmpdir(), 'baton-dist-'));
mkdirSync(join(dist, 'assets'));
writeFileSync(join(dist, 'index.html'), '<!doctype html><title>Baton</title>');
writeFileSync(join(dist, 'assets', 'app.js'), 'export {}');
writeFileSync(join(tmpdir(), 'baton-outside.txt'), 'outside');

function rawGet(base: string, path: string): Promise<number> {
  return new Promise((done, fail) => {
    const req = request(`${base}${path}`, { path }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? 0));
    });
    req.on('error', fail);
    req.end();
  });
}

let app: AppHandle;
beforeAll(async () => {
  app = await startApp({ port: 0, sim: 2, traffic: true, trafficSettings: { rate: 20, budgetMin: 20, budgetMax: 40 }, simTokenIntervalMs: 5, staticRoot: dist });
});
afterAll(async () => {
  await app?.close();
});

describe('startApp on the real router', () => {
  it('serves the build through the router and refuses traversal', async () => {
    const base = app.router.url;
    expect(await rawGet(base, '/')).toBe(200);
    expect(await rawGet(base, '/assets/app.js')).toBe(200);
    expect(await rawGet(base, '/assets/..%2F..%2Fbaton-outside.txt')).toBe(404);
    expect(await rawGet(base, '/assets/%2e%2e%2fbaton-outside.txt')).toBe(404);
    expect(await rawGet(base, '/../baton-outside.txt')).toBe(404);
  });

  it('generates traffic that the router traces, and snapshots it', async () => {
    await expect.poll(() => app.router.traceRows({ kind: 'request' }).length, { timeout: 30_000 }).toBeGreaterThan(5);
    const snap = (await (await fetch(`${app.router.url}/api/snapshot`)).json()) as Snapshot;
    expect(snap.workers.map((w) => [w.simulated, w.sim_index])).toEqual([[true, 0], [true, 1]]);
    expect(snap.rows.length).toBeGreaterThan(5);
    expect(snap.traffic?.sent).toBeGreaterThan(5);
  });

  it('kills and restarts a simulated worker through the API', async () => {
    const before = app.actions.simWorkers()!;
    const pid = before[0]!.pid!;
    const killed = await fetch(`${app.router.url}/api/sim/0/kill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(((await killed.json()) as { workers: { alive: boolean }[] }).workers[0]!.alive).toBe(false);
    expect(pidAlive(pid)).toBe(false);
    const restarted = await fetch(`${app.router.url}/api/sim/0/restart`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(((await restarted.json()) as { workers: { alive: boolean }[] }).workers[0]!.alive).toBe(true);
  });

  it('stops every worker process on close', async () => {
    const pids = app.actions.simWorkers()!.map((w) => w.pid!);
    expect(pids.every(pidAlive)).toBe(true);
    await app.close();
    await expect.poll(() => pids.some(pidAlive), { timeout: 10_000 }).toBe(false);
  });
});
