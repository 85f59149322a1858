// Smaller dashboard problems, each held: sparklines do not spike when a page opens on
// running requests; a dead worker's circuit does not read half-open; the "another router" notice
// gives a 24-hour time; preferences go to the host as well as to localStorage.
import { describe, expect, it } from 'vitest';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { circuitText } from '../../renderer/src/views/WorkerCard.tsx';
import { applyHostPrefs, hostBackedStorage } from '../../renderer/src/store/prefs-sync.ts';
import type { RouterStats } from '../../router/events/types.ts';
import type { BatonEvent } from '../../router/events/types.ts';

const T0 = 1_796_000_000_000;

describe('smaller dashboard fixes', () => {
  it('a page opening on a request that ran 10 s charts its tokens over those 10 s, not in the second it opened', () => {
    const store = createDashStore();
    const W = 'http://127.0.0.1:9';
    // What a snapshot carries of a running request: its events, progress coalesced to the latest.
    const inflight: BatonEvent[] = [
      { type: 'request_admitted', t: T0, request_id: 'r', admitted: true, reason: null, stream: true, prompt_tokens: 8, max_new_tokens: 1000, trace_id: null },
      { type: 'attempt_started', t: T0, request_id: 'r', attempt: 0, rid: 'r~m0', worker: W, replayed_tokens: 0, budget_before: 1000 },
      { type: 'progress', t: T0 + 10_000, request_id: 'r', attempt: 0, tokens: 500, completion_tokens: 500 },
    ];
    store.getState().loadSnapshot({ routerUrl: 'http://r', t: T0 + 10_000, workers: [], rows: [], inflight, sim: null, traffic: null }, T0 + 10_000);
    const spark = store.getState().model.series.workerSparkline(T0 + 11_000, W, 20);
    expect(spark.reduce((a, b) => a + b, 0)).toBeCloseTo(500, 6);
    expect(Math.max(...spark)).toBeLessThanOrEqual(51);
  });

  it('a dead, unhealthy or killed worker\'s circuit reads down, with its breaker state in the title', () => {
    expect(circuitText({ circuit: 'half_open', health: 'dead' }, false).text).toBe('down (dead)');
    expect(circuitText({ circuit: 'half_open', health: 'dead' }, false).title).toContain('half-open');
    expect(circuitText({ circuit: 'closed', health: 'healthy' }, true).text).toBe('down (killed)');
    expect(circuitText({ circuit: 'half_open', health: 'healthy' }, false).text).toBe('half-open');
    expect(circuitText({ circuit: 'open', health: 'circuit_open' }, false).text).toBe('open');
  });

  it('the "another router answered" notice gives its start as a 24-hour time', () => {
    const started = new Date(2026, 11, 2, 15, 4, 5).getTime();
    const stats = (instance: string): RouterStats => ({ instance, started_at: started, t: started, workers: [], totals: { requests: 0, finished: 0, failed: 0, cancelled: 0, migrations: 0, attempts_started: 0, tokens: 0, in_flight: 0 } });
    const store = createDashStore();
    const snap = (instance: string) => ({ routerUrl: 'http://r', t: started, workers: [], rows: [], inflight: [], sim: null, traffic: null, router: stats(instance) });
    store.getState().loadSnapshot(snap('aaaaaaaa-1'), started);
    store.getState().loadSnapshot(snap('bbbbbbbb-2'), started);
    expect(store.getState().notice).toContain('started 15:04:05');
    expect(store.getState().notice).not.toMatch(/[AP]M/);
  });

  it('preferences are mirrored to the host, and the host\'s copy applies on a page with none', async () => {
    const saved: Record<string, unknown>[] = [];
    const local = new Map<string, string>();
    const storage = hostBackedStorage({ getItem: (k) => local.get(k) ?? null, setItem: (k, v) => void local.set(k, v) }, { savePrefs: async (p) => void saved.push(p) });
    const a = createDashStore({ storage });
    a.getState().setChartWindow(2);
    a.getState().setTheme('dark');
    expect(saved.at(-1)).toEqual({ chartWindow: 2, theme: 'dark' });
    // Another port: empty localStorage; the host's copy is applied.
    const b = createDashStore({ storage: null });
    applyHostPrefs(b, { ...saved.at(-1), requestWindow: 60_000 });
    expect([b.getState().chartWindow, b.getState().theme, b.getState().requestWindow]).toEqual([2, 'dark', 60_000]);
    // What is not a valid choice is left alone.
    applyHostPrefs(b, { chartWindow: 99, theme: 'neon', requestWindow: 7 });
    expect([b.getState().chartWindow, b.getState().theme, b.getState().requestWindow]).toEqual([2, 'dark', 60_000]);
  });
});
