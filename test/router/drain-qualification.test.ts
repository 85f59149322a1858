// The drain qualification (without a cluster): three simulated workers on
// distinct loopback addresses and one port (as pods have distinct IPs), ~20 s streams on each;
// one worker is drained with a 6 s grace and SIGKILLed at its deadline. Every stream's answer is
// exact (the simulator's deterministic model), none errors, every stream of the drained worker was
// continued elsewhere before the kill (its attempt row says `drained`, error_kind `drain`), the
// moves were staggered over the window, and the drained worker received no request after the
// drain began (its own record of rids). Once through POST /workers/:id/drain, once by taking the
// worker out of a watched --worker-file that gives it the grace. Real router and worker processes.
import { expect, it, type TestContext } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, stream, traceRows, waitUntil, type RouterProc, type StreamResult } from './harness/procs.ts';

const HOSTS = ['127.0.0.11', '127.0.0.12', '127.0.0.13'];
const HOSTS_FILE = ['127.0.0.21', '127.0.0.22', '127.0.0.23'];
const GRACE_MS = 6_000;
const MARGIN_MS = 1_000;

/** What one run started; stopped when its test ends. */
interface Run {
  clusters: SimCluster[];
  router: RouterProc | null;
  dir: string | null;
}

/** Stopped by the test's own hook: with concurrent tests the global one would be another test's. */
function newRun(ctx: TestContext): Run {
  const run: Run = { clusters: [], router: null, dir: null };
  ctx.onTestFinished(async () => {
    await run.router?.stop();
    await Promise.all(run.clusters.map((c) => c.stop()));
    if (run.dir) rmSync(run.dir, { recursive: true, force: true });
  });
  return run;
}

/** One worker per loopback address, all on the port the first one got (a pod's port). */
async function threeWorkers(run: Run, hosts: string[], tokenIntervalMs: number): Promise<string[]> {
  const first = await startCluster({ workers: 1, host: hosts[0], port: 0, tokenIntervalMs });
  run.clusters.push(first);
  const port = first.workers()[0]!.port;
  run.clusters.push(...(await Promise.all(hosts.slice(1).map((host) => startCluster({ workers: 1, host, port, tokenIntervalMs })))));
  const urls = run.clusters.map((c) => c.workers()[0]!.url);
  expect(urls).toEqual(hosts.map((h) => `http://${h}:${port}`));
  return urls;
}

interface WorkerRow {
  id: string;
  url: string;
  health: string;
  drain_deadline?: number;
  discovery?: { source: string };
}

async function workers(url: string): Promise<WorkerRow[]> {
  return ((await (await fetch(`${url}/workers`)).json()) as { workers: WorkerRow[] }).workers;
}

function prompt(i: number): number[] {
  return Array.from({ length: 10 + i }, (_, j) => 200 + ((i * 7919 + j * 104729) % 30000));
}

/**
 * Start `n` streams of `tokens` tokens, then `drain()` worker 0 once every stream has tokens;
 * SIGKILL worker 0 at the deadline the router reports; then check the answers and rows.
 */
async function qualify(run: Run, urls: string[], n: number, tokens: number, drain: (victim: WorkerRow) => Promise<void>, label: string): Promise<void> {
  const r = run.router!;
  const clusters = run.clusters;
  const victimUrl = urls[0]!;
  await waitUntil(async () => (await workers(r.url)).filter((w) => w.health === 'healthy').length === 3, 15_000, 'three healthy workers');
  const victim = (await workers(r.url)).find((w) => w.url === victimUrl)!;
  let withTokens = 0;
  let everyStreamGoing!: () => void;
  const going = new Promise<void>((resolve) => (everyStreamGoing = resolve));
  const params = { max_new_tokens: tokens, ignore_eos: true };
  const answers: Promise<StreamResult>[] = Array.from({ length: n }, (_, i) =>
    stream(r.url, { rid: `${label}-${i}`, input_ids: prompt(i), sampling_params: params }, (k) => {
      if (k === 1 && ++withTokens === n) everyStreamGoing();
    }),
  );
  await going;

  const ridsBefore = new Set((await clusters[0]!.stats(0)).rids);
  const drainedAt = Date.now();
  await drain(victim);
  const deadline = (await workers(r.url)).find((w) => w.id === victim.id)?.drain_deadline;
  expect(deadline, 'the drained worker shows its deadline').toBeGreaterThan(drainedAt);
  expect(deadline).toBeLessThanOrEqual(drainedAt + GRACE_MS + 1000);
  // A new request during the drain goes elsewhere.
  const late = stream(r.url, { rid: `${label}-late`, input_ids: prompt(99), sampling_params: { max_new_tokens: 8, ignore_eos: true } });

  await new Promise((res) => setTimeout(res, Math.max(0, deadline! - Date.now())));
  const ridsAtKill = (await clusters[0]!.stats(0)).rids;
  const killedAt = Date.now();
  await clusters[0]!.kill(0);

  const results = await Promise.all(answers);
  const lateResult = await late;
  expect(lateResult.error).toBeNull();
  expect(lateResult.done).toBe(true);

  // Nothing new reached the drained worker after the drain began.
  expect(ridsAtKill.filter((rid) => !ridsBefore.has(rid))).toEqual([]);

  let moved = 0;
  const moveTimes: number[] = [];
  for (const [i, a] of results.entries()) {
    expect(a.error, `stream ${i}`).toBeNull();
    expect(a.done).toBe(true);
    expect(a.frames.at(-1)!.output_ids).toEqual(runModel(prompt(i), params).output_ids);
    const rows = await traceRows(r.url, `request=${label}-${i}&kind=attempt`);
    const first = rows.find((x) => x.attempt === 0)!;
    if (first.worker !== victimUrl) {
      expect(rows).toHaveLength(1);
      continue;
    }
    // Continued before the kill, by the drain, not by a failure.
    expect(first.outcome).toBe('drained');
    expect(first.error_kind).toBe('drain');
    expect(first.ended_at as number).toBeLessThan(killedAt);
    expect(first.ended_at as number).toBeLessThan(deadline!);
    const cont = rows.find((x) => x.attempt === 1)!;
    expect(cont.worker).not.toBe(victimUrl);
    expect(cont.replayed_tokens).toBe(first.tokens);
    expect(cont.outcome).toBe('finished');
    expect(rows).toHaveLength(2);
    moveTimes.push(first.ended_at as number);
    moved++;
  }
  expect(moved, 'streams that were on the drained worker').toBeGreaterThanOrEqual(2);
  // Staggered: the moves are spread over the window (deadline - margin - drain), not at once
  // (planned a window/n apart; at least half of one step apart, allowing for a loaded machine).
  const spread = Math.max(...moveTimes) - Math.min(...moveTimes);
  expect(spread).toBeGreaterThanOrEqual((GRACE_MS - MARGIN_MS) / moved / 2);
  // The worker is gone from the pool at its deadline; the drain's moves are counted apart.
  await waitUntil(async () => !(await workers(r.url)).some((w) => w.url === victimUrl), 5_000, 'the drained worker removed');
  const metrics = await (await fetch(`${r.url}/metrics`)).text();
  expect(Number(/^baton_drain_migrations_total (\d+)/m.exec(metrics)?.[1])).toBe(moved);
  expect(Number(/^baton_migrations_total\{migration_type="ongoing_request"\} (\d+)/m.exec(metrics)?.[1])).toBe(0);
  console.log(`drain qualification (${label}): ${n}/${n} streams exact, ${moved} moved off the drained worker over ${spread} ms, none after the drain reached it`);
}

// The two runs go side by side (their own addresses: the second uses 127.0.0.21-23): the
// streams are paced by the clock, so together they take as long as the longer one.
it.concurrent('drain through POST /workers/:id/drain: every stream exact and continued before the SIGKILL at the deadline', async (ctx) => {
  const run = newRun(ctx);
  const urls = await threeWorkers(run, HOSTS, 50);
  const router = run.router = await spawnRouter([...urls.flatMap((u) => ['--worker', u]), '--policy', 'round_robin', '--health-interval-ms', '500', '--drain-margin-ms', String(MARGIN_MS)]);
  // ~20 s streams: 400 tokens at 50 ms.
  await qualify(run, urls, 9, 400, async (victim) => {
    const res = await fetch(`${router.url}/workers/${victim.id}/drain`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grace_ms: GRACE_MS }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as WorkerRow).health).toBe('draining');
  }, 'api');
}, 120_000);

it.concurrent('drain of a worker taken out of --worker-file with drain_grace_ms: the same guarantees', async (ctx) => {
  const run = newRun(ctx);
  const urls = await threeWorkers(run, HOSTS_FILE, 50);
  run.dir = mkdtempSync(join(tmpdir(), 'baton-drain-'));
  const file = join(run.dir, 'workers.yaml');
  const write = (list: string[]) => writeFileSync(file, `drain_grace_ms: ${GRACE_MS}\nworkers:\n${list.map((u) => `  - ${u}\n`).join('')}`);
  write(urls);
  const router = run.router = await spawnRouter(['--worker-file', file, '--worker-file-interval-ms', '300', '--policy', 'round_robin', '--health-interval-ms', '500', '--drain-margin-ms', String(MARGIN_MS)]);
  expect((await workers(router.url)).map((w) => w.discovery?.source)).toEqual(['file', 'file', 'file']);
  // ~12 s streams: 240 tokens at 50 ms.
  await qualify(run, urls, 6, 240, async (victim) => {
    write(urls.slice(1));
    await waitUntil(async () => (await workers(router.url)).find((w) => w.id === victim.id)?.health === 'draining', 3_000, 'the file drain');
  }, 'file');
  // The source's state is shown where it is looked for: /workers and /metrics.
  const listing = (await (await fetch(`${router.url}/workers`)).json()) as { discovery: { source: string; state: string; workers: number }[] };
  expect(listing.discovery).toEqual([expect.objectContaining({ source: 'file', state: 'synced', workers: 2 })]);
  const metrics = await (await fetch(`${router.url}/metrics`)).text();
  expect(metrics).toMatch(/^baton_discovery_state\{source="file",state="synced"\} 1$/m);
  expect(metrics).toMatch(/^baton_discovery_state\{source="file",state="stale"\} 0$/m);
  expect(metrics).toMatch(/^baton_discovery_workers\{source="file"\} 2$/m);
}, 120_000);
