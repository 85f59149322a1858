// Loading a tokenizer from a Hugging Face model directory: tokenizer.json (required),
// tokenizer_config.json (chat_template, bos/eos, clean_up_tokenization_spaces, model_max_length),
// generation_config.json (eos_token_id) and chat_template.jinja where present. Synchronous: it
// runs once per model at start-up (a few hundred ms for a 150k vocabulary, docs/tokenizer.md).

import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { HfTokenizer, type TokenizerFiles } from './hf-tokenizer.ts';
import type { Tokenizer } from './types.ts';

function readJson(path: string, required: boolean): Record<string, unknown> | null {
  if (!existsSync(path)) {
    if (required) throw new Error(`${path} is missing: a tokenizer directory needs tokenizer.json (a Hugging Face "fast" tokenizer)`);
    return null;
  }
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${path} must hold a JSON object`);
  return value as Record<string, unknown>;
}

/** The files of a model directory, parsed (errors name the file). */
export function readTokenizerFiles(dir: string): TokenizerFiles {
  if (!existsSync(dir)) throw new Error(`tokenizer directory ${dir} does not exist`);
  if (!statSync(dir).isDirectory()) throw new Error(`tokenizer directory ${dir} is not a directory`);
  const tokenizerJson = readJson(join(dir, 'tokenizer.json'), true)!;
  if (typeof tokenizerJson.model !== 'object' || tokenizerJson.model === null) throw new Error(`${join(dir, 'tokenizer.json')} has no "model": not a tokenizers file`);
  const templatePath = join(dir, 'chat_template.jinja');
  return {
    tokenizerJson,
    tokenizerConfig: readJson(join(dir, 'tokenizer_config.json'), false) ?? {},
    generationConfig: readJson(join(dir, 'generation_config.json'), false),
    chatTemplateFile: existsSync(templatePath) ? readFileSync(templatePath, 'utf8') : null,
  };
}

/**
 * The tokenizer of the model directory `dir`, registered for the served model `name` (default:
 * tokenizer_config's name_or_path, else the directory's name). Throws an Error naming the file
 * for a missing directory, a missing tokenizer.json or a file that is not valid JSON.
 */
export function loadTokenizer(dir: string, name?: string, opts: { now?: () => Date } = {}): Tokenizer {
  const files = readTokenizerFiles(dir);
  const fromConfig = files.tokenizerConfig.name_or_path;
  const served = name ?? (typeof fromConfig === 'string' && fromConfig !== '' ? fromConfig : basename(resolve(dir)));
  try {
    return new HfTokenizer(served, dir, files, opts.now);
  } catch (err) {
    throw new Error(`${join(dir, 'tokenizer.json')}: cannot build the tokenizer: ${(err as Error).message}`);
  }
}
