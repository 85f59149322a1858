// Wires a host's feed into the store: events are batched per animation frame; a snapshot first
// flushes what is queued so that catch-up and live events stay in order. A poll of the host a
// few times a second brings the router's own figures (per-worker in flight, circuit, health,
// totals since it started) and the host's fault markers; a different router instance answering
// resets the view and catches up again.
import { useEffect } from 'react';
import type { BatonEvent } from '../../../router/events/types.ts';
import { FrameBatcher } from '../store/frame-batcher.ts';
import type { DashboardHost } from '../host/types.ts';
import type { DashStore } from '../store/store.ts';
import { fmtClock } from './format.ts';

/** How often the page reads the router's figures (a few hundred bytes over loopback or IPC). */
export const LIVE_POLL_MS = 250;

export function useFeed(host: DashboardHost, store: DashStore): void {
  useEffect(() => {
    const batcher = new FrameBatcher<BatonEvent>((events) => store.getState().ingest(events));
    const stop = host.connect({
      onSnapshot(snapshot) {
        batcher.run();
        store.getState().loadSnapshot(snapshot, host.kind === 'file' ? snapshot.t : Date.now());
      },
      onEvents: (events) => batcher.push(events),
      onStatus: (state) => {
        // Events of the old connection still queued must not land after the picture froze.
        if (state.status === 'lost') batcher.run();
        store.getState().setConnection(state);
      },
    });
    // The clock moves running requests and rates along even when no event arrives.
    const tick = setInterval(() => store.getState().tick(), 1000);
    return () => {
      stop();
      clearInterval(tick);
      batcher.dispose();
    };
  }, [host, store]);

  useEffect(() => {
    if (host.kind === 'file') return;
    let stopped = false;
    let busy = false;
    const poll = async () => {
      if (busy) return;
      busy = true;
      try {
        const live = await host.live();
        if (stopped || !live) return;
        if (!store.getState().applyLive(live)) {
          const was = store.getState().router;
          const at = live.router ? fmtClock(live.router.started_at).slice(0, 8) : '?';
          store.getState().reset(`Another router answered (instance ${live.router?.instance.slice(0, 8)}, started ${at}; was ${was?.instance.slice(0, 8)}): the view was reset.`);
          host.retry();
        }
      } catch {
        // The feed's own status says when the host is gone; a missed poll changes nothing.
      } finally {
        busy = false;
      }
    };
    void poll();
    const id = setInterval(() => void poll(), LIVE_POLL_MS);
    return () => {
      stopped = true;
      clearInterval(id);
    };
  }, [host, store]);
}
