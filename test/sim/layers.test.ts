// The simulator's place among the layers: cli/ starts the simulator (`baton sim`, `baton chaos`,
// `baton serve`), so sim/ imports nothing of cli/, directly or through another module. Read from
// the import statements of every sim/**/*.ts and what they import in turn.
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT, importsOf, sources } from '../harness/imports.ts';

const SIM = join(ROOT, 'sim');
const repoPath = (abs: string) => relative(ROOT, abs).split('\\').join('/');

const importsOfFile = (path: string) => importsOf(readFileSync(join(ROOT, path), 'utf8'), join(ROOT, path));

/** `file imports path` for each import of a sim/ file that names a cli/ module. */
function directCliImports(files: { file: string; imports: string[] }[]): string[] {
  return files.flatMap((f) => f.imports.filter((i) => i.startsWith('cli/')).map((i) => `${f.file} imports ${i}`));
}

/** The chains from sim/ files to a cli/ module, through modules outside sim/ (router/, ...). */
function cliChains(start: string[], read: (path: string) => string[]): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const queue: string[][] = start.map((f) => [f]);
  while (queue.length > 0) {
    const chain = queue.shift()!;
    const at = chain[chain.length - 1]!;
    if (at.startsWith('cli/')) {
      out.push(chain.join(' -> '));
      continue;
    }
    if (seen.has(at)) continue;
    seen.add(at);
    for (const next of read(at)) if (next.endsWith('.ts') && !seen.has(next)) queue.push([...chain, next]);
  }
  return out;
}

const FILES = sources(SIM).map((f) => ({ file: repoPath(f), imports: importsOf(readFileSync(f, 'utf8'), f) }));

describe('sim layers', () => {
  it('reads the imports it checks, and names a sim/ file that imports cli/', () => {
    const bad = "import { parseFlags } from '../cli/args.ts';\nimport type { X } from '../../cli/sim.ts';\nexport { y } from './z.ts';\nconst m = await import('../cli/main.ts');";
    const imports = importsOf(bad, join(SIM, 'vllm/q.ts'));
    expect(imports).toEqual(['sim/cli/args.ts', 'cli/sim.ts', 'sim/vllm/z.ts', 'sim/cli/main.ts']);
    expect(directCliImports([{ file: 'sim/vllm/q.ts', imports }])).toEqual(['sim/vllm/q.ts imports cli/sim.ts']);
    const top = importsOf(bad, join(SIM, 'q.ts'));
    expect(directCliImports([{ file: 'sim/q.ts', imports: top }])).toEqual(['sim/q.ts imports cli/args.ts', 'sim/q.ts imports cli/main.ts']);
    // Through another layer: sim/a.ts -> router/b.ts -> cli/c.ts.
    const graph: Record<string, string[]> = { 'sim/a.ts': ['router/b.ts'], 'router/b.ts': ['cli/c.ts'], 'cli/c.ts': [] };
    expect(cliChains(['sim/a.ts'], (p) => graph[p] ?? [])).toEqual(['sim/a.ts -> router/b.ts -> cli/c.ts']);
    // The real tree is read: the worker process's flags come from sim/flags.ts.
    expect(FILES.find((f) => f.file === 'sim/worker-main.ts')!.imports).toContain('sim/flags.ts');
  });

  it('no sim/ file imports cli/', () => {
    expect(directCliImports(FILES)).toEqual([]);
  });

  it('no sim/ file reaches cli/ through another module', () => {
    const read = (path: string) => (existsSync(join(ROOT, path)) ? importsOfFile(path) : []);
    expect(cliChains(FILES.map((f) => f.file), read)).toEqual([]);
  });
});
