// Requests stay inspectable after the traffic that followed them: the page keeps migrated and
// failed requests (and their trace rows) longer than ordinary ones, counts what it let go, and
// rebuilds a request's detail from its rows alone once it has left the list.
import { describe, expect, it } from 'vitest';
import { RequestBook } from '../../renderer/src/store/request-book.ts';
import { TraceRing, isNotableRow } from '../../renderer/src/store/trace-ring.ts';
import { rebuildRequest } from '../../renderer/src/store/rebuild.ts';
import { createDashStore } from '../../renderer/src/store/store.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const rowsOf = (events: BatonEvent[]): TraceRow[] => events.flatMap((e) => (e.type === 'attempt_ended' || e.type === 'request_finished' ? [e.row] : []));

describe('RequestBook quotas', () => {
  it('keeps migrated and failed requests beyond the ordinary quota, dropping the oldest of each', () => {
    const book = new RequestBook({ maxFinished: 3, maxNotable: 2, maxTotal: 100 });
    book.applyBatch(requestEvents('moved-0', 0, 10, [{ worker: 'w0', tokens: 4, fails: true }, { worker: 'w1', tokens: 6 }]));
    book.applyBatch(requestEvents('moved-1', 1, 10, [{ worker: 'w0', tokens: 4, fails: true }, { worker: 'w1', tokens: 6 }]));
    for (let i = 0; i < 10; i++) book.applyBatch(requestEvents(`ok-${i}`, 10 + i, 4, [{ worker: 'w0', tokens: 4 }]));
    // Ten ordinary requests later, both migrated ones are still there; only 3 ordinary ones are.
    expect(book.ids()).toEqual(['moved-0', 'moved-1', 'ok-7', 'ok-8', 'ok-9']);
    expect(book.dropped).toEqual({ ordinary: 7, notable: 0 });
    book.applyBatch(requestEvents('failed-2', 30, 10, [{ worker: 'w2', tokens: 1, fails: true }]));
    expect(book.ids()).toEqual(['moved-1', 'ok-7', 'ok-8', 'ok-9', 'failed-2']);
    expect(book.dropped).toEqual({ ordinary: 7, notable: 1 });
  });

  it('without a notable quota, treats every finished request alike (the old rule)', () => {
    const book = new RequestBook({ maxFinished: 2, maxTotal: 100 });
    book.applyBatch(requestEvents('moved', 0, 10, [{ worker: 'w0', tokens: 4, fails: true }, { worker: 'w1', tokens: 6 }]));
    for (let i = 0; i < 3; i++) book.applyBatch(requestEvents(`ok-${i}`, 10 + i, 4, [{ worker: 'w0', tokens: 4 }]));
    expect(book.ids()).toEqual(['ok-1', 'ok-2']);
  });

  it('marks requests whose end it will never hear of as lost, and lets a late end win', () => {
    const book = new RequestBook();
    const events = requestEvents('r', 0, 10, [{ worker: 'w0', tokens: 3 }]);
    book.applyBatch(events.filter((e) => e.type !== 'request_finished' && e.type !== 'attempt_ended'));
    expect(book.markLost(['r', 'unknown'])).toBe(1);
    expect(book.get('r')!.status).toBe('lost');
    expect(book.running).toBe(0);
    book.applyBatch(events);
    expect(book.get('r')!.status).toBe('finished');
    expect(book.running).toBe(0);
  });
});

describe('TraceRing quotas', () => {
  it('keeps the rows of migrated and failed requests past the ordinary quota, and indexes rows by request', () => {
    const ring = new TraceRing(20, 10);
    const moved = rowsOf(requestEvents('moved', 0, 10, [{ worker: 'w0', tokens: 4, fails: true }, { worker: 'w1', tokens: 6 }]));
    ring.add(moved);
    for (let i = 0; i < 40; i++) ring.add(rowsOf(requestEvents(`ok-${i}`, 10 + i, 4, [{ worker: 'w0', tokens: 4 }])));
    expect(ring.ofRequest('moved').map((r) => (r.kind === 'attempt' ? `a${r.attempt}` : 'req'))).toEqual(['a0', 'a1', 'req']);
    expect(ring.ofRequest('ok-0')).toEqual([]);
    expect(ring.size).toBeLessThanOrEqual(20 * 1.1 + 3);
    expect(ring.dropped).toBeGreaterThan(0);
    // Oldest first, as they came.
    const all = ring.all();
    expect(all[0]!.request_id).toBe('moved');
  });

  it('drops notable rows too once their own quota is spent, whole requests first', () => {
    const ring = new TraceRing(5, 6);
    for (let i = 0; i < 6; i++) ring.add(rowsOf(requestEvents(`m${i}`, i, 10, [{ worker: 'w0', tokens: 1, fails: true }, { worker: 'w1', tokens: 1 }])));
    expect(ring.ofRequest('m0')).toEqual([]);
    expect(ring.ofRequest('m5')).toHaveLength(3);
  });

  it('calls a row notable when its request migrated or something failed', () => {
    const [a0, a1, req] = rowsOf(requestEvents('x', 0, 10, [{ worker: 'w0', tokens: 1, fails: true }, { worker: 'w1', tokens: 1 }]));
    expect([a0, a1, req].map((r) => isNotableRow(r!))).toEqual([true, true, true]);
    const plain = rowsOf(requestEvents('y', 0, 10, [{ worker: 'w0', tokens: 1 }]));
    expect(plain.map(isNotableRow)).toEqual([false, false]);
  });
});

describe('rebuildRequest', () => {
  it('gives the same attempts, tokens and migrations from rows as the live events did', () => {
    const events = requestEvents('r', 1000, 50, [{ worker: 'http://a', tokens: 7, fails: true }, { worker: 'http://b', tokens: 13 }]);
    const book = new RequestBook();
    book.applyBatch(events);
    const live = book.get('r')!;
    const rebuilt = rebuildRequest('r', [...rowsOf(events)].reverse())!;
    const shape = (v: typeof live) => ({
      status: v.status, completion: v.completionTokens, budget: v.maxNewTokens, migrations: v.migrations.map((m) => [m.fromWorker, m.toWorker, m.atToken]),
      attempts: v.attempts.map((a) => [a.attempt, a.worker, a.tokens, a.replayed, a.outcome, a.errorKind]),
    });
    expect(shape(rebuilt)).toEqual(shape(live));
    expect(rebuildRequest('other', rowsOf(events))).toBeNull();
  });

  it('carries the wire format and the trace id the rows name, and reads rows of older routers without them', () => {
    const rows = rowsOf(requestEvents('r', 0, 5, [{ worker: 'http://a', tokens: 5 }])).map((row) => ({ ...row, format: 'vllm', trace_id: 'abc123' }) as TraceRow);
    expect(rebuildRequest('r', rows)).toMatchObject({ format: 'vllm', traceId: 'abc123' });
    const old = rowsOf(requestEvents('r', 0, 5, [{ worker: 'http://a', tokens: 5 }])).map((row) => {
      const { format: _f, trace_id: _t, ...rest } = row as TraceRow & { format?: string; trace_id?: string | null };
      return rest as TraceRow;
    });
    expect(rebuildRequest('r', old)).toMatchObject({ format: null, traceId: null, completionTokens: 5 });
  });

  it('is what the store offers once a request has left the list but its rows are held', () => {
    const store = createDashStore({ limits: { maxFinished: 1, maxNotable: 0, maxTotal: 10 } });
    store.getState().ingest(requestEvents('moved', 0, 10, [{ worker: 'w0', tokens: 4, fails: true }, { worker: 'w1', tokens: 6 }]));
    store.getState().ingest(requestEvents('later', 100, 10, [{ worker: 'w0', tokens: 4 }]));
    const { book, traces } = store.getState().model;
    expect(book.get('moved')).toBeUndefined();
    const r = rebuildRequest('moved', traces.ofRequest('moved'))!;
    expect(r.attempts.map((a) => a.tokens)).toEqual([4, 6]);
  });
});
