// The models the OpenAI front serves: each `--tokenizer` names a model directory (tokenizer.json,
// tokenizer_config.json, generation_config.json). `NAME=DIR` serves model NAME; a bare DIR serves
// the model the workers report (any name they report that no NAME=DIR claims), so the common
// one-model cluster needs no name at all.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadTokenizer, type Tokenizer } from '../../tokenizer/index.ts';
import { OpenAiError, type GenerationDefaults, type ServedModel } from './request.ts';

export interface TokenizerSpec {
  name: string | null;
  dir: string;
}

/** `DIR` or `NAME=DIR` (a NAME holds no path separator; a DIR may hold '='). */
export function parseTokenizerSpec(spec: string): TokenizerSpec {
  const eq = spec.indexOf('=');
  if (eq > 0 && !spec.slice(0, eq).includes('/')) {
    const name = spec.slice(0, eq);
    const dir = spec.slice(eq + 1);
    if (dir === '') throw new Error(`--tokenizer ${spec}: no directory after '='`);
    return { name, dir };
  }
  if (spec === '') throw new Error('--tokenizer needs a directory');
  return { name: null, dir: spec };
}

/** The sampling defaults of generation_config.json, where the directory has one. */
export function generationDefaults(dir: string): GenerationDefaults {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(join(dir, 'generation_config.json'), 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new Error(`${join(dir, 'generation_config.json')}: ${(err as Error).message}`);
  }
  const out: GenerationDefaults = {};
  if (typeof doc !== 'object' || doc === null) return out;
  const d = doc as Record<string, unknown>;
  // transformers' GenerationConfig: do_sample false means greedy whatever temperature says.
  if (d.do_sample === false) out.temperature = 0;
  else if (typeof d.temperature === 'number') out.temperature = d.temperature;
  if (typeof d.top_p === 'number') out.top_p = d.top_p;
  if (typeof d.top_k === 'number') out.top_k = d.top_k;
  if (typeof d.repetition_penalty === 'number') out.repetition_penalty = d.repetition_penalty;
  return out;
}

interface Entry {
  tokenizer: Tokenizer;
  defaults: GenerationDefaults;
}

export class ServedModels {
  private readonly named = new Map<string, Entry>();
  private readonly unnamed: Entry | null = null;

  constructor(specs: readonly string[]) {
    for (const raw of specs) {
      const spec = parseTokenizerSpec(raw);
      const entry: Entry = { tokenizer: loadTokenizer(spec.dir, spec.name ?? undefined), defaults: generationDefaults(spec.dir) };
      if (spec.name === null) {
        if (this.unnamed) throw new Error(`--tokenizer ${raw}: only one tokenizer may go without a model name (use NAME=DIR)`);
        this.unnamed = entry;
      } else {
        if (this.named.has(spec.name)) throw new Error(`--tokenizer ${raw}: model ${spec.name} is named twice`);
        this.named.set(spec.name, entry);
      }
    }
  }

  get empty(): boolean {
    return this.named.size === 0 && this.unnamed === null;
  }

  /** The names served, given the names the workers report. */
  names(reported: Iterable<string>): string[] {
    const out = [...this.named.keys()];
    if (this.unnamed) for (const r of reported) if (!this.named.has(r) && !out.includes(r)) out.push(r);
    return out;
  }

  /** The model a request names (or, when it names none, the only one served). */
  lookup(model: string | undefined, reported: readonly string[]): ServedModel {
    if (model === undefined) {
      const all = this.names(reported);
      if (all.length === 1) return this.lookup(all[0], reported);
      throw new OpenAiError(400, all.length === 0 ? 'model: Field required (no worker reports a model yet)' : `model: Field required (served: ${all.join(', ')})`, 'model');
    }
    const named = this.named.get(model);
    if (named) return { name: model, tokenizer: named.tokenizer, defaults: named.defaults };
    if (this.unnamed && reported.includes(model)) return { name: model, tokenizer: this.unnamed.tokenizer, defaults: this.unnamed.defaults };
    // vLLM's wording (serving_engine.py _check_model).
    throw new OpenAiError(404, `The model \`${model}\` does not exist.`, 'model', 'NotFoundError');
  }
}
