// What the client got, as its own logs show it: a stream that had started was answered 200 and
// ended by an error frame (its code the status), not an HTTP 503; and the request's error is
// printed once in the detail panel, not again under the attempt that already says it.
import { describe, expect, it } from 'vitest';
import { clientFailure, clientGotHeadline, requestErrorLine } from '../../renderer/src/store/failure-reason.ts';
import type { AttemptView, RequestView } from '../../renderer/src/store/request-view.ts';
import type { RequestRow } from '../../router/trace/row.ts';

function row(over: Partial<RequestRow>): RequestRow {
  return {
    kind: 'request', format: 'sglang', request_id: 'x', attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 8,
    completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome: 'failed', duration_ms: 1, started_at: 0, ended_at: 1, stream: true,
    max_new_tokens: 64, error: null, client_error: 'migration_exhausted: no worker left to continue on', client_status: 503, trace_id: null, ...over,
  };
}

function view(summary: RequestRow, over: Partial<RequestView> = {}): RequestView {
  return {
    id: 'x', seq: 0, startedAt: 0, endedAt: 1, status: 'failed', admitted: true, admissionReason: null, stream: summary.stream, promptTokens: 8,
    maxNewTokens: 64, attempts: [], migrations: [], completionTokens: summary.completion_tokens, error: summary.error, summary, format: 'sglang',
    front: null, traceId: null, ...over,
  };
}

describe('what the client got', () => {
  it('a stream that had started: HTTP 200 and an error frame, with the tokens it had', () => {
    const r = view(row({ completion_tokens: 12 }));
    const f = clientFailure(r)!;
    expect(clientGotHeadline(r, f)).toBe('in-stream error after 12 tokens (HTTP 200; error frame code 503)');
    expect(clientGotHeadline(r, f)).not.toMatch(/^HTTP 503/);
  });

  it('a stream with no token yet, or a unary request: the HTTP status', () => {
    const stream0 = view(row({ completion_tokens: 0 }));
    expect(clientGotHeadline(stream0, clientFailure(stream0)!)).toBe('HTTP 503');
    const unary = view(row({ stream: false, completion_tokens: 30 }));
    expect(clientGotHeadline(unary, clientFailure(unary)!)).toBe('HTTP 503');
    const one = view(row({ completion_tokens: 1 }));
    expect(clientGotHeadline(one, clientFailure(one)!)).toBe('in-stream error after 1 token (HTTP 200; error frame code 503)');
  });

  it("the attempt's error is printed on its line, not a second time under the table", () => {
    const attempt = { attempt: 0, error: 'ERR_WORKER_CLOSED', errorKind: 'transport' } as unknown as AttemptView;
    const r = view(row({ error: 'ERR_WORKER_CLOSED', completion_tokens: 4 }), { attempts: [attempt] });
    expect(requestErrorLine(r, clientFailure(r))).toBeNull();
    // Said in the client's error text: not again either.
    const told = view(row({ error: 'no worker left to continue on' }));
    expect(requestErrorLine(told, clientFailure(told))).toBeNull();
    // An error said nowhere else keeps its line.
    const other = view(row({ error: 'internal: boom', client_error: 'internal_error: failed', client_status: 500 }), { attempts: [attempt] });
    expect(requestErrorLine(other, clientFailure(other))).toBe('internal: boom');
  });
});
