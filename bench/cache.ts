// The cache-aware bench, apart from `baton bench`: 
//
//   W5   many multi-turn conversations over a few shared system prompts, on 4 simulated workers
//        whose prefix caches (--max-total-tokens) cannot hold everything, prefilling one request
//        at a time (--serial-prefill): hit rate, TTFT, throughput and load share per worker for
//        cache_aware, least_inflight, round_robin, and an oracle that sends each request straight
//        to the worker whose cache (read through the simulator's control API) holds the longest
//        prefix of it.
//   W1   W1's requests (distinct 64-token prompts) through a router with least_inflight and one
//        with cache_aware, alternating in the same run: the router's CPU per request.
//   W4S  W5's conversations while workers are killed and restarted, through cache_aware with and
//        without continuation placement: each continuation's first-token delay (its attempt's
//        ttft_ms in the trace rows) and the tokens it found cached.
//
//   node --import tsx bench/cache.ts [--quick] [--only W5,W1,W4S] [--out FILE]
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { BENCH_DIR, ProcessGroup, waitForMessage } from './processes.ts';
import { startBaton, type Target } from './targets.ts';
import { treeCpuMicros } from './proc.ts';
import { workloads } from './workloads.ts';
import type { LoadgenCommand, RunCommand, RunResult } from './loadgen.ts';

const { values: args } = parseArgs({ options: { quick: { type: 'boolean' }, only: { type: 'string' }, out: { type: 'string' } } });
const quick = args.quick ?? false;
const only = new Set((args.only ?? 'W5,W1,W4S').split(','));

/** W5's shape. */
const W5 = {
  workers: 4,
  /** Per worker: the 4 system prompts and about 3 conversations; the run has ~100k distinct tokens. */
  cacheTokens: 8192,
  systemPrompts: 4,
  systemTokens: 512,
  /** A user message: 96 to 287 tokens. */
  userTokens: 96,
  userTokensSpread: 192,
  /** The user reads and types between turns: 50 to 349 ms. */
  thinkMs: 50,
  thinkSpreadMs: 300,
  answerTokens: 32,
  turns: 6,
  conversations: quick ? 64 : 160,
  concurrency: 16,
  prefillUs: 200,
  tokenIntervalMs: 4,
};

/** W4S: W5's conversations with a longer shared system prompt and fewer turns. */
const W4S = { ...W5, systemTokens: 1536, turns: 3 };

const say = (s: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

/** Deterministic ids: system prompt s, or conversation c's turn t user message. */
function ids(seed: number, n: number): number[] {
  const out = new Array<number>(n);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    out[i] = 3 + (x % 31_000);
  }
  return out;
}

interface TurnResult {
  ok: boolean;
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  worker: number;
}

/** One streamed /generate; the cumulative stream's last frame has the whole answer and meta_info. */
async function generate(pool: Pool, body: object): Promise<{ ok: boolean; ttftMs: number; output: number[]; cached: number; error?: string }> {
  const t0 = performance.now();
  let ttft = 0;
  try {
    const res = await pool.request({ path: '/generate', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
    let text = '';
    for await (const chunk of res.body) {
      if (ttft === 0) ttft = performance.now() - t0;
      text += (chunk as Buffer).toString('utf8');
    }
    if (res.statusCode !== 200) return { ok: false, ttftMs: ttft, output: [], cached: 0, error: `status ${res.statusCode}: ${text.slice(0, 600)}` };
    const frames = text.split('\n\n').filter((f) => f.startsWith('data: {'));
    const last = JSON.parse(frames[frames.length - 1]!.slice(6)) as { output_ids?: number[]; meta_info?: { cached_tokens?: number }; error?: unknown };
    if (!last.output_ids) return { ok: false, ttftMs: ttft, output: [], cached: 0, error: JSON.stringify(last).slice(0, 600) };
    return { ok: true, ttftMs: ttft, output: last.output_ids, cached: last.meta_info?.cached_tokens ?? 0 };
  } catch (err) {
    return { ok: false, ttftMs: ttft, output: [], cached: 0, error: (err as Error).message };
  }
}

interface Route {
  /** Where the request goes, and which worker index served it (-1: unknown, a router's). */
  pick(prompt: number[]): Promise<{ pool: Pool; worker: number; release: () => void }>;
}

/** The conversations: `concurrency` at a time, each turn's prompt = the last prompt + answer + a new user message. */
async function conversations(route: Route, n: number, concurrency: number, answerTokens = W5.answerTokens, shape: typeof W5 = W5): Promise<{ turns: TurnResult[]; wallMs: number; errors: string[] }> {
  const turns: TurnResult[] = [];
  const errors: string[] = [];
  let next = 0;
  const t0 = performance.now();
  const one = async (c: number) => {
    let prompt = ids(1_000_000 + (c % shape.systemPrompts), shape.systemTokens);
    for (let t = 0; t < shape.turns; t++) {
      const h = ids(c * 100 + t + 7, 2);
      if (t > 0) await new Promise((r) => setTimeout(r, shape.thinkMs + (h[0]! % shape.thinkSpreadMs)));
      prompt = [...prompt, ...ids(c * 100 + t + 7, shape.userTokens + (h[1]! % shape.userTokensSpread))];
      const r = await route.pick(prompt);
      const g = await generate(r.pool, { input_ids: prompt, sampling_params: { max_new_tokens: answerTokens, ignore_eos: true, temperature: 0 } });
      r.release();
      turns.push({ ok: g.ok, ttftMs: g.ttftMs, promptTokens: prompt.length, cachedTokens: g.cached, outputTokens: g.output.length, worker: r.worker });
      if (!g.ok) {
        if (errors.length < 5) errors.push(g.error ?? 'error');
        return;
      }
      prompt = [...prompt, ...g.output];
    }
  };
  // Conversations arrive spread over the first second, as users do, not all in one instant.
  await Promise.all(Array.from({ length: concurrency }, async (_, slot) => {
    await new Promise((r) => setTimeout(r, (slot * 1000) / concurrency));
    while (next < n) await one(next++);
  }));
  return { turns, wallMs: performance.now() - t0, errors };
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function flushAll(cluster: SimCluster): Promise<void> {
  for (const w of cluster.workers()) await (await fetch(`${w.url}/flush_cache`, { method: 'POST' })).text();
}

async function startedCounts(cluster: SimCluster): Promise<number[]> {
  return Promise.all(cluster.workers().map(async (w) => (await cluster.stats(w.index)).requestsStarted));
}

interface W5Row {
  policy: string;
  requests: number;
  errors: number;
  hitRate: number;
  ttftP50: number;
  ttftP99: number;
  tokensPerSec: number;
  share: number[];
  maxOverMean: number;
}

async function runW5(group: ProcessGroup): Promise<{ rows: W5Row[]; settings: typeof W5 }> {
  const cluster = await startCluster({ workers: W5.workers, maxTotalTokens: W5.cacheTokens, prefillUsPerToken: W5.prefillUs, tokenIntervalMs: W5.tokenIntervalMs, serialPrefill: true });
  const rows: W5Row[] = [];
  try {
    const urls = cluster.workers().map((w) => w.url);
    const direct = urls.map((u) => new Pool(u, { connections: W5.concurrency }));
    for (const policy of (process.env.CACHE_BENCH_POLICIES ?? 'cache_aware,least_inflight,round_robin,oracle').split(',')) {
      await flushAll(cluster);
      const before = await startedCounts(cluster);
      let router: Target | null = null;
      let route: Route;
      if (policy === 'oracle') {
        const inflight = urls.map(() => 0);
        route = {
          // The longest prefix any worker's cache holds now, read from the simulator; ties to
          // the worker with the fewest requests in flight.
          pick: async (prompt) => {
            const m = await Promise.all(urls.map((_, i) => cluster.cacheMatch(i, prompt)));
            let best = 0;
            for (let i = 1; i < urls.length; i++) if (m[i]! > m[best]! || (m[i] === m[best] && inflight[i]! < inflight[best]!)) best = i;
            inflight[best]!++;
            return { pool: direct[best]!, worker: best, release: () => void inflight[best]!-- };
          },
        };
      } else {
        router = await startBaton(group, urls, { flags: ['--policy', policy] });
        const pool = new Pool(router.urls[0]!, { connections: W5.concurrency });
        route = { pick: async () => ({ pool, worker: -1, release: () => undefined }) };
      }
      say(`W5 ${policy}: ${W5.conversations} conversations x ${W5.turns} turns, ${W5.concurrency} at a time`);
      const r = await conversations(route, W5.conversations, W5.concurrency);
      if (router) await router.stop();
      const after = await startedCounts(cluster);
      const share = after.map((a, i) => a - before[i]!);
      const mean = share.reduce((s, x) => s + x, 0) / share.length;
      const ok = r.turns.filter((t) => t.ok);
      const row: W5Row = {
        policy,
        requests: r.turns.length,
        errors: r.turns.length - ok.length,
        hitRate: ok.reduce((s, t) => s + t.cachedTokens, 0) / ok.reduce((s, t) => s + t.promptTokens, 0),
        ttftP50: pct(ok.map((t) => t.ttftMs), 50),
        ttftP99: pct(ok.map((t) => t.ttftMs), 99),
        tokensPerSec: ok.reduce((s, t) => s + t.outputTokens, 0) / (r.wallMs / 1000),
        share,
        maxOverMean: Math.max(...share) / mean,
      };
      if (r.errors.length) say(`  errors: ${r.errors.join(' | ')}`);
      if (process.env.CACHE_BENCH_TURNS) writeFileSync(`${process.env.CACHE_BENCH_TURNS}-${policy}.json`, JSON.stringify(r.turns));
      say(`  hit ${row.hitRate.toFixed(3)}  ttft p50 ${row.ttftP50.toFixed(1)} ms p99 ${row.ttftP99.toFixed(1)} ms  ${row.tokensPerSec.toFixed(0)} tok/s  share ${share.join('/')}`);
      rows.push(row);
    }
    await Promise.all(direct.map((p) => p.close()));
  } finally {
    await cluster.stop();
  }
  return { rows, settings: W5 };
}

/** W1 through least_inflight and cache_aware routers, alternating: router CPU per request. */
async function runW1(group: ProcessGroup): Promise<{ policy: string; cpuUsPerRequest: number; requests: number; errors: number }[]> {
  const cluster = await startCluster({ workers: 3, tokenIntervalMs: 0 });
  const lg = group.spawnNode('load generator', join(BENCH_DIR, 'loadgen-main.ts'), []);
  await waitForMessage(lg, (m) => ((m as { type?: string })?.type === 'ready' ? true : undefined));
  let id = 0;
  const run = async (cmd: Omit<RunCommand, 'type' | 'id'>) => {
    const msg: LoadgenCommand = { type: 'run', id: ++id, ...cmd };
    lg.child.send(msg);
    return waitForMessage(lg, (m) => ((m as RunResult)?.type === 'result' && (m as RunResult).id === msg.id ? (m as RunResult) : undefined), cmd.durationMs + 120_000);
  };
  const w1 = workloads({ streams: 1, w3IntervalMs: 1 }).W1;
  const urls = cluster.workers().map((w) => w.url);
  const policies = ['least_inflight', 'cache_aware'];
  const routers = new Map<string, Target>();
  for (const p of policies) routers.set(p, await startBaton(group, urls, { flags: ['--policy', p] }));
  const totals = new Map(policies.map((p) => [p, { cpu: 0, requests: 0, errors: 0 }]));
  const rounds = quick ? 2 : 4;
  const durationMs = quick ? 2500 : 4000;
  try {
    for (const p of policies) {
      say(`W1 warm-up ${p}`);
      await run({ urls: routers.get(p)!.urls, workload: w1, durationMs: quick ? 2000 : 6000, rampMs: 0, ridPrefix: `warm-${p}`, record: false });
    }
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? policies : [...policies].reverse();
      for (const p of order) {
        const t = routers.get(p)!;
        const cpu0 = treeCpuMicros(t.proc!.pid);
        const res = await run({ urls: t.urls, workload: w1, durationMs, rampMs: 0, ridPrefix: `w1-${p}-${r}`, record: false });
        const cpu = treeCpuMicros(t.proc!.pid) - cpu0;
        const tot = totals.get(p)!;
        tot.cpu += cpu;
        tot.requests += res.ok;
        tot.errors += res.errors;
        say(`W1 round ${r} ${p}: ${res.ok} requests, ${(cpu / Math.max(1, res.ok)).toFixed(0)} µs CPU/request`);
      }
    }
  } finally {
    for (const t of routers.values()) await t.stop();
    await group.stop(lg);
    await cluster.stop();
  }
  return policies.map((p) => {
    const t = totals.get(p)!;
    return { policy: p, cpuUsPerRequest: t.cpu / Math.max(1, t.requests), requests: t.requests, errors: t.errors };
  });
}

interface GapRow {
  placement: boolean;
  continuations: number;
  ttftP50: number;
  ttftP99: number;
  ttftMean: number;
  cachedMean: number;
  sentMean: number;
  errors: number;
  kills: number;
}

/** W5's conversations while workers die: the continuations' first-token delays, with and without placement. */
async function runW4S(group: ProcessGroup): Promise<GapRow[]> {
  const rows: GapRow[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'baton-cache-bench-'));
  const kills = quick ? 12 : 24;
  let cluster: SimCluster | null = null;
  try {
    for (const placement of [true, false]) {
      // A fresh cluster per part: the second part on the first's killed-and-restarted workers
      // failed ~130 turns with "no worker left" whichever part ran second, which made the order,
      // not the placement, decide the comparison.
      const c = await startCluster({ workers: W5.workers, maxTotalTokens: W5.cacheTokens, prefillUsPerToken: W5.prefillUs, tokenIntervalMs: 8, serialPrefill: true });
      cluster = c;
      const urls = c.workers().map((w) => w.url);
      const traceFile = join(dir, `trace-${placement}.jsonl`);
      // Balance thresholds at this run's scale (16 streams, not the gateway's batches of 64): a
      // hot system prompt spreads over several workers, so survivors hold it when one dies.
      // The breaker reopens in 500 ms, not 10 s: a kill every 1.2 s over 4 workers otherwise keeps
      // two of them open at once, and turns fail with "no worker left" (the breaker measured, not
      // the placement).
      const router = await startBaton(group, urls, { flags: ['--policy', 'cache_aware', '--continuation-placement', String(placement), '--balance-abs-threshold', '2', '--health-interval-ms', '100', '--bench-ms', '200', '--trace-file', traceFile], env: { BATON_CIRCUIT_OPEN_MS: '500' } });
      const pool = new Pool(router.urls[0]!, { connections: W5.concurrency });
      let stop = false;
      let done = 0;
      const killer = (async () => {
        // Let conversations settle on their workers first, then kill one worker at a time.
        await new Promise((r) => setTimeout(r, 1500));
        for (let k = 0; k < kills && !stop; k++) {
          const i = k % W5.workers;
          await c.kill(i);
          await new Promise((r) => setTimeout(r, 300));
          await c.restart(i);
          done++;
          await new Promise((r) => setTimeout(r, 900));
        }
      })();
      say(`W4S placement=${placement}: conversations with ${kills} kills`);
      const r = await conversations({ pick: async () => ({ pool, worker: -1, release: () => undefined }) }, quick ? 160 : 320, W5.concurrency, 64, W4S);
      stop = true;
      await killer;
      await router.stop();
      await pool.close();
      const rowsIn = readFileSync(traceFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      const cont = rowsIn.filter((x) => x.kind === 'attempt' && (x.attempt as number) > 0 && typeof x.ttft_ms === 'number');
      const ttft = cont.map((x) => x.ttft_ms as number);
      const row: GapRow = {
        placement,
        continuations: cont.length,
        ttftP50: pct(ttft, 50),
        ttftP99: pct(ttft, 99),
        ttftMean: ttft.reduce((s, x) => s + x, 0) / Math.max(1, ttft.length),
        cachedMean: cont.reduce((s, x) => s + ((x.cached_tokens as number | null) ?? 0), 0) / Math.max(1, cont.length),
        sentMean: cont.reduce((s, x) => s + (x.prompt_tokens_sent as number), 0) / Math.max(1, cont.length),
        errors: r.turns.filter((t) => !t.ok).length,
        kills: done,
      };
      if (r.errors.length) say(`  errors: ${r.errors.join(' | ')}`);
      say(`  ${row.continuations} continuations: first token p50 ${row.ttftP50.toFixed(1)} ms p99 ${row.ttftP99.toFixed(1)} ms mean ${row.ttftMean.toFixed(1)} ms; cached ${row.cachedMean.toFixed(0)} of ${row.sentMean.toFixed(0)} tokens sent; ${row.errors} client errors`);
      rows.push(row);
      cluster = null;
      await c.stop();
    }
  } finally {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

function report(out: { w5?: Awaited<ReturnType<typeof runW5>>; w1?: Awaited<ReturnType<typeof runW1>>; w4s?: GapRow[] }): string {
  const lines: string[] = [];
  if (out.w5) {
    const rows = out.w5.rows;
    const by = (p: string) => rows.find((r) => r.policy === p)!;
    lines.push('| W5 | hit rate | TTFT p50 ms | TTFT p99 ms | tokens/s | requests per worker | max / mean | errors |', '|---|--:|--:|--:|--:|--|--:|--:|');
    for (const r of rows) lines.push(`| ${r.policy} | ${r.hitRate.toFixed(3)} | ${r.ttftP50.toFixed(1)} | ${r.ttftP99.toFixed(1)} | ${r.tokensPerSec.toFixed(0)} | ${r.share.join(' / ')} | ${r.maxOverMean.toFixed(2)} | ${r.errors} |`);
    const ca = by('cache_aware');
    lines.push('', `verdict: ${ca.hitRate >= 0.9 * by('oracle').hitRate ? 'met' : 'MISSED'} W5 hit rate vs oracle: ${(ca.hitRate / by('oracle').hitRate).toFixed(2)} (target >= 0.9)`);
    lines.push(`verdict: ${ca.ttftP50 <= 0.6 * by('least_inflight').ttftP50 ? 'met' : 'MISSED'} W5 TTFT p50 vs least_inflight: ${(ca.ttftP50 / by('least_inflight').ttftP50).toFixed(2)} (target <= 0.6)`);
    lines.push(`verdict: ${ca.maxOverMean <= 1.5 ? 'met' : 'MISSED'} W5 cache_aware busiest worker / mean: ${ca.maxOverMean.toFixed(2)} (target <= 1.5)`);
  }
  if (out.w1) {
    const [li, ca] = [out.w1.find((r) => r.policy === 'least_inflight')!, out.w1.find((r) => r.policy === 'cache_aware')!];
    lines.push('', '| W1 | router CPU µs/request | requests | errors |', '|---|--:|--:|--:|');
    for (const r of out.w1) lines.push(`| ${r.policy} | ${r.cpuUsPerRequest.toFixed(0)} | ${r.requests} | ${r.errors} |`);
    lines.push('', `verdict: ${ca.cpuUsPerRequest <= 1.15 * li.cpuUsPerRequest ? 'met' : 'MISSED'} W1 CPU/request cache_aware vs least_inflight: ${(ca.cpuUsPerRequest / li.cpuUsPerRequest).toFixed(2)} (target <= 1.15)`);
  }
  if (out.w4s) {
    lines.push('', '| W4S (cache_aware) | continuations | first token p50 ms | p99 ms | mean ms | cached / sent tokens (mean) | kills | client errors |', '|---|--:|--:|--:|--:|--|--:|--:|');
    for (const r of out.w4s) lines.push(`| placement ${r.placement ? 'on' : 'off'} | ${r.continuations} | ${r.ttftP50.toFixed(1)} | ${r.ttftP99.toFixed(1)} | ${r.ttftMean.toFixed(1)} | ${r.cachedMean.toFixed(0)} / ${r.sentMean.toFixed(0)} | ${r.kills} | ${r.errors} |`);
    const [on, off] = [out.w4s.find((r) => r.placement)!, out.w4s.find((r) => !r.placement)!];
    lines.push('', `verdict: ${on.ttftP50 < off.ttftP50 ? 'met' : 'MISSED'} W4S continuation first-token p50 with placement below without: ${on.ttftP50.toFixed(1)} vs ${off.ttftP50.toFixed(1)} ms`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const group = new ProcessGroup();
  const stopAll = () => {
    group.killAllNow();
    process.exit(130);
  };
  process.once('SIGINT', stopAll);
  const out: Parameters<typeof report>[0] = {};
  try {
    if (only.has('W5')) out.w5 = await runW5(group);
    if (only.has('W1')) out.w1 = await runW1(group);
    if (only.has('W4S')) out.w4s = await runW4S(group);
  } finally {
    await group.stopAll();
  }
  const text = report(out);
  console.log(`\n${text}`);
  const file = args.out ?? join(BENCH_DIR, 'results', `cache-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, JSON.stringify({ quick, ...out }, null, 2));
  say(`wrote ${file}`);
}

await main();
