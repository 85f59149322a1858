// The store keeps up with the load the dashboard must stay smooth under: 1,000 requests in
// flight and 500 events/s, batched a few times per second.
import { describe, expect, it } from 'vitest';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { visibleIds, NO_FILTERS } from '../../renderer/src/store/filters.ts';
import type { BatonEvent } from '../../router/events/types.ts';

describe('store under load', () => {
  it('applies 10 s of 500 events/s over 1,000 in-flight requests in well under a frame per batch', () => {
    const store = createDashStore();
    const t0 = 1_000_000;
    const start: BatonEvent[] = [];
    for (let i = 0; i < 1000; i++) {
      start.push({ type: 'request_admitted', t: t0, request_id: `r${i}`, admitted: true, reason: null, stream: true, prompt_tokens: 32, max_new_tokens: 512, trace_id: null });
      start.push({ type: 'attempt_started', t: t0, request_id: `r${i}`, attempt: 0, rid: `r${i}`, worker: `http://w${i % 3}`, replayed_tokens: 0, budget_before: 512 });
    }
    store.getState().ingest(start, t0);
    const batches = 100; // 10 s at 10 batches/s
    const perBatch = 50; // 500 events/s
    const began = performance.now();
    const took: number[] = [];
    for (let b = 0; b < batches; b++) {
      const t = t0 + b * 100;
      const events: BatonEvent[] = [];
      for (let k = 0; k < perBatch; k++) {
        const i = (b * perBatch + k) % 1000;
        events.push({ type: 'progress', t, request_id: `r${i}`, attempt: 0, tokens: b + 1, completion_tokens: b + 1 });
      }
      const s = performance.now();
      store.getState().ingest(events, t);
      const state = store.getState();
      visibleIds(state.model.book.ids(), (id) => state.model.book.get(id), NO_FILTERS);
      took.push(performance.now() - s);
    }
    const total = performance.now() - began;
    expect(store.getState().model.book.running).toBe(1000);
    // Generous bounds for shared CI machines; typical numbers are a few ms per batch. The 90th
    // percentile, not the slowest: on a loaded 2-core box one batch can lose the CPU for 100 ms.
    took.sort((a, b) => a - b);
    expect(took[Math.floor(batches * 0.9)]!).toBeLessThan(50);
    expect(total / batches).toBeLessThan(25);
  });
});
