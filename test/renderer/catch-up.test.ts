import { describe, expect, it } from 'vitest';
import { CatchUp } from '../../renderer/src/host/catch-up.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import type { Snapshot } from '../../host/contract.ts';

const snapshot: Snapshot = { routerUrl: 'http://x', t: 0, workers: [], rows: [], inflight: [], sim: null, traffic: null };
const ev = (n: number): BatonEvent => ({ type: 'first_token', t: n, request_id: 'r', attempt: 0, ttft_ms: n });

function recorder() {
  const log: string[] = [];
  return {
    log,
    handlers: {
      onSnapshot: () => log.push('snapshot'),
      onEvents: (e: BatonEvent[]) => log.push(`events ${e.map((x) => x.t).join(',')}`),
      onStatus: (s: { status: string }) => log.push(`status ${s.status}`),
    },
  };
}

describe('CatchUp', () => {
  it('holds live events until the snapshot lands, then releases them after it', async () => {
    const { log, handlers } = recorder();
    const c = new CatchUp(handlers);
    let resolve!: (s: Snapshot) => void;
    const done = c.begin(() => new Promise((r) => (resolve = r)));
    c.events([ev(1)]);
    c.events([ev(2), ev(3)]);
    expect(log).toEqual([]);
    resolve(snapshot);
    await done;
    c.events([ev(4)]);
    expect(log).toEqual(['snapshot', 'events 1,2,3', 'events 4']);
  });

  it('reports a failed snapshot as a lost connection', async () => {
    const { log, handlers } = recorder();
    await new CatchUp(handlers).begin(() => Promise.reject(new Error('503')));
    expect(log).toEqual(['status lost']);
  });

  it('ignores a stale snapshot when a newer catch-up started', async () => {
    const { log, handlers } = recorder();
    const c = new CatchUp(handlers);
    let resolveOld!: (s: Snapshot) => void;
    const old = c.begin(() => new Promise((r) => (resolveOld = r)));
    const fresh = c.begin(() => Promise.resolve(snapshot));
    await fresh;
    resolveOld(snapshot);
    await old;
    expect(log).toEqual(['snapshot']);
  });

  it('bounds what it holds while waiting', async () => {
    const { log, handlers } = recorder();
    const c = new CatchUp(handlers, 2);
    let resolve!: (s: Snapshot) => void;
    const done = c.begin(() => new Promise((r) => (resolve = r)));
    c.events([ev(1), ev(2), ev(3)]);
    resolve(snapshot);
    await done;
    expect(log).toEqual(['snapshot', 'events 2,3']);
  });
});
