// Admission and continuation building are pure decisions over plain data.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { admit as admitWith, type AdmissionContext } from '../../router/core/admission.ts';
import { remainingBudget, remainingMinTokens } from '../../router/core/continuation.ts';
import { upstreamRid } from '../../router/migration/rid.ts';
import { attemptBody, buildContinuation, spliceFirstAttempt } from '../../router/formats/sglang/continuation.ts';
import { SGLANG_ADMISSION } from '../../router/formats/sglang/admission.ts';
import { MalformedBody, parseGenerateRequest } from '../../router/formats/sglang/request.ts';

const admit = (r: ReturnType<typeof parseGenerateRequest>, c: AdmissionContext) => admitWith(r, c, SGLANG_ADMISSION);
const ctx: AdmissionContext = { migrationLimit: 3, migrationMaxSeqLen: null, workerDefaults: {}, disputedDefaults: new Set(), maxReqLen: null };
const req = (body: Record<string, unknown>) => parseGenerateRequest({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 10 }, ...body });

describe('admission', () => {
  it.each([
    ['migration_disabled', {}, { migrationLimit: 0 }],
    ['text_prompt', { input_ids: undefined, text: 'hello' }, {}],
    ['input_embeds', { input_ids: undefined, input_embeds: [[0.1, 0.2]] }, {}],
    ['batch', { input_ids: [[1, 2], [3]] }, {}],
    ['multimodal', { image_data: 'http://x/y.png' }, {}],
    ['n_gt_1', { sampling_params: { max_new_tokens: 10, n: 2 } }, {}],
    ['sampling_seed', { sampling_params: { max_new_tokens: 10, sampling_seed: 1 } }, {}],
    ['frequency_penalty', { sampling_params: { max_new_tokens: 10, frequency_penalty: 0.1 } }, {}],
    ['presence_penalty', { sampling_params: { max_new_tokens: 10, presence_penalty: 0.1 } }, {}],
    ['repetition_penalty', { sampling_params: { max_new_tokens: 10, repetition_penalty: 1.1 } }, {}],
    ['grammar_json_schema', { sampling_params: { max_new_tokens: 10, json_schema: '{}' } }, {}],
    ['grammar_ebnf', { sampling_params: { max_new_tokens: 10, ebnf: 'root ::= "a"' } }, {}],
    ['custom_logit_processor', { custom_logit_processor: 'abc' }, {}],
    ['stop_strings', { sampling_params: { max_new_tokens: 10, stop: ['\n'] } }, {}],
    ['stop_regex', { sampling_params: { max_new_tokens: 10, stop_regex: 'a+' } }, {}],
    ['unresolved_budget', { sampling_params: {} }, {}],
    ['unbounded_budget', { sampling_params: { max_new_tokens: null } }, {}],
    ['return_hidden_states', { return_hidden_states: true }, {}],
    ['return_text_in_logprobs', { return_text_in_logprobs: true }, {}],
    ['disaggregation', { bootstrap_room: 7 }, {}],
    ['max_seq_len', {}, { migrationMaxSeqLen: 2 }],
    ['session_params', { session_params: { id: 's1' } }, {}],
    ['thinking_budget', { sampling_params: { max_new_tokens: 10, custom_params: { thinking_budget: 32 } } }, {}],
    ['thinking_budget', { sampling_params: { max_new_tokens: 10, max_thinking_tokens: 32 } }, {}],
    // Worker-advertised defaults count as if the client had sent them (SGLang merges them under the request's).
    ['repetition_penalty', {}, { workerDefaults: { repetition_penalty: 1.2 } }],
    ['frequency_penalty', {}, { workerDefaults: { frequency_penalty: 0.5 } }],
    ['stop_strings', {}, { workerDefaults: { stop: ['</s>'] } }],
    ['unresolved_budget', { sampling_params: {} }, { disputedDefaults: new Set(['max_new_tokens']) }],
    ['worker_defaults_disagree_presence_penalty', {}, { disputedDefaults: new Set(['presence_penalty']) }],
  ])('refuses %s', (reason, body, over) => {
    const a = admit(req(body), { ...ctx, ...over });
    expect(a).toMatchObject({ admitted: false, reason });
  });

  it('admits greedy token-id requests, a seed at temperature 0, and zero penalties', () => {
    expect(admit(req({}), ctx)).toMatchObject({ admitted: true, reason: null, budget: 10, budgetFromDefault: false, minNewTokens: 0 });
    expect(admit(req({ sampling_params: { max_new_tokens: 5, temperature: 0, sampling_seed: 3, frequency_penalty: 0, repetition_penalty: 1, stop: [] } }), ctx).admitted).toBe(true);
  });

  it('takes a default budget the workers advertise alike', () => {
    expect(admit(req({ sampling_params: {} }), { ...ctx, workerDefaults: { max_new_tokens: 64 } })).toMatchObject({ admitted: true, reason: null, budget: 64, budgetFromDefault: true });
  });

  it('a client penalty of no effect overrides an advertised one, and an explicit null shows the default through', () => {
    expect(admit(req({ sampling_params: { max_new_tokens: 10, repetition_penalty: 1 } }), { ...ctx, workerDefaults: { repetition_penalty: 1.2 } }).admitted).toBe(true);
    expect(admit(req({ sampling_params: { max_new_tokens: 10, repetition_penalty: null } }), { ...ctx, workerDefaults: { repetition_penalty: 1.2 } }).reason).toBe('repetition_penalty');
  });

  it('takes min_new_tokens from an advertised default', () => {
    expect(admit(req({}), { ...ctx, workerDefaults: { min_new_tokens: 4 } })).toMatchObject({ admitted: true, minNewTokens: 4 });
  });

  it("clamps the budget as SGLang's scheduler does: min(budget, max_req_len - prompt - 1)", () => {
    // prompt 3 tokens; max_req_len 10 → at most 6 new tokens, default or explicit alike.
    expect(admit(req({ sampling_params: {} }), { ...ctx, workerDefaults: { max_new_tokens: 128 }, maxReqLen: 10 })).toMatchObject({ admitted: true, budget: 6, budgetFromDefault: true });
    expect(admit(req({ sampling_params: { max_new_tokens: 100 } }), { ...ctx, maxReqLen: 10 })).toMatchObject({ budget: 6 });
    expect(admit(req({ sampling_params: { max_new_tokens: 4 } }), { ...ctx, maxReqLen: 10 })).toMatchObject({ budget: 4 });
  });
});

describe('continuation', () => {
  it('asks for the saturating remainder, shrinks min_new_tokens, and keeps every other field', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(32000), { minLength: 1, maxLength: 10 }), fc.nat(100), fc.nat(100), fc.array(fc.nat(32000), { maxLength: 120 }), (prompt, budget, min, replayed) => {
        const minNew = Math.min(min, budget);
        const r = parseGenerateRequest({ input_ids: prompt, sampling_params: { max_new_tokens: budget, min_new_tokens: minNew, top_k: 5 }, return_logprob: true, lora_path: 'x', custom: { a: 1 } });
        const c = buildContinuation(r, prompt, replayed, budget, 'rid~m1~0123456789abcdef');
        const sp = c.sampling_params as Record<string, unknown>;
        const rem = remainingBudget(budget, replayed.length);
        expect(rem).toBe(Math.max(0, budget - replayed.length));
        expect(sp.max_new_tokens).toBe(rem);
        expect(sp.min_new_tokens).toBe(remainingMinTokens(minNew, replayed.length, rem));
        expect(sp.min_new_tokens as number).toBeLessThanOrEqual(rem);
        expect(sp.top_k).toBe(5);
        expect(c.input_ids).toEqual([...prompt, ...replayed]);
        expect(c.rid).toBe('rid~m1~0123456789abcdef');
        expect(c.stream).toBe(true);
        expect(c.lora_path).toBe('x');
        expect(c.custom).toEqual({ a: 1 });
        if (replayed.length > 0) expect(c.logprob_start_len).toBe(-1);
      }),
      { numRuns: 300 },
    );
  });
});

describe("attempt 0's body: the client's bytes with rid and stream appended", () => {
  const ws = fc.constantFrom('', ' ', '\n', ' \r\n\t ');
  const value = fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.array(fc.nat(50), { maxLength: 4 }));
  const rid = upstreamRid('client-id', 0);

  it('reads (last duplicate key wins, as in Python json and JSON.parse) as the client body with rid and stream:true', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('rid', 'stream', 'input_ids', 'text', 'sampling_params', 'x', 'é'), value), { maxLength: 8 }),
        ws, ws, ws,
        (pairs, before, inner, after) => {
          const members = pairs.map(([k, v]) => `${JSON.stringify(k)}${inner}:${inner}${JSON.stringify(v)}`);
          const text = `${before}{${inner}${members.join(`${inner},${inner}`)}${inner}}${after}`;
          const raw = Buffer.from(text);
          const out = spliceFirstAttempt(raw, rid)!;
          expect(out).not.toBeNull();
          expect(JSON.parse(out.toString('utf8'))).toEqual({ ...JSON.parse(text), rid, stream: true });
          // The client's bytes go out as they were: only the tail is new.
          expect(out.subarray(0, raw.lastIndexOf('}')).equals(raw.subarray(0, raw.lastIndexOf('}')))).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('keeps the spelling of numbers that re-serialising would change; falls back to JSON without the bytes', () => {
    const text = '{"rid":"mine","input_ids":[1,2],"sampling_params":{"temperature":1.0,"top_p":1e0},"stream":false}';
    const req = parseGenerateRequest(JSON.parse(text), { raw: Buffer.from(text) });
    const spec = { index: 0, rid, replayed: [], remaining: null, minTokens: 0 };
    expect(attemptBody(req, [1, 2], spec, 0).toString()).toBe(`${text.slice(0, -1)},"rid":"${rid}","stream":true}`);
    const plain = parseGenerateRequest(JSON.parse(text));
    expect(JSON.parse(attemptBody(plain, [1, 2], spec, 0).toString())).toEqual({ ...JSON.parse(text), rid, stream: true });
    expect(spliceFirstAttempt(Buffer.from('{}'), rid)!.toString()).toBe(`{"rid":"${rid}","stream":true}`);
    expect(spliceFirstAttempt(Buffer.from('[1]'), rid)).toBeNull();
  });
});

describe('continuation with a worker default', () => {
  it('sends an explicit reduced min_new_tokens when the default came from the workers', () => {
    const r = parseGenerateRequest({ input_ids: [1, 2, 3], sampling_params: {} });
    const c = buildContinuation(r, [1, 2, 3], [7, 8], 10, 'x', 5);
    expect(c.sampling_params).toMatchObject({ max_new_tokens: 8, min_new_tokens: 3 });
    expect(c.text).toBeUndefined();
  });
});

describe('reading a request: the router refuses only what FastAPI refuses, and forwards the rest', () => {
  it.each([
    [[1, 2], /dataclass_type/],
    [{ input_ids: [1], rid: 5 }, /string_type/],
    [{ input_ids: [1], stream: 'perhaps' }, /bool_parsing/],
    [{ input_ids: [1], stream: null }, /bool_type/],
    [{ input_ids: 'abc' }, /list_type/],
    [{ input_ids: [1], sampling_params: 'x' }, /dict_type/],
  ])('refuses %j as FastAPI does (MalformedBody)', (body, msg) => {
    expect(() => parseGenerateRequest(body)).toThrow(MalformedBody);
    expect(() => parseGenerateRequest(body)).toThrow(msg);
  });

  it.each([
    [{}, /no text, input_ids or input_embeds/],
    [{ input_ids: [] }, /input_ids is empty/],
    [{ input_ids: [1, -2] }, /not a token id/],
    [{ input_ids: [1], sampling_params: { temperature: -1 } }, /temperature/],
    [{ input_ids: [1], sampling_params: { temperature: 0.5, top_k: 0 } }, /top_k/],
    [{ input_ids: [1], sampling_params: { top_p: 0 } }, /top_p/],
    [{ input_ids: [1], sampling_params: { frequency_penalty: 3 } }, /frequency_penalty/],
    [{ input_ids: [1], sampling_params: { max_new_tokens: 'x' } }, /max_new_tokens/],
    [{ input_ids: [1], sampling_params: { max_new_tokens: 3, min_new_tokens: 4 } }, /min_new_tokens/],
    [{ input_ids: [1], sampling_params: { regex: 'a', json_schema: '{}' } }, /more than one/],
    [{ input_ids: [1], stream: 'true' }, /coercion/],
  ])('forwards %j as written (unparsed, never migrated) instead of refusing it', (body, why) => {
    const r = parseGenerateRequest(body);
    expect(r.unparsed).toMatch(why);
    expect(admit(r, ctx)).toMatchObject({ admitted: false });
  });

  it('accepts what SGLang accepts: greedy with top_k 0, and text with input_ids (served from the ids)', () => {
    const greedy = parseGenerateRequest({ input_ids: [1, 2], sampling_params: { max_new_tokens: 4, temperature: 0, top_k: 0 } });
    expect(greedy.unparsed).toBeNull();
    expect(admit(greedy, ctx).admitted).toBe(true);
    const both = parseGenerateRequest({ text: 'x', input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 4 } });
    expect(both.unparsed).toBeNull();
    expect(both.prompt).toEqual({ kind: 'input_ids', ids: [1, 2, 3] });
  });

  it('marks a body whose numbers would not survive re-serialisation', () => {
    expect(parseGenerateRequest({ input_ids: [1], sampling_params: { max_new_tokens: 2 } }, { lossyNumbers: true }).unparsed).toMatch(/re-serialisation/);
  });
});
