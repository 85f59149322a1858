// Reading a tree's import statements, for the tests that hold its layers (test/router/layers.test.ts,
// test/sim/layers.test.ts): which files there are and what each imports.
import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export const ROOT = resolve(__dirname, '../..');

/** Every .ts file under `dir`, as absolute paths. */
export function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/**
 * Every specifier a file names (static imports, re-exports, dynamic imports) as written;
 * `typeOnly`: an `import type` or `export type`, erased at run time. An import of inline types
 * only (`import { type A }`) counts as a run-time one: with verbatimModuleSyntax it stays.
 */
export function specifiersOf(text: string): { spec: string; typeOnly: boolean; dynamic: boolean }[] {
  const out: { spec: string; typeOnly: boolean; dynamic: boolean }[] = [];
  const re = /(?:^|[\s;])(?:import|export)\s+(type\s)?[^;]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) out.push({ spec: m[2] ?? m[3] ?? m[4]!, typeOnly: m[1] !== undefined, dynamic: m[3] !== undefined });
  return out;
}

/**
 * Static imports, re-exports and dynamic imports, as repository paths (router/...). `runtime`:
 * not the type-only ones; `eager`: not the dynamic ones either (what loads with the file).
 */
export function importsOf(text: string, file: string, only: 'all' | 'runtime' | 'eager' = 'all'): string[] {
  return specifiersOf(text)
    .filter((s) => s.spec.startsWith('.')) // not packages and node: builtins
    .filter((s) => only === 'all' || (!s.typeOnly && !(only === 'eager' && s.dynamic)))
    .map((s) => relative(ROOT, resolve(dirname(file), s.spec)).split('\\').join('/'));
}
