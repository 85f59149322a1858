// The pure decisions behind "blame needs evidence" and the scaled stall deadline
// (core/failure.ts, pool/evidence.ts, upstream/stall-watch.ts, formats/sglang/request.ts):
// laws over random inputs, no server. The scenarios with real processes are
// test/reliability/blame.test.ts.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BLAMES_WORKER, judge, needsEvidence, type Failure } from '../../router/core/failure.ts';
import { TokenedFailures } from '../../router/pool/evidence.ts';
import { frameSpacing } from '../../router/upstream/stall-watch.ts';
import { parseGenerateRequest, unknownSamplingKey } from '../../router/formats/sglang/request.ts';
import { parseVllmRequest } from '../../router/formats/vllm/request.ts';
import type { ErrorKind } from '../../router/trace/row.ts';

const KINDS = Object.keys(BLAMES_WORKER) as ErrorKind[];
const BLAMING = KINDS.filter((k) => BLAMES_WORKER[k]);

describe('which failures need evidence before they count against a worker', () => {
  it('a broken stream or a 500 before the request has a token; nothing once it has one', () => {
    fc.assert(
      fc.property(fc.constantFrom(...KINDS), fc.integer({ min: 100, max: 599 }), fc.nat(50), (kind, status, tokens) => {
        const f: Failure = { kind, message: 'x', status };
        const ambiguous = kind === 'stream_broken' || (kind === 'http_5xx' && status === 500);
        expect(needsEvidence(f, tokens)).toBe(tokens === 0 && ambiguous);
      }),
    );
  });

  it('a refused connection, a 503 and an engine abort carry their own evidence', () => {
    expect(needsEvidence({ kind: 'connect', message: '', status: 502 }, 0)).toBe(false);
    expect(needsEvidence({ kind: 'http_5xx', message: '', status: 503 }, 0)).toBe(false);
    expect(needsEvidence({ kind: 'engine_abort', message: '', status: 503 }, 0)).toBe(false);
  });
});

/** One failure an attempt had on some worker: what the loop hands the pool. */
const eventArb = fc.record({
  worker: fc.constantFrom('w0', 'w1', 'w2'),
  kind: fc.constantFrom(...BLAMING),
  tokens: fc.oneof(fc.constant(0), fc.nat(100)),
  at: fc.integer({ min: 0, max: 10_000 }),
});

describe('evidence a client cannot manufacture', () => {
  it('requests without tokens leave none, however many and whenever they fail: with a healthy probe the worker is never blamed', () => {
    fc.assert(
      fc.property(fc.array(eventArb.map((e) => ({ ...e, tokens: 0 })), { maxLength: 200 }), fc.constantFrom('w0', 'w1', 'w2'), fc.integer({ min: 0, max: 10_000 }), (events, worker, since) => {
        const record = new TokenedFailures();
        for (const e of events) record.note(e.worker, e.kind, e.tokens, e.at);
        const verdict = judge({ probe: { ok: true, refused: false, detail: 'GET /health answered 200' }, corroboration: record.since(worker, since) });
        expect(verdict.blame).toBe(false);
        expect(verdict.evidence).toMatch(/no evidence against the worker/);
      }),
    );
  });

  it('a request with tokens failing on the same worker since the attempt started is evidence; on another worker, or before, it is not', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 50 }), fc.constantFrom('w0', 'w1', 'w2'), fc.integer({ min: 0, max: 10_000 }), (events, worker, since) => {
        const record = new TokenedFailures();
        // In time order, as they happen.
        const ordered = [...events].sort((a, b) => a.at - b.at);
        for (const e of ordered) record.note(e.worker, e.kind, e.tokens, e.at);
        const mine = ordered.filter((e) => e.worker === worker && e.tokens > 0);
        const latest = mine.at(-1);
        const expected = latest !== undefined && latest.at >= since;
        const c = record.since(worker, since);
        expect(c !== null).toBe(expected);
        const verdict = judge({ probe: { ok: true, refused: false, detail: 'GET /health answered 200' }, corroboration: c });
        expect(verdict.blame).toBe(expected);
      }),
    );
  });

  it('a failed probe blames the worker; a refused one takes it out until a health check answers', () => {
    const refused = judge({ probe: { ok: false, refused: true, detail: 'GET /health failed: ECONNREFUSED' }, corroboration: null });
    expect(refused).toMatchObject({ blame: true, dead: true });
    expect(refused.evidence).toMatch(/health probe right after failed \(GET \/health failed: ECONNREFUSED\): the worker's fault/);
    expect(judge({ probe: { ok: false, refused: false, detail: 'GET /health answered 503' }, corroboration: null })).toMatchObject({ blame: true, dead: false });
  });
});

describe('the stall deadline\'s spacing, decided once per attempt', () => {
  const framing = fc.option(fc.record({ streamInterval: fc.option(fc.integer({ min: 1, max: 1000 }), { nil: null }), heldTokens: fc.nat(64) }), { nil: undefined });
  const interval = fc.option(fc.integer({ min: 1, max: 1000 }), { nil: null });
  const budget = fc.option(fc.nat(5000), { nil: null });

  it('is at least 1, at most the tokens left, and at least the interval the request (else the worker) asks for', () => {
    fc.assert(
      fc.property(framing, interval, budget, (req, worker, left) => {
        const s = frameSpacing(req, worker, left);
        const k = req?.streamInterval ?? worker ?? 1;
        expect(s).toBeGreaterThanOrEqual(1);
        if (left !== null) expect(s).toBeLessThanOrEqual(Math.max(1, left));
        if (left === null || left >= k) expect(s).toBeGreaterThanOrEqual(k);
        if (!req?.heldTokens && (left === null || left >= k)) expect(s).toBe(k);
      }),
    );
  });

  it('reads stream_interval where SGLang and vLLM do: the request\'s sampling params, its stop strings (SGLang)', () => {
    const sg = parseGenerateRequest({ input_ids: [1, 2], sampling_params: { stream_interval: 25, stop: ['end', 'stop here'] } });
    expect(sg.framing).toEqual({ streamInterval: 25, heldTokens: 9 });
    // SGLang's `or`: 0 and null fall back to the worker's own.
    expect(parseGenerateRequest({ input_ids: [1], sampling_params: { stream_interval: 0 } }).framing).toEqual({ streamInterval: null, heldTokens: 0 });
    expect(parseVllmRequest({ token_ids: [1, 2], sampling_params: { stream_interval: 12 } }, { lossyNumbers: false }).framing).toEqual({ streamInterval: 12, heldTokens: 0 });
  });
});

describe('sampling keys SGLang does not take', () => {
  const KNOWN = ['max_new_tokens', 'stop', 'stop_token_ids', 'stop_regex', 'temperature', 'top_p', 'top_k', 'min_p', 'frequency_penalty', 'presence_penalty',
    'repetition_penalty', 'min_new_tokens', 'n', 'json_schema', 'regex', 'ebnf', 'structural_tag', 'ignore_eos', 'skip_special_tokens',
    'spaces_between_special_tokens', 'no_stop_trim', 'custom_params', 'stream_interval', 'logit_bias', 'sampling_seed',
    'stop_strs', 'stop_regex_strs', 'stop_str_max_len', 'stop_regex_max_len', 'is_normalized'];

  // (Keys that look like array indices are left out: a JS object lists them first, where Python's
  // dict keeps the body's order, so which one is named first may differ.)
  it('every parameter of a supported SamplingParams passes; any other key is refused with the TypeError naming the first one', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.constantFrom(...KNOWN)), fc.array(fc.string({ minLength: 1 }).filter((k) => !KNOWN.includes(k) && k !== '__proto__' && !/^(0|[1-9]\d*)$/.test(k))), fc.nat(), (known, unknown, at) => {
        const keys = [...known];
        if (unknown.length > 0) keys.splice(at % (keys.length + 1), 0, ...unknown);
        const sp = Object.fromEntries(keys.map((k) => [k, null]));
        const first = keys.find((k) => !KNOWN.includes(k));
        const want = first === undefined ? null : `SamplingParams.__init__() got an unexpected keyword argument '${first}'`;
        expect(unknownSamplingKey(sp)).toBe(want);
        expect(unknownSamplingKey([{ max_new_tokens: 1 }, sp])).toBe(want);
        expect(parseGenerateRequest({ input_ids: [1, 2], sampling_params: sp }).refusal).toBe(want);
      }),
    );
  });

  it('a truthy number as stop_token_ids is one too (set() of an int), as the simulator and SGLang raise it', () => {
    expect(unknownSamplingKey({ stop_token_ids: 1439246839 })).toBe("'int' object is not iterable");
    expect(unknownSamplingKey({ stop_token_ids: 2.5 })).toBe("'float' object is not iterable");
    expect(unknownSamplingKey({ stop_token_ids: true })).toBe("'bool' object is not iterable");
    for (const ok of [0, false, null, [], [7]]) expect(unknownSamplingKey({ stop_token_ids: ok })).toBeNull();
  });

  it('OpenAI\'s max_tokens sent to /generate is one', () => {
    expect(parseGenerateRequest({ input_ids: [1], sampling_params: { max_tokens: 5 } }).refusal).toBe("SamplingParams.__init__() got an unexpected keyword argument 'max_tokens'");
    expect(parseGenerateRequest({ input_ids: [1], sampling_params: null }).refusal).toBeNull();
  });
});
