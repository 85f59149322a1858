// `baton bench`: what Baton costs next to direct calls, a bare Node proxy and nginx.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { intFlag, parseFlags, UsageError } from '../lib/args.ts';
import { BenchRun, type BenchOptions } from '../bench/run.ts';
import { buildComparisons, checks, markdown, ratios, sideBySide, spliceIntoDoc, summarize, verdictLines } from '../bench/report.ts';
import { parseRefs } from '../bench/ref-build.ts';
import { openAiTable, openAiVerdicts, runOpenAiBench, type OpenAiBenchResult } from '../bench/openai.ts';
import { parsersTable, parsersVerdicts, runParsersBench, type ParsersBenchResult } from '../bench/openai-parsers.ts';
import { chatLogTable, chatLogVerdicts, runChatLogBench, type ChatLogBenchResult } from '../bench/chat-log.ts';
import type { TargetName } from '../bench/targets.ts';
import type { BaseWorkloadName, Layout, WireFormat } from '../bench/workloads.ts';

const USAGE = `usage: baton bench [options]

Runs each workload against each target in one run, interleaved, and reports requests/s, tokens/s,
proxy CPU per request and per token, added latency versus direct, and memory per stream.

  targets:   direct (to the workers), bare (a pass-through Node proxy), nginx (when installed), baton
  workloads: W1 short, W2 logprob-heavy, W3 many streams, W4 migration gap (Baton only)
  formats:   SGLang workers and requests (W1-W4), vLLM ones (W1, W2, W4: W1-vllm, W2-vllm, W4-vllm)

options:
  --quick                  ~3 minutes: one round, shorter runs, fewer W3 streams and W4 kills
  --workers N              simulated workers for W1, W2, W4 (default 3)
  --w3-workers N           simulated workers for W3 (default: one per 450 streams, at least 4)
  --streams N              W3 concurrent streams (default 2000; quick 400)
  --token-interval-ms T    W3 token interval (default 100; quick 40)
  --rounds N               rounds of W1 and W2 x every target (default 4; quick 1)
  --w3-rounds N            rounds of W3 x every target (default 2; quick 1)
  --duration-ms T          one measured run of W1 or W2 (default 4000; quick 2500)
  --w3-duration-ms T       new streams start for this long in one W3 run (default 5000; quick 3000)
  --warmup-ms T            warm-up per target and workload (default 6000; quick 700)
  --kills N                W4 worker kills with the workers paced (default 100; quick 5)
  --kills-saturated N      W4 worker kills at W1's pace, the box saturated (default 30; quick 4)
  --w4-interval-ms T       token interval of W4's paced part (default 5)
  --w4-budget-ms T         most time W4 may take, both parts (default 130000; quick 25000)
  --targets LIST           comma-separated subset of direct,bare,nginx,baton
  --only LIST              comma-separated subset of W1,W2,W3,W4,openai,openai-parsers,chat-log
                           (openai: the OpenAI front's row, CPU per streamed token against the
                           native path; openai-parsers: chat with --tool-call-parser and
                           --reasoning-parser against chat without; chat-log: the chat answer
                           log's cost per chunk against the chunk's frame, in process; all
                           three after the workloads;
                           cache: bench/cache.ts, cache-aware routing's W5, W1 by policy and
                           W4S, only when named, e.g. --only cache --quick; replicas:
                           bench/replicas.ts, W1 through --replicas 1 and 2: CPU per request,
                           throughput, projection per core, only when named; hub: bench/hub.ts,
                           3 routers at 25 req/s each through the dashboard hub for 60 s,
                           a forced reconnect and a SIGKILL, only when named)
  --format F               sglang, vllm or both (default both; vllm runs W1, W2 and W4, no W3)
  --layout L               shared, pinned or both (default both): shared, every process on every
                           CPU; pinned, the proxy under test alone on CPU 1 and the workers, the
                           load generator and the bench on CPU 0 (taskset), rows W1-pinned,
                           W2-pinned, W3-pinned (and vLLM's); W4 has its own two parts
  --pinned-rounds N        rounds of W1 and W2 on the pinned layout (default 2; quick 1); W3's
                           pinned rounds are --w3-rounds
  --compare-ref REVS       other Baton builds, comma-separated git revisions (e.g. 6f100f1,HEAD),
                           each a target beside this checkout's Baton in SGLang's W1 and W2: a
                           temporary git worktree under the temp dir, node_modules linked to this
                           checkout's, removed at the end; adds a side-by-side table and a
                           ≤ 1.05x check per build. SGLang's W1 and W2 then run at least 3
                           rounds after a 6 s warm-up, --quick too (unless --rounds, --warmup-ms)
  --nginx PATH             nginx binary (default: looked up in the usual places)
  --docs / --no-docs       write the table into docs/benchmarks.md (default: full runs only)
  -h, --help               show this help`;

const TARGETS: TargetName[] = ['direct', 'bare', 'nginx', 'baton'];
const WORKLOADS: BaseWorkloadName[] = ['W1', 'W2', 'W3', 'W4'];
/**
 * `--only` also names the OpenAI front's rows (bench/openai.ts, bench/openai-parsers.ts), which
 * run after the workloads, and `cache` (bench/cache.ts: W5, W1 by policy, W4S), which runs last
 * and only when named: its own processes, tables and verdicts.
 */
const ONLY_NAMES = [...WORKLOADS, 'openai', 'openai-parsers', 'chat-log', 'cache', 'replicas', 'hub'] as const;
const FORMATS: Record<string, WireFormat[]> = { sglang: ['sglang'], vllm: ['vllm'], both: ['sglang', 'vllm'] };
const LAYOUTS: Record<string, Layout[]> = { shared: ['shared'], pinned: ['pinned'], both: ['shared', 'pinned'] };

function listFlag<T extends string>(name: string, value: string | undefined, allowed: T[]): T[] {
  if (value === undefined) return allowed;
  const items = value.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = items.filter((s) => !(allowed as string[]).includes(s));
  if (items.length === 0 || bad.length > 0) throw new UsageError(`--${name} takes a comma-separated subset of ${allowed.join(',')}, got '${value}'`);
  return allowed.filter((a) => items.includes(a));
}

export function optionsFromArgv(argv: string[]): (BenchOptions & { docs: boolean; openai: boolean; openaiParsers: boolean; chatLog: boolean; cache: boolean; replicas: boolean; hub: boolean }) | null {
  const v = parseFlags(argv, {
    quick: { type: 'boolean' },
    workers: { type: 'string' },
    'w3-workers': { type: 'string' },
    streams: { type: 'string' },
    'token-interval-ms': { type: 'string' },
    rounds: { type: 'string' },
    'w3-rounds': { type: 'string' },
    'duration-ms': { type: 'string' },
    'w3-duration-ms': { type: 'string' },
    'warmup-ms': { type: 'string' },
    kills: { type: 'string' },
    'kills-saturated': { type: 'string' },
    'w4-interval-ms': { type: 'string' },
    'w4-budget-ms': { type: 'string' },
    targets: { type: 'string' },
    only: { type: 'string' },
    format: { type: 'string' },
    'compare-ref': { type: 'string' },
    layout: { type: 'string' },
    'pinned-rounds': { type: 'string' },
    nginx: { type: 'string' },
    docs: { type: 'boolean' },
    'no-docs': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (v.help) return null;
  const quick = v.quick ?? false;
  if (v.docs && v['no-docs']) throw new UsageError('--docs and --no-docs contradict each other');
  const streams = intFlag('streams', v.streams, quick ? 400 : 2000, 1);
  const formats = FORMATS[v.format ?? 'both'];
  const layouts = LAYOUTS[v.layout ?? 'both'];
  if (!layouts) throw new UsageError(`--layout takes shared, pinned or both, got '${v.layout}'`);
  if (!formats) throw new UsageError(`--format takes sglang, vllm or both, got '${v.format}'`);
  let compareRefs: string[];
  try {
    compareRefs = parseRefs(v['compare-ref']);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const targets = listFlag('targets', v.targets, TARGETS);
  const rounds = intFlag('rounds', v.rounds, quick ? 1 : 4, 1);
  const warmupMs = intFlag('warmup-ms', v['warmup-ms'], quick ? 700 : 6000, 0);
  if (compareRefs.length > 0 && !targets.includes('baton')) throw new UsageError('--compare-ref runs other builds beside Baton: --targets must include baton');
  if (compareRefs.length > 0 && !formats.includes('sglang')) throw new UsageError('--compare-ref runs in SGLang\'s W1 and W2: --format must be sglang or both');
  return {
    quick,
    workers: intFlag('workers', v.workers, 3, 1),
    w3Workers: intFlag('w3-workers', v['w3-workers'], Math.max(4, Math.ceil(streams / 450)), 1),
    w3Streams: streams,
    w3IntervalMs: intFlag('token-interval-ms', v['token-interval-ms'], quick ? 40 : 100, 1),
    rounds,
    w3Rounds: intFlag('w3-rounds', v['w3-rounds'], quick ? 1 : 2, 1),
    durationMs: intFlag('duration-ms', v['duration-ms'], quick ? 2500 : 4000, 100),
    w3DurationMs: intFlag('w3-duration-ms', v['w3-duration-ms'], quick ? 3000 : 5000, 100),
    warmupMs,
    kills: intFlag('kills', v.kills, quick ? 5 : 100, 0),
    killsSaturated: intFlag('kills-saturated', v['kills-saturated'], quick ? 4 : 30, 0),
    w4IntervalMs: intFlag('w4-interval-ms', v['w4-interval-ms'], 5, 1),
    w4BudgetMs: intFlag('w4-budget-ms', v['w4-budget-ms'], quick ? 25_000 : 130_000, 2000),
    targets,
    workloads: listFlag('only', v.only, [...ONLY_NAMES]).filter((w): w is BaseWorkloadName => (WORKLOADS as string[]).includes(w)),
    openai: listFlag('only', v.only, [...ONLY_NAMES]).includes('openai'),
    openaiParsers: listFlag('only', v.only, [...ONLY_NAMES]).includes('openai-parsers'),
    chatLog: listFlag('only', v.only, [...ONLY_NAMES]).includes('chat-log'),
    cache: v.only !== undefined && listFlag('only', v.only, [...ONLY_NAMES]).includes('cache'),
    replicas: v.only !== undefined && listFlag('only', v.only, [...ONLY_NAMES]).includes('replicas'),
    hub: v.only !== undefined && listFlag('only', v.only, [...ONLY_NAMES]).includes('hub'),
    formats,
    compareRefs,
    // A 5 % difference between builds needs the JIT settled (Baton's cost per request halves over
    // its first ~15 s of traffic) and a median over rounds, quick or not.
    compareRounds: v.rounds !== undefined ? rounds : Math.max(rounds, 3),
    compareWarmupMs: v['warmup-ms'] !== undefined ? warmupMs : Math.max(warmupMs, 6000),
    nginxPath: v.nginx,
    layouts,
    pinnedRounds: intFlag('pinned-rounds', v['pinned-rounds'], quick ? 1 : 2, 1),
    docs: v.docs ?? (v['no-docs'] ? false : !quick),
  };
}

const RESULTS_DIR = fileURLToPath(new URL('../bench/results/', import.meta.url));
const DOC = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));

export async function run(argv: string[]): Promise<void> {
  const opts = optionsFromArgv(argv);
  if (!opts) {
    console.log(USAGE);
    return;
  }
  // `--only replicas` alone: its script only (bench/replicas.ts), none of the workloads' tables.
  if (opts.replicas && opts.workloads.length === 0 && !opts.openai && !opts.openaiParsers && !opts.chatLog && !opts.cache) return runBenchScript('replicas.ts', opts.quick);
  const bench = new BenchRun(opts, (line) => console.log(line));
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\nbaton bench: ${sig}, stopping every process it started...`);
    void bench.cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  process.once('exit', () => bench.killNow());

  let out;
  let openai: OpenAiBenchResult | null = null;
  let parsers: ParsersBenchResult | null = null;
  let chatLog: ChatLogBenchResult | null = null;
  try {
    out = await bench.run();
    if (opts.openai) openai = await runOpenAiBench({ quick: opts.quick, workers: opts.workers, say: (line) => console.log(line) });
    if (opts.openaiParsers) parsers = await runParsersBench({ quick: opts.quick, workers: opts.workers, say: (line) => console.log(line) });
    if (opts.chatLog) chatLog = runChatLogBench({ quick: opts.quick, say: (line) => console.log(line) });
  } catch (err) {
    if (interrupted) return;
    console.error(`baton bench: ${(err as Error).message}`);
    process.exit(1);
  }
  const figures = summarize(out.samples);
  const table = markdown(out.info, figures, out.gaps, out.nginxPresent, out.samples, out.memory, out.buildPairs, out.pinnedMissing, out.sideBySide) + (openai ? `\n\n${openAiTable(openai)}` : '') + (parsers ? `\n\n${parsersTable(parsers)}` : '') + (chatLog ? `\n\n${chatLogTable(chatLog)}` : '');
  const verdicts = checks(figures, out.gaps, out.nginxPresent, out.samples, out.memory, out.buildPairs, out.pinnedMissing, out.sideBySide);
  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = out.info.date.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const jsonPath = `${RESULTS_DIR}${stamp}.json`;
  const json = { ...out, figures, ratios: ratios(figures, out.samples), builds: buildComparisons(figures, out.samples, out.buildPairs), sideBySideRatios: sideBySide(out.sideBySide), checks: verdicts, openai, parsers, chatLog };
  writeFileSync(jsonPath, JSON.stringify(json, null, 1));
  console.log(`\n${table}\n`);
  // One line per target, last, so that a quick run ends with what it found.
  console.log([...verdictLines(verdicts), ...(openai ? openAiVerdicts(openai) : []), ...(parsers ? parsersVerdicts(parsers) : []), ...(chatLog ? chatLogVerdicts(chatLog) : [])].join('\n'));
  console.log('');
  console.log(`results: ${jsonPath}`);
  if (opts.docs) {
    let doc = '';
    try {
      doc = readFileSync(DOC, 'utf8');
    } catch {
      doc = '# Benchmarks\n';
    }
    writeFileSync(DOC, spliceIntoDoc(doc, table));
    console.log(`table written to ${DOC}`);
  }
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  process.off('SIGHUP', onSignal);
  if (opts.cache) await runBenchScript('cache.ts', opts.quick);
  if (opts.replicas) await runBenchScript('replicas.ts', opts.quick);
  if (opts.hub) await runBenchScript('hub.ts', false); // its 60 s is the acceptance run: no quick form
}

/** bench/cache.ts, bench/replicas.ts or bench/hub.ts in its own process (a script: its flags, tables and verdict lines). */
async function runBenchScript(name: string, quick: boolean): Promise<void> {
  const script = fileURLToPath(new URL(`../bench/${name}`, import.meta.url));
  const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), script, ...(quick ? ['--quick'] : [])], { stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) {
    console.error(`baton bench: bench/${name} exited with ${code}`);
    process.exitCode = 1;
  }
}
