// Wires a host's feed into the store: events are batched per animation frame; a snapshot first
// flushes what is queued so that catch-up and live events stay in order.
import { useEffect } from 'react';
import type { BatonEvent } from '../../../router/events/types.ts';
import { FrameBatcher } from '../store/frame-batcher.ts';
import type { DashboardHost } from '../host/types.ts';
import type { DashStore } from '../store/store.ts';

export function useFeed(host: DashboardHost, store: DashStore): void {
  useEffect(() => {
    const batcher = new FrameBatcher<BatonEvent>((events) => store.getState().ingest(events));
    const stop = host.connect({
      onSnapshot(snapshot) {
        batcher.run();
        store.getState().loadSnapshot(snapshot);
      },
      onEvents: (events) => batcher.push(events),
      onStatus: (state) => store.getState().setConnection(state),
    });
    // The clock moves running requests and rates along even when no event arrives.
    const tick = setInterval(() => store.getState().tick(), 1000);
    return () => {
      stop();
      clearInterval(tick);
      batcher.dispose();
    };
  }, [host, store]);

  // Simulated workers' process state (alive, pid) is not in the router's events: poll it.
  useEffect(() => {
    const poll = () => {
      if (store.getState().sim === null) return;
      host.simWorkers().then((sim) => store.getState().setSim(sim), () => {});
    };
    const id = setInterval(poll, 2000);
    return () => clearInterval(id);
  }, [host, store]);
}
