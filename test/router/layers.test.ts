// The router's layers (docs/architecture.md "Layers"): read the import statements of every
// router/**/*.ts and hold the rules that keep each layer knowing only the layer below it.
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { ROOT, importsOf, sources, specifiersOf } from '../harness/imports.ts';

const ROUTER = join(ROOT, 'router');

/** Every repository file `entries` load at run time, following relative imports (router/, host/, ...); `eager`: not through import(). */
function runtimeClosure(entries: string[], only: 'runtime' | 'eager' = 'runtime'): Set<string> {
  const seen = new Set(entries);
  const todo = [...entries];
  for (let f = todo.pop(); f !== undefined; f = todo.pop()) {
    for (const i of importsOf(readFileSync(join(ROOT, f), 'utf8'), join(ROOT, f), only)) {
      if (!seen.has(i)) {
        seen.add(i);
        todo.push(i);
      }
    }
  }
  return seen;
}

const repoFiles = (dir: string) => sources(join(ROOT, dir)).map((f) => relative(ROOT, f).split('\\').join('/'));

const FILES = sources(ROUTER).map((f) => {
  const text = readFileSync(f, 'utf8');
  return { file: relative(ROOT, f).split('\\').join('/'), imports: importsOf(text, f), specifiers: specifiersOf(text).map((s) => s.spec) };
});

/** The folders of one format or front: only the registries (formats/registry.ts, fronts/index.ts) name them. */
const ONE_FORMAT = /^router\/(formats\/(?!registry\.ts$)[^/]+\/|fronts\/(?!index\.ts$))/;

function violations(pick: (file: string) => boolean, banned: RegExp): string[] {
  const out: string[] = [];
  for (const f of FILES) if (pick(f.file)) for (const i of f.imports) if (banned.test(i)) out.push(`${f.file} imports ${i}`);
  return out;
}

/** The most lines one function (or method, or arrow) in router/ may take, and one class. */
const MAX_FUNCTION_LINES = 150;
const MAX_CLASS_LINES = 350;

/** What a function-like node is called in a report: its name, or `(anonymous)`. */
function nameOf(node: ts.Node, sf: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText(sf);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent !== undefined && (ts.isVariableDeclaration(parent) || ts.isPropertyDeclaration(parent) || ts.isPropertyAssignment(parent))) return parent.name.getText(sf);
  return '(anonymous)';
}

/** Every function over MAX_FUNCTION_LINES and class over MAX_CLASS_LINES in `text`, as `file kind name (N lines)`. */
export function oversized(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: string[] = [];
  const lines = (node: ts.Node): number => sf.getLineAndCharacterOfPosition(node.getEnd()).line - sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
  const visit = (node: ts.Node): void => {
    const isClass = ts.isClassDeclaration(node) || ts.isClassExpression(node);
    const isFunction = ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined;
    if (isClass || isFunction) {
      const n = lines(node);
      if (n > (isClass ? MAX_CLASS_LINES : MAX_FUNCTION_LINES)) out.push(`${file} ${isClass ? 'class' : 'function'} ${nameOf(node, sf)} (${n} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

describe('router layers', () => {
  it('reads the imports it checks', () => {
    expect(importsOf("import { a } from './x.ts';\nimport type { B } from '../y/z.ts';\nexport { c } from './w.ts';\nconst m = await import('./v.ts');", join(ROUTER, 'upstream/q.ts')))
      .toEqual(['router/upstream/x.ts', 'router/y/z.ts', 'router/upstream/w.ts', 'router/upstream/v.ts']);
    expect(FILES.find((f) => f.file === 'router/upstream/attempt.ts')!.imports).toContain('router/core/sse.ts');
    const mixed = "import type { A } from './a.ts';\nimport { type B } from './b.ts';\nexport type { C } from './c.ts';\nimport { d } from './d.ts';\nconst e = await import('./e.ts');";
    expect(importsOf(mixed, join(ROUTER, 'q.ts'), 'runtime')).toEqual(['router/b.ts', 'router/d.ts', 'router/e.ts']);
    expect(importsOf(mixed, join(ROUTER, 'q.ts'), 'eager')).toEqual(['router/b.ts', 'router/d.ts']);
    expect(specifiersOf("import cluster from 'node:cluster';\nimport type { X } from './x.ts';")).toEqual([{ spec: 'node:cluster', typeOnly: false, dynamic: false }, { spec: './x.ts', typeOnly: true, dynamic: false }]);
  });

  it('router/index.ts wires only: under 200 lines, and it names no format or front', () => {
    const text = readFileSync(join(ROUTER, 'index.ts'), 'utf8');
    expect(text.split('\n').length).toBeLessThan(200);
    expect(violations((f) => f === 'router/index.ts', ONE_FORMAT)).toEqual([]);
  });

  it('router/discovery/ knows the pool and types only; only router/index.ts wires it in', () => {
    // A source reports to the reconciler, which adds and removes pool workers and hands drains to
    // whoever index.ts gives it: no edge, loop, transport, format folder or telemetry at run time.
    expect(violations((f) => f.startsWith('router/discovery/'), /^router\/(http|migration|upstream|fronts|otel)\/|^router\/(telemetry|metrics|index)\.ts$/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/discovery/'), ONE_FORMAT)).toEqual([]);
    expect(violations((f) => f !== 'router/index.ts' && !f.startsWith('router/discovery/'), /^router\/discovery\//)).toEqual([]);
  });

  it('router/replicas/ knows identities, metrics and the whole router only; only router/index.ts wires it in', () => {
    // A replica is a whole router (replica-main.ts starts one); the rest of the folder is the
    // processes, their identity and what they pass between them, never the request path. Of the
    // edge, it knows the route table and the worker writes' data (http/worker-writes.ts: the
    // primary keeps them for replicas that start later); cache_aware's prefix batches cross it
    // unread, so it needs nothing of the pool.
    expect(violations((f) => f.startsWith('router/replicas/'), /^router\/(pool|upstream|core|formats|fronts|parsers|discovery|otel|trace)\/|^router\/telemetry\.ts$/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/replicas/'), /^router\/http\/(?!routes\.ts$|worker-writes\.ts$)/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/replicas/') && f !== 'router/replicas/replica-main.ts', /^router\/index\.ts$/)).toEqual([]);
    expect(violations((f) => f !== 'router/index.ts' && !f.startsWith('router/replicas/'), /^router\/replicas\//)).toEqual([]);
  });

  it('router/replicas/: only the spawners start processes, and they know nothing but the channel; only primary.ts picks one', () => {
    // The supervisor (restarts, crash loops) and the reload coordinator reach a process through
    // spawner.ts's Child alone, whichever way the port is shared (node:cluster, SO_REUSEPORT).
    const SPAWNERS = /^router\/replicas\/(cluster|reuseport)-spawner\.ts$/;
    const started = FILES.filter((f) => !SPAWNERS.test(f.file) && f.specifiers.some((s) => /^(node:)?(cluster|child_process)$/.test(s)));
    expect(started.map((f) => f.file)).toEqual([]);
    const seam = (f: string) => SPAWNERS.test(f) || f === 'router/replicas/spawner.ts';
    expect(violations(seam, /^router\/(?!replicas\/(spawner|ipc)\.ts$)/)).toEqual([]);
    expect(violations((f) => f !== 'router/replicas/primary.ts', /^router\/replicas\/(cluster|reuseport)-spawner\.ts$/)).toEqual([]);
    expect(violations((f) => f.startsWith('router/replicas/'), /^router\/replicas\/primary\.ts$/)).toEqual([]);
  });

  it('telemetry and the hub do not load the pool or its policies at run time', () => {
    // What they need of the router's edge (worker URLs, the config's error, loopback) lives in
    // modules of its own that import nothing, so that the pool stays the router's alone.
    const leaves = ['router/config-error.ts', 'router/worker-url.ts', 'router/loopback.ts'];
    expect(FILES.filter((f) => leaves.includes(f.file)).flatMap((f) => f.specifiers.map((s) => `${f.file} imports ${s}`))).toEqual([]);
    const telemetry = repoFiles('router').filter((f) => f === 'router/telemetry.ts' || f.startsWith('router/otel/'));
    const hub = repoFiles('host/hub');
    for (const entries of [telemetry, hub]) {
      expect(entries.length).toBeGreaterThan(0);
      expect([...runtimeClosure(entries)].filter((f) => f.startsWith('router/pool/') || f === 'router/config.ts')).toEqual([]);
    }
  });

  it('`baton serve --router` runs its hub without loading the router, the pool or the policies', () => {
    // cli/serve.ts loads the router and the app through import() when it runs them; what it loads
    // before it picks a mode is the hub's too: of the pool, only the policies' names that the
    // config checks (pool/policies/names.ts, import-free).
    const eager = [...runtimeClosure(['cli/serve.ts'], 'eager')];
    expect(eager).toContain('router/config.ts');
    expect(eager.filter((f) => (f.startsWith('router/pool/') && f !== 'router/pool/policies/names.ts') || f === 'router/index.ts')).toEqual([]);
    expect(FILES.find((f) => f.file === 'router/pool/policies/names.ts')!.specifiers).toEqual([]);
  });

  it('router/upstream/ imports nothing from the loop (router/migration/) or one format\'s folder', () => {
    expect(violations((f) => f.startsWith('router/upstream/'), /^router\/migration\//)).toEqual([]);
    expect(violations((f) => f.startsWith('router/upstream/'), ONE_FORMAT)).toEqual([]);
  });

  it('router/core/ is the bottom: it imports nothing of the router outside itself, not even a type', () => {
    expect(violations((f) => f.startsWith('router/core/'), /^router\/(?!core\/)/)).toEqual([]);
  });

  it('a format knows the core (and the tokenizer) only, never another format, a front, the loop or the pool', () => {
    expect(violations((f) => f.startsWith('router/formats/') && f !== 'router/formats/registry.ts', /^router\/(?!core\/|tokenizer\/|formats\/)/)).toEqual([]);
    for (const f of FILES.filter((x) => /^router\/formats\/[^/]+\//.test(x.file))) {
      const own = f.file.split('/').slice(0, 3).join('/') + '/';
      expect(f.imports.filter((i) => i.startsWith('router/formats/') && !i.startsWith(own)), f.file).toEqual([]);
    }
  });

  it('below the fronts, a format is reached through formats/registry.ts only; only fronts/index.ts and index.ts reach the fronts', () => {
    expect(violations((f) => !/^router\/(formats|fronts)\//.test(f), /^router\/formats\/(?!registry\.ts$)/)).toEqual([]);
    expect(violations((f) => !f.startsWith('router/fronts/') && f !== 'router/index.ts', /^router\/fronts\//)).toEqual([]);
  });

  it('the loop (router/migration/) knows no format, front or edge; the pool and the transport know no loop', () => {
    expect(violations((f) => f.startsWith('router/migration/'), /^router\/(formats|fronts|http|parsers|discovery)\//)).toEqual([]);
    expect(violations((f) => /^router\/(pool|upstream)\//.test(f), /^router\/(migration|http|fronts)\//)).toEqual([]);
  });

  it('a format\'s name is spelled in router/formats/ and in at most 3 files outside it', () => {
    // Adding a format is a folder and a registry line: the rest of the router reads what it knows
    // of a format (its name, defaults, labels) off the WireFormat, through formats/registry.ts.
    const names = readdirSync(join(ROUTER, 'formats'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(names).toEqual(expect.arrayContaining(['sglang', 'vllm']));
    const outside = FILES.filter((f) => !f.file.startsWith('router/formats/') && spellsFormatName(readFileSync(join(ROOT, f.file), 'utf8'), names)).map((f) => f.file);
    expect(outside.length, `files outside router/formats/ that spell a format name: ${outside.join(', ')}`).toBeLessThanOrEqual(3);
    // The check sees a name in code, quoted or as a key, and not in a comment or inside a longer word.
    expect(spellsFormatName("const f = w.format ?? 'sglang';", names)).toBe(true);
    expect(spellsFormatName('const paths = { vllm: "/inference/v1/generate" };', names)).toBe(true);
    expect(spellsFormatName("// the 'sglang' default\n/* or `vllm` */ const m = 'vllm:num_requests_running';", names)).toBe(false);
  });

  it("the pool's parts know none of each other: only the facade (pool/worker-pool.ts) composes them, and the pool names no format", () => {
    // registry (which workers), health (checks, probes, load, blame), selector (pick, policies),
    // facts (defaults, limits) and spare upkeep reach each other only through the facade's hooks.
    const part = /^router\/pool\/(registry|health|selector|facts|spare-upkeep)\.ts$/;
    expect(violations((f) => part.test(f), /^router\/pool\/(registry|health|selector|facts|spare-upkeep|worker-pool)\.ts$/)).toEqual([]);
    expect(FILES.filter((f) => part.test(f.file)).length).toBe(5);
    // What is per format (its load report, its P/D servers, the default) is the format's, reached through formats/registry.ts.
    const named = FILES.filter((f) => f.file.startsWith('router/pool/') && /'(sglang|vllm)'/.test(readFileSync(join(ROOT, f.file), 'utf8'))).map((f) => f.file);
    expect(named).toEqual([]);
  });

  it('every trace row is made by the loop\'s report (router/migration/report.ts), pass-through requests\' too', () => {
    // Telemetry writes the rows it is handed (attemptEnded, requestFinished); only the report hands them.
    const makers = sources(ROUTER).filter((f) => /\btelemetry\.(attemptEnded|requestFinished)\(/.test(readFileSync(f, 'utf8')));
    expect(makers.map((f) => relative(ROOT, f).split('\\').join('/'))).toEqual(['router/migration/report.ts']);
  });

  it('the tool and reasoning parsers (router/parsers/) know the core only', () => {
    expect(violations((f) => f.startsWith('router/parsers/'), /^router\/(?!parsers\/|core\/)/)).toEqual([]);
  });

  it(`no function in router/ is over ${MAX_FUNCTION_LINES} lines and no class over ${MAX_CLASS_LINES}`, () => {
    const found = sources(ROUTER).flatMap((f) => oversized(relative(ROOT, f).split('\\').join('/'), readFileSync(f, 'utf8')));
    expect(found).toEqual([]);
    // The check sees a long function, a long method and a long class, and counts their lines.
    const body = (n: number): string => Array.from({ length: n }, (_, i) => `  x += ${i};`).join('\n');
    expect(oversized('t.ts', `function f() {\n${body(149)}\n}\nconst g = () => {\n${body(148)}\n};`)).toEqual(['t.ts function f (151 lines)']);
    expect(oversized('t.ts', `class C {\n  m() {\n${body(150)}\n  }\n${'  a = 1;\n'.repeat(197)}}`)).toEqual(['t.ts class C (351 lines)', 't.ts function m (152 lines)']);
  });

  it('no circle of more than two among the top-level folders and root files, counting run-time imports', () => {
    expect(circles(runtimeEdges()).filter((c) => c.length > 2)).toEqual([]);
    // The check sees a circle when there is one.
    expect(circles(new Map([['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['a'])]]))).toEqual([['a', 'b', 'c']]);
  });
});

/**
 * Whether code (comments left out) spells one of `names` as a format's name: a string of it alone
 * ('sglang', "vllm", `vllm`) or an object key (`{ sglang: ... }`).
 */
function spellsFormatName(text: string, names: readonly string[]): boolean {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
  const alt = names.join('|');
  return new RegExp(`(['"\`])(?:${alt})\\1|[{,]\\s*(?:${alt})\\s*:`).test(code);
}

/** The top-level folder (`pool/`) or root file (`config.ts`) of a router path. */
function room(file: string): string {
  const parts = file.split('/').slice(1);
  return parts.length === 1 ? parts[0]! : `${parts[0]}/`;
}

/** Edges between rooms from the imports that stay at run time (importsOf's `runtime`). */
function runtimeEdges(): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>();
  for (const f of FILES) {
    for (const target of importsOf(readFileSync(join(ROOT, f.file), 'utf8'), join(ROOT, f.file), 'runtime')) {
      if (!target.startsWith('router/')) continue;
      const a = room(f.file);
      const b = room(target);
      if (a === b) continue;
      if (!edges.has(a)) edges.set(a, new Set());
      edges.get(a)!.add(b);
    }
  }
  return edges;
}

/** Strongly connected components of more than one node (Tarjan), each sorted. */
function circles(edges: Map<string, Set<string>>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) out.push(c.sort());
    }
  };
  for (const v of new Set([...edges.keys(), ...[...edges.values()].flatMap((s) => [...s])])) if (!index.has(v)) visit(v);
  return out;
}
