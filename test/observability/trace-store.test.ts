// The trace ring: bounded, oldest first, filtered; and an export that reads while new rows
// arrive (a slow client) sees the rows present when it began, in order, each at most once,
// skipping only the ones pushed out of the ring meanwhile — never a newer row out of order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TraceStore, matches } from '../../router/trace/store.ts';
import { startRouter } from '../../router/index.ts';
import { startWorker } from '../../sim/worker.ts';
import { generate, parseJsonl, fetchText } from './harness.ts';
import type { AttemptRow, RequestRow, TraceRow } from '../../router/trace/row.ts';
import type { TraceFilter } from '../../router/api.ts';

const row = (seq: number): RequestRow => ({
  kind: 'request', format: 'sglang', request_id: String(seq), attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 1,
  completion_tokens: 1, cached_tokens: null, finish_reason: 'length', outcome: 'finished', duration_ms: 1, started_at: seq, ended_at: seq,
  stream: false, max_new_tokens: 1, error: null, trace_id: null,
});

const attemptOf = (id: string, attempt: number, seq: number): AttemptRow => ({
  kind: 'attempt', format: 'sglang', request_id: id, attempt, rid: `${id}~m${attempt}~0000000000000000`, worker: 'w', started_at: seq, ended_at: seq, ttft_ms: null,
  prompt_tokens_sent: 1, replayed_tokens: 0, tokens: 1, budget_before: null, budget_after: null, cached_tokens: null, outcome: attempt === 0 ? 'failed' : 'finished',
  error_kind: attempt === 0 ? 'stream_broken' : null, error: null, error_evidence: null, finish_reason: null, trace_id: null,
});

describe('TraceStore ring', () => {
  it('keeps the rows of requests that migrated or failed after ordinary traffic pushed them out, in order', () => {
    fc.assert(
      // A ring that holds at least the incident's own four rows when its request row comes.
      fc.property(fc.integer({ min: 4, max: 20 }), fc.integer({ min: 0, max: 80 }), fc.integer({ min: 0, max: 5 }), (capacity, after, before) => {
        const store = new TraceStore(capacity, null);
        for (let i = 0; i < before; i++) store.add(row(1000 + i));
        // A migrated request: two attempt rows interleaved with another request's row, then its own.
        store.add(attemptOf('mig', 0, 1));
        store.add(row(2000));
        store.add(attemptOf('mig', 1, 2));
        store.add({ ...row(3), request_id: 'mig', attempts: 2, migrations: 1 });
        store.add({ ...row(4), request_id: 'bad', outcome: 'failed', attempts: 0 });
        for (let i = 0; i < after; i++) store.add(row(i));
        const ids = [...store.rows()].map((r) => `${r.kind}:${r.request_id}`);
        // The incident's rows survive, oldest first, each once.
        expect(ids.filter((x) => x.endsWith(':mig') || x.endsWith(':bad'))).toEqual(['attempt:mig', 'attempt:mig', 'request:mig', 'request:bad']);
        // Ordinary rows: only the last `capacity` written.
        expect(ids.filter((x) => x === 'request:2000').length).toBe(after + 4 <= capacity ? 1 : 0);
      }),
      { numRuns: 300 },
    );
  });

  it('keeps the last `capacity` rows, oldest first', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 0, max: 100 }), (capacity, n) => {
        const store = new TraceStore(capacity, null);
        for (let i = 0; i < n; i++) store.add(row(i));
        const want = Array.from({ length: Math.min(n, capacity) }, (_, k) => String(Math.max(0, n - capacity) + k));
        expect([...store.rows()].map((r) => r.request_id)).toEqual(want);
      }),
      { numRuns: 300 },
    );
  });

  it('an export interleaved with new rows matches the snapshot model', () => {
    // Script: how many rows to read, then how many to add, repeatedly, until the export ends.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 0, max: 60 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 25 })), { maxLength: 20 }),
        (capacity, initial, script) => {
          const store = new TraceStore(capacity, null);
          let written = 0;
          for (; written < initial; written++) store.add(row(written));
          const end = written;
          const it = store.rows();
          const got: number[] = [];
          // The model: the next row is the oldest one still in the ring and present at the start.
          const want: number[] = [];
          let pos = Math.max(0, end - capacity);
          const step = () => {
            pos = Math.max(pos, written - capacity);
            if (pos >= end) return false;
            want.push(pos++);
            return true;
          };
          const read = () => {
            const r = it.next();
            if (!r.done) got.push(Number(r.value.request_id));
            const more = step();
            expect(!r.done).toBe(more);
            return more;
          };
          let open = true;
          for (const [reads, adds] of script) {
            for (let k = 0; k < reads && open; k++) open = read();
            for (let k = 0; k < adds; k++) store.add(row(written++));
          }
          while (open) open = read();
          expect(got).toEqual(want);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('filters by each field as documented', () => {
    const attempt = (worker: string, outcome: AttemptRow['outcome'], ended: number): AttemptRow => ({
      kind: 'attempt', format: 'sglang', request_id: 'r1', attempt: 0, rid: 'r1', worker, started_at: 0, ended_at: ended, ttft_ms: null, prompt_tokens_sent: 1,
      replayed_tokens: 0, tokens: 0, budget_before: null, budget_after: null, cached_tokens: null, outcome, error_kind: null, error: null, error_evidence: null, finish_reason: null, trace_id: null,
    });
    const a = attempt('http://w1:1', 'failed', 10);
    const r = row(20);
    const cases: [TraceFilter, TraceRow, boolean][] = [
      [{}, a, true],
      [{ kind: 'attempt' }, r, false],
      [{ kind: 'request' }, r, true],
      [{ worker: 'http://w1:1' }, a, true],
      [{ worker: 'http://w1:1' }, r, false], // request rows have no worker
      [{ worker: 'http://w2:1' }, a, false],
      [{ outcome: 'failed' }, a, true],
      [{ outcome: 'failed' }, r, false],
      [{ request: 'r1' }, a, true],
      [{ request: 'r1' }, r, false],
      [{ since: 10 }, a, true], // at or after
      [{ since: 11 }, a, false],
    ];
    for (const [f, rw, want] of cases) expect(matches(rw, f), JSON.stringify(f)).toBe(want);
  });

  it('a router keeps --trace-ring-size rows, and exports those', async () => {
    const worker = await startWorker({ tokenIntervalMs: 0 });
    const router = await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 60_000, traceRingSize: 3 });
    try {
      for (const id of ['one', 'two', 'three']) await generate(router.url, { id, stream: false, maxNewTokens: 2 });
      // Six rows were written (an attempt and a request row each); the last three are kept.
      const kept = router.traceRows().map((r) => `${r.kind}:${r.request_id}`);
      expect(kept).toEqual(['request:two', 'attempt:three', 'request:three']);
      expect(parseJsonl((await fetchText(`${router.url}/traces`)).text).map((r) => `${r.kind}:${r.request_id}`)).toEqual(kept);
    } finally {
      await router.close();
      await worker.close();
    }
  });
});
