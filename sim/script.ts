// A scripted model (`--script FILE`): for a prompt that a rule matches, the worker emits the rule's
// text, tokenized with the worker's tokenizer, then EOS, instead of the hash model's tokens. Tests
// make a worker think, call a tool, or stop mid-call with it (docs/simulator.md).
//
// A continuation (the prompt followed by the ids already generated, as a migrating router sends
// it) resumes the script where those ids end: the position is the longest prefix of the script's
// ids that the prompt ends with. So a migrated answer equals the uninterrupted one, as with the
// hash model.
import { readFileSync } from 'node:fs';
import type { SimTokenizer } from './vocab.ts';

/** One rule of a script file: a regular expression over the prompt's text, and the answer's text. */
export interface ScriptRule {
  /**
   * A JavaScript regular expression searched in the prompt's text (special tokens kept, so a chat
   * template's markers can be matched). Absent: the rule matches every prompt (a default).
   */
  match?: string;
  /** The answer's text; `$1` … `$9` are the match's groups. */
  text: string;
}

interface Compiled {
  re: RegExp | null;
  text: string;
}

export class Script {
  private readonly rules: Compiled[];
  private readonly ids = new Map<string, number[]>();

  constructor(
    rules: readonly ScriptRule[],
    private readonly tok: SimTokenizer,
    private readonly eos: number,
  ) {
    this.rules = rules.map((r, i) => {
      if (typeof r !== 'object' || r === null || typeof r.text !== 'string') throw new Error(`script rule ${i}: needs a string "text"`);
      if (r.match !== undefined && typeof r.match !== 'string') throw new Error(`script rule ${i}: "match" must be a string (a regular expression)`);
      let re: RegExp | null = null;
      try {
        re = r.match === undefined ? null : new RegExp(r.match);
      } catch (err) {
        throw new Error(`script rule ${i}: "match" is not a regular expression: ${(err as Error).message}`);
      }
      return { re, text: r.text };
    });
  }

  /** The script's ids for `prompt` (its text, then EOS) and where the prompt leaves off; null: no rule matches. */
  continuation(prompt: readonly number[]): { ids: readonly number[]; pos: number } | null {
    const text = this.tok.decode(prompt, { skipSpecialTokens: false, cleanUpTokenizationSpaces: false });
    for (const r of this.rules) {
      let answer = r.text;
      if (r.re !== null) {
        const m = r.re.exec(text);
        if (m === null) continue;
        answer = answer.replace(/\$(\d)/g, (_, d: string) => m[Number(d)] ?? '');
      }
      let ids = this.ids.get(answer);
      if (!ids) {
        ids = [...this.tok.encode(answer, { addSpecialTokens: false }), this.eos];
        this.ids.set(answer, ids);
      }
      return { ids, pos: resumeAt(prompt, ids) };
    }
    return null;
  }
}

/** The longest k such that `prompt` ends with ids[0..k): how much of the script was generated. */
export function resumeAt(prompt: readonly number[], ids: readonly number[]): number {
  for (let k = Math.min(ids.length, prompt.length); k > 0; k--) {
    let ok = true;
    for (let j = 0; j < k && ok; j++) ok = prompt[prompt.length - k + j] === ids[j];
    if (ok) return k;
  }
  return 0;
}

/** A script file: a JSON list of rules (the first that matches answers). */
export function loadScript(file: string, tok: SimTokenizer, eos: number): Script {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`script ${file}: ${(err as Error).message}`);
  }
  if (!Array.isArray(doc)) throw new Error(`script ${file}: must be a JSON list of rules ({"match": REGEX, "text": TEXT})`);
  try {
    return new Script(doc as ScriptRule[], tok, eos);
  } catch (err) {
    throw new Error(`script ${file}: ${(err as Error).message}`);
  }
}
