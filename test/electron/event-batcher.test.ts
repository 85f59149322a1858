import { afterEach, describe, expect, it, vi } from 'vitest';
import { EventBatcher } from '../../electron/event-batcher.ts';
import type { BatonEvent } from '../../router/events/types.ts';

const progress = (id: string, tokens: number): BatonEvent => ({ type: 'progress', t: tokens, request_id: id, attempt: 0, tokens, completion_tokens: tokens });
const started = (id: string): BatonEvent => ({ type: 'attempt_started', t: 0, request_id: id, attempt: 0, rid: id, worker: 'w', replayed_tokens: 0, budget_before: 10 });
const ended = (id: string): BatonEvent => ({ type: 'request_finished', t: 9, row: { kind: 'request', request_id: id } as never });

function setup(opts = { flushMs: 250, maxBatch: 100, maxPending: 1000 }) {
  const sent: BatonEvent[][] = [];
  let resyncs = 0;
  const b = new EventBatcher((e) => sent.push(e), () => resyncs++, opts);
  return { b, sent, resyncs: () => resyncs };
}

afterEach(() => vi.useRealTimers());

describe('EventBatcher', () => {
  it('sends a few batches per second, not one message per event', () => {
    vi.useFakeTimers();
    const { b, sent } = setup({ flushMs: 250, maxBatch: 5000, maxPending: 50_000 });
    b.start();
    for (let i = 0; i < 500; i++) b.push(started(`r${i}`));
    vi.advanceTimersByTime(1000);
    expect(sent.length).toBeLessThanOrEqual(5);
    expect(sent.flat()).toHaveLength(500);
    b.stop();
  });

  it('coalesces progress to the latest per request, after the request\'s other events', () => {
    const { b, sent } = setup();
    b.push(started('a'));
    for (let i = 1; i <= 50; i++) b.push(progress('a', i));
    b.flush();
    expect(sent).toEqual([[started('a'), progress('a', 50)]]);
  });

  it('never sends a request\'s progress after its end', () => {
    const { b, sent } = setup();
    b.push(progress('a', 3));
    b.push(ended('a'));
    b.flush();
    expect(sent).toEqual([[ended('a')]]);
  });

  it('caps a batch and keeps the rest, in order, for the next flush', () => {
    const { b, sent } = setup({ flushMs: 250, maxBatch: 3, maxPending: 1000 });
    for (let i = 0; i < 7; i++) b.push(started(`r${i}`));
    b.push(progress('r6', 1));
    b.flush();
    b.flush();
    b.flush();
    expect(sent.map((batch) => batch.length)).toEqual([3, 3, 2]);
    expect(sent[2]![1]).toEqual(progress('r6', 1));
  });

  it('gives up on a backlog past the limit and asks for a resync instead of growing', () => {
    const { b, sent, resyncs } = setup({ flushMs: 250, maxBatch: 10, maxPending: 20 });
    for (let i = 0; i < 25; i++) b.push(started(`r${i}`));
    expect(b.pending).toBe(0);
    b.flush();
    expect(resyncs()).toBe(1);
    expect(sent).toEqual([]);
    b.push(started('after'));
    b.flush();
    expect(sent).toEqual([[started('after')]]);
  });
});
