// Stitching as pure data: very long logprob lists, and the counters the router does not own.
import { describe, expect, it } from 'vitest';
import { AttemptOutput, LogicalOutput } from '../../router/formats/sglang/stitch.ts';
import type { JsonObject } from '../../router/formats/sglang/request.ts';

const info = (over: Partial<LogicalOutput['info']> = {}) => ({ id: 'req', promptTokens: 5, budget: 400_000, startedAt: Date.now(), clientIncremental: false, ...over });

describe('finding 9: long logprob lists', () => {
  it('absorbs and commits 200k-entry lists (a spread into push() throws at ~130k)', () => {
    const n = 200_000;
    const ids = Array.from({ length: n }, (_, i) => 3 + (i % 1000));
    const lps = ids.map((t) => [-0.5, t, null]);
    const a = new AttemptOutput(true, 0);
    a.absorb({ output_ids: ids, meta_info: { id: 'x', finish_reason: null, completion_tokens: n, output_token_logprobs: lps } } as unknown as JsonObject);
    a.absorb({ output_ids: ids, meta_info: { id: 'x', finish_reason: null, completion_tokens: 2 * n, output_token_logprobs: lps } } as unknown as JsonObject);
    expect(a.ids).toHaveLength(2 * n);
    expect(a.lists.output_token_logprobs).toHaveLength(2 * n);
    const out = new LogicalOutput(info());
    out.commit(a);
    out.commit(a);
    expect(out.ids).toHaveLength(4 * n);
    expect(out.lists.output_token_logprobs).toHaveLength(4 * n);
  });
});

describe('finding 11: counters across a migration', () => {
  it('sums reasoning_tokens, num_retractions and spec_verify_ct, and rebases output_token_logprobs_length', () => {
    const out = new LogicalOutput(info());
    const a0 = new AttemptOutput(false, 0);
    const m0 = { id: 'r~m0', finish_reason: null, prompt_tokens: 5, completion_tokens: 3, output_token_logprobs: [[-1, 7, null], [-1, 8, null], [-1, 9, null]], output_token_logprobs_length: 3, reasoning_tokens: 2, num_retractions: 1, spec_verify_ct: 2 };
    a0.absorb({ output_ids: [7, 8, 9], meta_info: m0 } as unknown as JsonObject);
    out.commit(a0);
    const a1 = new AttemptOutput(false, 3);
    const chunk = { output_ids: [10, 11], meta_info: { id: 'r~m1', finish_reason: { type: 'length', length: 2 }, prompt_tokens: 8, completion_tokens: 2, output_token_logprobs: [[-1, 10, null], [-1, 11, null]], output_token_logprobs_length: 2, reasoning_tokens: 1, num_retractions: 0, spec_verify_ct: 1, weight_version: 'v1' } } as unknown as JsonObject;
    a1.absorb(chunk);
    const r = out.render(chunk, a1, false) as { output_ids: number[]; meta_info: Record<string, unknown> };
    expect(r.output_ids).toEqual([7, 8, 9, 10, 11]);
    expect(r.meta_info).toMatchObject({
      id: 'req', prompt_tokens: 5, completion_tokens: 5, output_token_logprobs_length: 5,
      reasoning_tokens: 3, num_retractions: 1, spec_verify_ct: 3, weight_version: 'v1',
      finish_reason: { type: 'length', length: 400_000 },
    });
    expect((r.meta_info.output_token_logprobs as unknown[]).length).toBe(5);
    expect(a1.weightVersion).toBe('v1');
  });

  it('keeps a queued abort without prompt_tokens as SGLang writes it', () => {
    const out = new LogicalOutput(info());
    const a = new AttemptOutput(false, 0);
    const chunk = { text: '', output_ids: [], meta_info: { id: 'r~m0', finish_reason: { type: 'abort', message: 'Aborted', status_code: null, err_type: null }, completion_tokens: 0 } } as unknown as JsonObject;
    a.absorb(chunk);
    const r = out.render(chunk, a, false) as { meta_info: Record<string, unknown> };
    expect(r.meta_info.id).toBe('req');
    expect('prompt_tokens' in r.meta_info).toBe(false);
  });
});
