import { describe, expect, it } from 'vitest';
import { InFlightEvents } from '../../host/inflight.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import type { RequestRow } from '../../router/trace/row.ts';

const admitted = (id: string): BatonEvent => ({ type: 'request_admitted', t: 1, request_id: id, admitted: true, reason: null, stream: true, prompt_tokens: 4, max_new_tokens: 10, trace_id: null });
const progress = (id: string, tokens: number): BatonEvent => ({ type: 'progress', t: 2, request_id: id, attempt: 0, tokens, completion_tokens: tokens });
const finished = (id: string): BatonEvent => ({ type: 'request_finished', t: 3, row: { kind: 'request', request_id: id } as RequestRow });

describe('InFlightEvents', () => {
  it('keeps the events of running requests, with progress coalesced to the latest', () => {
    const live = new InFlightEvents();
    live.add(admitted('a'));
    for (let i = 1; i <= 50; i++) live.add(progress('a', i));
    live.add(admitted('b'));
    expect(live.events()).toEqual([admitted('a'), progress('a', 50), admitted('b')]);
  });

  it('forgets a request when it finishes', () => {
    const live = new InFlightEvents();
    live.add(admitted('a'));
    live.add(finished('a'));
    expect(live.size).toBe(0);
    expect(live.events()).toEqual([]);
  });

  it('is bounded in requests and in events per request', () => {
    const live = new InFlightEvents(3, 2);
    for (const id of ['a', 'b', 'c', 'd']) live.add(admitted(id));
    expect(live.size).toBe(3);
    expect(live.events().map((e) => (e as { request_id: string }).request_id)).toEqual(['b', 'c', 'd']);
    live.add({ type: 'first_token', t: 1, request_id: 'd', attempt: 0, ttft_ms: 5 });
    live.add({ type: 'first_token', t: 1, request_id: 'd', attempt: 1, ttft_ms: 5 });
    expect(live.events().filter((e) => (e as { request_id: string }).request_id === 'd')).toHaveLength(2);
  });
});
