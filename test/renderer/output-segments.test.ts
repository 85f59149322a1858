import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RequestOutput } from '../../host/contract.ts';
import { outputLayout, type OutputRun } from '../../renderer/src/store/output-segments.ts';

const W0 = 'http://127.0.0.1:30001';
const W1 = 'http://127.0.0.1:30002';
const W2 = 'http://127.0.0.1:30003';

function output(n: number, attempts: [string, number, number][]): RequestOutput {
  return {
    request_id: 'r',
    output_ids: Array.from({ length: n }, (_, i) => 1000 + i),
    attempts: attempts.map(([worker, from_token, tokens], attempt) => ({ attempt, worker, from_token, tokens })),
  };
}

/** Pieces as compact tuples: ['run', worker, from, length] and ['handoff', worker, at]. */
function shape(out: RequestOutput, limit?: number) {
  return outputLayout(out, limit).pieces.map((p) => (p.kind === 'run' ? ['run', p.worker, p.from, p.ids.length] : ['handoff', p.worker, p.at]));
}

describe('output token layout', () => {
  it('splits a migrated request at the migration token, with one hand-off', () => {
    const out = output(118, [[W0, 0, 78], [W1, 78, 40]]);
    expect(shape(out)).toEqual([['run', W0, 0, 78], ['handoff', W1, 78], ['run', W1, 78, 40]]);
    const layout = outputLayout(out);
    expect(layout.pieces[1]).toMatchObject({ kind: 'handoff', attempt: 1, fromWorker: W0 });
    expect(layout.pieces.flatMap((p) => (p.kind === 'run' ? p.ids : []))).toEqual(out.output_ids);
    expect(layout).toMatchObject({ total: 118, shown: 118, hiddenHandoffs: 0 });
  });

  it('is one run and no hand-off without a migration', () => {
    expect(shape(output(5, [[W0, 0, 5]]))).toEqual([['run', W0, 0, 5]]);
  });

  it('marks a continuation that produced nothing before failing, next to the one that took over', () => {
    const out = output(80, [[W0, 0, 50], [W1, 50, 0], [W2, 50, 30]]);
    expect(shape(out)).toEqual([['run', W0, 0, 50], ['handoff', W1, 50], ['handoff', W2, 50], ['run', W2, 50, 30]]);
  });

  it('puts the hand-off first when the first attempt died before its first token', () => {
    expect(shape(output(20, [[W0, 0, 0], [W1, 0, 20]]))).toEqual([['handoff', W1, 0], ['run', W1, 0, 20]]);
  });

  it('keeps a hand-off at the very end (a last continuation that failed at once)', () => {
    expect(shape(output(10, [[W0, 0, 10], [W1, 10, 0]]))).toEqual([['run', W0, 0, 10], ['handoff', W1, 10]]);
  });

  it('draws at most `limit` tokens and counts the hand-offs past them', () => {
    const out = output(118, [[W0, 0, 78], [W1, 78, 40]]);
    const layout = outputLayout(out, 60);
    expect(shape(out, 60)).toEqual([['run', W0, 0, 60]]);
    expect(layout).toMatchObject({ total: 118, shown: 60, hiddenHandoffs: 1 });
    // A hand-off exactly at the cut belongs to the hidden part.
    expect(outputLayout(out, 78)).toMatchObject({ shown: 78, hiddenHandoffs: 1 });
    expect(shape(out, 79)).toEqual([['run', W0, 0, 78], ['handoff', W1, 78], ['run', W1, 78, 1]]);
  });

  it('lets a continuation replace what an earlier attempt claimed past its start', () => {
    expect(shape(output(60, [[W0, 0, 50], [W1, 30, 30]]))).toEqual([['run', W0, 0, 30], ['handoff', W1, 30], ['run', W1, 30, 30]]);
  });

  it('leaves tokens no attempt claims visible and unattributed, and clips claims past the output', () => {
    expect(shape(output(10, [[W0, 0, 4], [W1, 6, 99]]))).toEqual([
      ['run', W0, 0, 4], ['run', null, 4, 2], ['handoff', W1, 6], ['run', W1, 6, 4],
    ]);
    expect(shape(output(3, []))).toEqual([['run', null, 0, 3]]);
    expect(shape(output(0, [[W0, 0, 0]]))).toEqual([]);
  });

  it('law: the runs are the output, in order, exactly once, for any attempts and limit', () => {
    const attempt = fc.record({ worker: fc.constantFrom(W0, W1, W2), from_token: fc.integer({ min: -5, max: 120 }), tokens: fc.integer({ min: -2, max: 120 }) });
    fc.assert(fc.property(fc.integer({ min: 0, max: 100 }), fc.array(attempt, { maxLength: 5 }), fc.integer({ min: 0, max: 130 }), (n, as, limit) => {
      const out: RequestOutput = { request_id: 'r', output_ids: Array.from({ length: n }, (_, i) => i), attempts: as.map((a, attempt) => ({ attempt, ...a })) };
      const layout = outputLayout(out, limit);
      const runs = layout.pieces.filter((p): p is OutputRun => p.kind === 'run');
      expect(runs.flatMap((r) => r.ids)).toEqual(out.output_ids.slice(0, Math.min(n, limit)));
      expect(runs.every((r) => r.ids.length > 0 && r.ids[0] === r.from)).toBe(true);
      const handoffs = layout.pieces.filter((p) => p.kind === 'handoff');
      expect(handoffs.length + layout.hiddenHandoffs).toBeLessThanOrEqual(Math.max(0, as.length - 1));
      // Continuations that never go backwards are each a hand-off.
      const starts = as.slice(1).map((a) => Math.min(n, Math.max(0, a.from_token)));
      if (starts.every((f, i) => i === 0 || f >= starts[i - 1]!)) expect(handoffs.length + layout.hiddenHandoffs).toBe(starts.length);
    }));
  });
});

describe('output text (the router has the tokenizer)', () => {
  it("each run carries its tokens' text; the runs' text is the answer's, split at the migration token", () => {
    const out = output(6, [[W0, 0, 4], [W1, 4, 2]]);
    out.token_text = ['Hel', 'lo', ',', ' wo', 'rld', '!'];
    const runs = outputLayout(out).pieces.filter((p): p is OutputRun => p.kind === 'run');
    expect(runs.map((r) => r.texts)).toEqual([['Hel', 'lo', ',', ' wo'], ['rld', '!']]);
    expect(runs.flatMap((r) => r.texts!).join('')).toBe('Hello, world!');
    expect(outputLayout(out, 3).pieces.filter((p): p is OutputRun => p.kind === 'run').map((r) => r.texts)).toEqual([['Hel', 'lo', ',']]);
  });

  it('no text without token_text, or when it does not cover the output', () => {
    const out = output(3, [[W0, 0, 3]]);
    expect((outputLayout(out).pieces[0] as OutputRun).texts).toBeNull();
    out.token_text = ['a'];
    expect((outputLayout(out).pieces[0] as OutputRun).texts).toBeNull();
  });
});
