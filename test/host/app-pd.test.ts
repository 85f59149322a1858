// `npm start -- --sim-pd` / `baton serve --sim-pd`: the host on the real router in P/D mode with
// 2 prefill + 2 decode simulated workers (real processes) and traffic. Every answer is served by a
// pair (a decode worker and a prefill leg, a room each); a decode worker killed through the API
// breaks its streams, which go on on a new pair with a new room; no room is seen twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';

let app: AppHandle;
beforeAll(async () => {
  app = await startApp({ port: 0, simFormat: 'pd', traffic: true, trafficSettings: { rate: 20, budgetMin: 60, budgetMax: 120, nonMigratableShare: 0 }, simTokenIntervalMs: 10, staticRoot: null });
}, 90_000);
afterAll(async () => {
  await app?.close();
});

const attempts = () => app.router.traceRows({ kind: 'attempt' }) as AttemptRow[];

describe('a simulated P/D cluster', () => {
  it('has 2 prefill and 2 decode workers, probed as such by the router', async () => {
    await expect.poll(() => app.router.workers().map((w) => (w as { pd_role?: string }).pd_role).sort().join(','), { timeout: 30_000 }).toBe('decode,decode,prefill,prefill');
    expect(app.actions.simWorkers()!.length).toBe(4);
  });

  it('serves traffic through pairs; a killed decode worker\'s requests continue on a new pair with a new room', async () => {
    await expect.poll(() => attempts().filter((a) => a.prefill_worker && a.outcome === 'finished').length, { timeout: 30_000 }).toBeGreaterThan(5);
    const roleOf = new Map(app.router.workers().map((w) => [w.url, (w as { pd_role?: string }).pd_role]));
    for (const a of attempts()) {
      expect(roleOf.get(a.worker), `${a.request_id} on ${a.worker}`).toBe('decode');
      expect(roleOf.get(a.prefill_worker!)).toBe('prefill');
    }
    const sims = app.actions.simWorkers()!;
    const decode = sims.find((s) => roleOf.get(s.url) === 'decode')!;
    // Kill it while it streams: wait for an attempt in flight on it.
    const killedAt = Date.now();
    await fetch(`${app.router.url}/api/sim/${decode.index}/kill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    await expect
      .poll(() => (app.router.traceRows({ kind: 'request' }) as RequestRow[]).some((r) => r.migrations > 0 && r.outcome === 'finished' && r.ended_at > killedAt), { timeout: 30_000 })
      .toBe(true);
    const migrated = (app.router.traceRows({ kind: 'request' }) as RequestRow[]).filter((r) => r.migrations > 0 && r.outcome === 'finished' && r.ended_at > killedAt);
    // Some of them were cut on the killed decode worker, the decode leg blamed.
    expect(migrated.some((r) => attempts().some((a) => a.request_id === r.request_id && a.worker === decode.url && a.failed_leg === 'decode'))).toBe(true);
    for (const r of migrated) {
      const rows = attempts().filter((a) => a.request_id === r.request_id);
      const rooms = rows.map((a) => a.bootstrap_room);
      expect(new Set(rooms).size, `${r.request_id} rooms ${rooms.join(',')}`).toBe(rooms.length);
      expect(rows.at(-1)!.worker).not.toBe(decode.url);
    }
    // No room was issued twice over the whole run.
    const all = attempts().map((a) => a.bootstrap_room).filter(Boolean);
    expect(new Set(all).size).toBe(all.length);
  }, 90_000);
});
