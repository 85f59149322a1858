import { describe, expect, it } from 'vitest';
import { RequestBook } from '../../renderer/src/store/request-book.ts';
import { migrationCount } from '../../renderer/src/store/request-view.ts';
import { requestEvents } from './scenario.ts';

describe('RequestBook', () => {
  it('builds a migrated request: attempts on two workers, their tokens adding up', () => {
    const book = new RequestBook();
    book.applyBatch(requestEvents('r1', 1000, 20, [{ worker: 'w0', tokens: 7, fails: true }, { worker: 'w1', tokens: 13 }]));
    const r = book.get('r1')!;
    expect(r.status).toBe('finished');
    expect(r.attempts.map((a) => [a.worker, a.replayed, a.tokens, a.budgetBefore, a.budgetAfter, a.outcome])).toEqual([
      ['w0', 0, 7, 20, 13, 'failed'],
      ['w1', 7, 13, 13, 0, 'finished'],
    ]);
    expect(r.migrations).toEqual([expect.objectContaining({ fromWorker: 'w0', toWorker: 'w1', atToken: 7, errorKind: 'stream_broken' })]);
    expect(migrationCount(r)).toBe(1);
    expect(r.completionTokens).toBe(20);
    expect(r.attempts.reduce((n, a) => n + a.tokens, 0)).toBe(r.completionTokens);
    expect(r.summary?.migrations).toBe(1);
    expect(book.running).toBe(0);
  });

  it('shows a request in flight as it progresses, with token deltas per worker', () => {
    const book = new RequestBook();
    const events = requestEvents('r1', 0, 50, [{ worker: 'w2', tokens: 5 }], { finish: false });
    const effects = book.applyBatch(events);
    const r = book.get('r1')!;
    expect(r.status).toBe('running');
    expect(r.attempts[0]).toMatchObject({ worker: 'w2', tokens: 5, outcome: 'running', ttftMs: 5 });
    expect(r.completionTokens).toBe(5);
    // Each delta spread from when the page last saw the attempt grow (its first token at 5).
    expect(effects.filter((e) => e.tokens).map((e) => e.tokens)).toEqual([5, 6, 7, 8, 9].map((since) => ({ worker: 'w2', delta: 1, since })));
    expect(effects.filter((e) => e.ttftMs !== undefined)).toHaveLength(1);
    expect(book.running).toBe(1);
  });

  it('records the admission decision and its reason', () => {
    const book = new RequestBook();
    book.applyBatch(requestEvents('r1', 0, 10, [{ worker: 'w0', tokens: 10 }], { admitted: false, reason: 'sampling_seed' }));
    expect(book.get('r1')).toMatchObject({ admitted: false, admissionReason: 'sampling_seed' });
  });

  it('is idempotent for repeated events (a snapshot overlapping the live stream)', () => {
    const events = requestEvents('r1', 0, 20, [{ worker: 'w0', tokens: 7, fails: true }, { worker: 'w1', tokens: 13 }]);
    const book = new RequestBook();
    const first = book.applyBatch(events);
    const again = book.applyBatch(events);
    expect(first.filter((e) => e.finished)).toHaveLength(1);
    expect(first.filter((e) => e.migrated)).toHaveLength(1);
    expect(again.some((e) => e.finished || e.migrated || e.tokens || e.started)).toBe(false);
    expect(book.get('r1')!.attempts).toHaveLength(2);
    expect(book.size).toBe(1);
  });

  it('copies a changed request once per batch and leaves unchanged ones alone', () => {
    const book = new RequestBook();
    book.applyBatch(requestEvents('a', 0, 10, [{ worker: 'w0', tokens: 2 }], { finish: false }));
    book.applyBatch(requestEvents('b', 0, 10, [{ worker: 'w0', tokens: 2 }], { finish: false }));
    const a = book.get('a');
    const b = book.get('b');
    book.applyBatch([{ type: 'progress', t: 9, request_id: 'b', attempt: 0, tokens: 3, completion_tokens: 3 }]);
    expect(book.get('a')).toBe(a);
    expect(book.get('b')).not.toBe(b);
    expect(b!.attempts[0]!.tokens).toBe(2); // the old object is not mutated
  });

  it('keeps at most maxFinished finished requests, dropping the oldest, and never a running one', () => {
    const book = new RequestBook({ maxFinished: 5, maxTotal: 100 });
    book.applyBatch(requestEvents('live', 0, 10, [{ worker: 'w0', tokens: 1 }], { finish: false }));
    for (let i = 0; i < 20; i++) book.applyBatch(requestEvents(`r${i}`, i, 4, [{ worker: 'w0', tokens: 4 }]));
    expect(book.size).toBe(6);
    expect(book.ids()).toEqual(['live', 'r15', 'r16', 'r17', 'r18', 'r19']);
    expect(book.running).toBe(1);
  });

  it('caps the total, so requests whose end never arrives do not pile up', () => {
    const book = new RequestBook({ maxFinished: 10, maxTotal: 3 });
    for (let i = 0; i < 8; i++) book.applyBatch(requestEvents(`r${i}`, i, 4, [{ worker: 'w0', tokens: 1 }], { finish: false }));
    expect(book.ids()).toEqual(['r5', 'r6', 'r7']);
    expect(book.running).toBe(3);
  });
});
