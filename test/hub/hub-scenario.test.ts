// The dashboard hub over real routers (a short version of bench/hub.ts): three
// `baton router` processes on one simulated cluster at 25 requests/s each through one hub, with a
// forced reconnect of every stream midway (replayed from the routers' rings with Last-Event-ID),
// then one router SIGKILLed and restarted on its port.
import { describe, expect, it } from 'vitest';
import { runHubScenario } from '../../bench/hub.ts';

describe('hub over three routers', () => {
  it('loses no event across a forced reconnect, merges every router\'s rows, marks a killed router lost within 2 s and back', async () => {
    const r = await runHubScenario({ routers: 3, rate: 25, seconds: 6, reconnectHoldMs: 1000, killOne: true });
    expect(r.sent).toBe(3 * 25 * 6);
    expect(r.ok).toBe(r.sent);
    expect(r.reconnects).toBeGreaterThanOrEqual(3);
    expect(r.gaps).toBe(0);
    // Every router's own /traces count, router by router, equals what the hub merged of it.
    expect(r.traceRequests.reduce((a, b) => a + b, 0)).toBe(r.sent);
    expect(r.hubRequests).toEqual(r.traceRequests);
    expect(r.lostAfterMs).not.toBeNull();
    expect(r.lostAfterMs!).toBeLessThanOrEqual(2000);
    const back = r.final.routers[0]!;
    expect(back.state).toBe('connected');
    expect(r.final.routers.map((x) => x.label)).toEqual(['r0', 'r1', 'r2']);
  }, 120_000);
});
