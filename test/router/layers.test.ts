// The router's layers (docs/architecture.md "Layers"): read the import statements of every
// router/**/*.ts and hold the rules that keep each layer knowing only the layer below it.
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const ROUTER = join(ROOT, 'router');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Static imports, re-exports and dynamic imports, as repository paths (router/...). */
export function importsOf(text: string, file: string): string[] {
  const out: string[] = [];
  const re = /(?:^|[\s;])(?:import|export)\s[^;]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const spec = m[1] ?? m[2] ?? m[3]!;
    if (!spec.startsWith('.')) continue; // packages and node: builtins
    out.push(relative(ROOT, resolve(dirname(file), spec)).split('\\').join('/'));
  }
  return out;
}

const FILES = sources(ROUTER).map((f) => ({ file: relative(ROOT, f).split('\\').join('/'), imports: importsOf(readFileSync(f, 'utf8'), f) }));

/** The folders of one format or front: only the registries (format/registry.ts, fronts.ts) name them. */
const ONE_FORMAT = /^router\/(format\/(sglang|vllm|openai)|sglang-api)\//;

function violations(pick: (file: string) => boolean, banned: RegExp): string[] {
  const out: string[] = [];
  for (const f of FILES) if (pick(f.file)) for (const i of f.imports) if (banned.test(i)) out.push(`${f.file} imports ${i}`);
  return out;
}

describe('router layers', () => {
  it('reads the imports it checks', () => {
    expect(importsOf("import { a } from './x.ts';\nimport type { B } from '../y/z.ts';\nexport { c } from './w.ts';\nconst m = await import('./v.ts');", join(ROUTER, 'upstream/q.ts')))
      .toEqual(['router/upstream/x.ts', 'router/y/z.ts', 'router/upstream/w.ts', 'router/upstream/v.ts']);
    expect(FILES.find((f) => f.file === 'router/upstream/attempt.ts')!.imports).toContain('router/format/sse.ts');
  });

  it('router/index.ts wires only: under 200 lines, and it names no format or front', () => {
    const text = readFileSync(join(ROUTER, 'index.ts'), 'utf8');
    expect(text.split('\n').length).toBeLessThan(200);
    expect(violations((f) => f === 'router/index.ts', ONE_FORMAT)).toEqual([]);
  });

  it('router/discovery/ knows the pool and types only; only router/index.ts wires it in', () => {
    // A source reports to the reconciler, which adds and removes pool workers and hands drains to
    // whoever index.ts gives it: no edge, loop, transport, format folder or telemetry at run time.
    expect(violations((f) => f.startsWith('router/discovery/'), /^router\/(http|migration|upstream|sglang-api|otel)\/|^router\/(telemetry|metrics|index)\.ts$/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/discovery/'), ONE_FORMAT)).toEqual([]);
    expect(violations((f) => f !== 'router/index.ts' && !f.startsWith('router/discovery/'), /^router\/discovery\//)).toEqual([]);
  });

  it('router/replicas/ knows identities, metrics and the whole router only; only router/index.ts wires it in', () => {
    // A replica is a whole router (replica-main.ts starts one); the rest of the folder is the
    // processes, their identity and what they pass between them, never the request path. Of the
    // edge, it knows the route table and the worker writes' data (http/worker-writes.ts: the
    // primary keeps them for replicas that start later); cache_aware's prefix batches cross it
    // unread, so it needs nothing of the pool.
    expect(violations((f) => f.startsWith('router/replicas/'), /^router\/(pool|upstream|format|sglang-api|discovery|otel|trace)\/|^router\/(openai-api|responses-api|openai-workers|telemetry)\.ts$/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/replicas/'), /^router\/http\/(?!routes\.ts$|worker-writes\.ts$)/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/replicas/') && f !== 'router/replicas/replica-main.ts', /^router\/index\.ts$/)).toEqual([]);
    expect(violations((f) => f !== 'router/index.ts' && !f.startsWith('router/replicas/'), /^router\/replicas\//)).toEqual([]);
  });

  it('router/upstream/ imports nothing from the loop (router/migration/) or one format\'s folder', () => {
    expect(violations((f) => f.startsWith('router/upstream/'), /^router\/migration\//)).toEqual([]);
    expect(violations((f) => f.startsWith('router/upstream/'), ONE_FORMAT)).toEqual([]);
  });
});
