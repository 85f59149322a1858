// @huggingface/jinja, loaded with its class fields compiled as assignments.
//
// Why: every value the interpreter makes while it renders (hundreds per chat request: strings,
// booleans, integers, objects) is a subclass of RuntimeValue, whose `type` and `value` are class
// fields that every subclass defines again. V8 (Node 20) defines class fields through a store
// that is megamorphic here (one base initializer, ~15 subclass shapes), and that store goes to
// the runtime: ~460 ns a value, against ~57 ns when the same fields are plain assignments in the
// constructor (measured, 2026-12-01). Rendering Qwen3's chat template took 57-70 µs with the
// package as published and 24-28 µs with its fields lowered; under the OpenAI bench's load that
// was ~9 % of the chat path's CPU.
//
// So the package's own CommonJS file is compiled once, when the first template is needed, by
// esbuild (which tsx already runs for the whole code base) with TypeScript's
// `useDefineForClassFields: false`: fields with initializers become assignments at the top of
// their constructors, fields without one disappear. The package uses neither accessors named
// like its fields nor property enumeration order of its values, so it renders the same
// (test/tokenizer/chat-template.test.ts renders both and compares). Anything going wrong here
// (no esbuild, a package that changed shape) falls back to the package as published.

import * as published from '@huggingface/jinja';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { runInThisContext } from 'node:vm';

export type Jinja = typeof published;

let module: { jinja: Jinja; lowered: boolean } | null = null;

/** The jinja module to render with: the lowered build, else the published one. */
export function jinja(): Jinja {
  return (module ??= load()).jinja;
}

/** Whether jinja() is the lowered build (tests, and the docs' figures, depend on it). */
export function jinjaLowered(): boolean {
  return (module ??= load()).lowered;
}

/** The published module itself, to compare with. */
export const publishedJinja: Jinja = published;

function load(): { jinja: Jinja; lowered: boolean } {
  try {
    const require = createRequire(import.meta.url);
    const file = require.resolve('@huggingface/jinja');
    const { transformSync } = require('esbuild') as typeof import('esbuild');
    const { code } = transformSync(readFileSync(file, 'utf8'), {
      loader: 'ts',
      format: 'cjs',
      sourcefile: file,
      tsconfigRaw: { compilerOptions: { useDefineForClassFields: false } },
    });
    const exports: Record<string, unknown> = {};
    const cjs = { exports };
    const wrapper = runInThisContext(`(function (exports, require, module) {${code}\n})`, { filename: file }) as (e: unknown, r: NodeJS.Require, m: unknown) => void;
    wrapper(exports, require, cjs);
    const lowered = cjs.exports as unknown as Jinja;
    if (typeof lowered.Template !== 'function' || typeof lowered.Environment !== 'function' || typeof lowered.Interpreter !== 'function') throw new Error('unexpected shape');
    return { jinja: lowered, lowered: true };
  } catch {
    return { jinja: published, lowered: false };
  }
}
