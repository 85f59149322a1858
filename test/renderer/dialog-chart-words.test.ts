// The kill dialog says how many streams break; an empty chart says so in words; the Requests
// view says where Kill is; a dead worker's card says how its process ended.
import { describe, expect, it } from 'vitest';
import { processEnd, simConfirmBody } from '../../renderer/src/views/WorkerCard.tsx';
import { emptyChartWords } from '../../renderer/src/store/chart-words.ts';
import type { SeriesPoint } from '../../renderer/src/store/series.ts';
import type { DashState } from '../../renderer/src/store/store.ts';
import { killHint } from '../../renderer/src/views/IncidentsView.tsx';

describe('the confirmation of a destructive sim action', () => {
  it('a kill names how many streams in flight will break', () => {
    const body = simConfirmBody('kill', 'SIGKILL the worker process.', 'http://127.0.0.1:9', 7);
    expect(body).toContain('7 streams in flight there break');
    expect(body).toContain('http://127.0.0.1:9');
    expect(simConfirmBody('kill', 'SIGKILL.', 'http://w', 1)).toContain('1 stream in flight there breaks');
    expect(simConfirmBody('reset', 'Reset.', 'http://w', 3)).toContain('3 streams');
  });

  it('a kill with nothing running says no stream is in flight; reject (new requests only) gives no count', () => {
    expect(simConfirmBody('kill', 'SIGKILL.', 'http://w', 0)).toContain('No stream is in flight');
    expect(simConfirmBody('reject', 'Answer new requests with 503.', 'http://w', 5)).not.toContain('stream');
  });
});

describe('an empty chart has words', () => {
  const zero = (t: number): SeriesPoint => ({ t, tokensPerSec: {}, requestsPerSec: 0, migrations: 0, migrationsPerMin: 0, ttftP50: null, ttftP99: null, failures: {} });

  it('a window with nothing in it says so on every chart', () => {
    const points = [zero(0), zero(1000)];
    expect(emptyChartWords('requests', points)).toBe('no requests in this window');
    expect(emptyChartWords('tokens', points)).toBe('no tokens generated in this window');
    expect(emptyChartWords('ttft', points)).toBe('no first token in this window');
    expect(emptyChartWords('failures', points)).toBe('no failed requests in this window');
    expect(emptyChartWords('requests', [])).toBe('no requests in this window');
  });

  it('a window with traffic draws it: no words', () => {
    const p = { ...zero(0), tokensPerSec: { 'http://w': 40 }, requestsPerSec: 2, ttftP50: 80, ttftP99: 120, failures: { no_worker: 1 } };
    const points = [zero(0), p];
    for (const c of ['requests', 'tokens', 'ttft', 'failures'] as const) expect(emptyChartWords(c, points)).toBeNull();
  });
});

describe('where Kill is', () => {
  const sim = [{ index: 0, port: 9, alive: true, fault: null }] as unknown as DashState['sim'];
  it('live with a simulated cluster, the Requests view says Kill is on the Workers tab', () => {
    expect(killHint('live', sim)).toMatch(/Kill.*Workers/);
  });
  it('no hint without sim buttons (real workers) or in a trace file', () => {
    expect(killHint('live', null)).toBeNull();
    expect(killHint('file', sim)).toBeNull();
  });
});

describe('how a dead worker\'s process ended', () => {
  it('the card gives the signal of a kill (dashboard or outside) or the exit code', () => {
    expect(processEnd({ code: null, signal: 'SIGKILL' })).toBe('killed (SIGKILL)');
    expect(processEnd({ code: 1, signal: null })).toBe('exited (code 1)');
    expect(processEnd(null)).toBe('killed');
    expect(processEnd(undefined)).toBe('killed');
  });
});
