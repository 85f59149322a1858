// The dashboard hub over several routers: N `baton router` processes on one simulated
// cluster, each sent `rate` streaming requests a second, followed by one hub (in this process).
// Midway the hub drops every router's event stream for a second and reopens it with
// Last-Event-ID (the forced reconnect). At the end: sequence gaps the hub counted (must be 0),
// the request rows it merged against the sum of the routers' own /traces (must be equal), and
// how fast it marks a SIGKILLed router lost and a restarted one back.
//
//   node --import tsx bench/hub.ts [--quick] [--seconds S] [--routers N] [--rate R]
//   node bin/baton.js bench --quick --only hub
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { startHub, type HubHandle, type HubStatus } from '../host/hub/server.ts';

const BIN = fileURLToPath(new URL('../bin/baton.js', import.meta.url));

export interface HubScenarioOptions {
  routers: number;
  /** Requests started per second at each router. */
  rate: number;
  seconds: number;
  /** Drop and reopen the hub's streams (held this long) at half time; 0: no forced reconnect. */
  reconnectHoldMs: number;
  /** After the load: SIGKILL router 0, time the hub's `lost`, restart it on its port, time `connected`. */
  killOne: boolean;
  say?: (line: string) => void;
}

export interface HubScenarioResult {
  routers: number;
  rate: number;
  seconds: number;
  sent: number;
  ok: number;
  failed: number;
  /** Why requests failed (status and message), with counts: the routers' answers, not the hub's. */
  failures: Record<string, number>;
  /** Events the hub received, over all routers. */
  events: number;
  /** Sequence numbers the hub missed (must be 0). */
  gaps: number;
  reconnects: number;
  /** Request rows the hub holds per router, and the routers' own /traces request counts. */
  hubRequests: number[];
  traceRequests: number[];
  /** Milliseconds from the SIGKILL to the hub's `lost`, and from the restart's listen to `connected`. */
  lostAfterMs: number | null;
  backAfterMs: number | null;
  /** From the last answer to the hub holding every router's rows (null: not within 2 minutes). */
  caughtUpMs: number | null;
  final: HubStatus;
}

interface RouterProc {
  url: string;
  port: number;
  proc: ChildProcess;
}

export async function spawnRouter(workers: string[], port = 0): Promise<RouterProc> {
  const proc = spawn(process.execPath, [BIN, 'router', '--port', String(port), ...workers.flatMap((w) => ['--worker', w])], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout! });
    rl.on('line', (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]!.replace(/\/$/, ''));
    });
    proc.once('exit', (code) => reject(new Error(`router exited with ${code}: ${output.join('')}`)));
    setTimeout(() => reject(new Error(`router did not start: ${output.join('')}`)), 30_000).unref();
  });
  return { url, port: Number(new URL(url).port), proc };
}

export async function stopProc(p: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill(signal);
  await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
  if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
}

async function traceRequests(url: string): Promise<number> {
  const res = await request(`${url}/traces?kind=request&format=jsonl`);
  const text = await res.body.text();
  return text.split('\n').filter((l) => l !== '').length;
}

async function waitFor(what: string, fn: () => boolean | Promise<boolean>, ms: number, stepMs = 20): Promise<number> {
  const t0 = Date.now();
  while (!(await fn())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
  return Date.now() - t0;
}

/** One streaming request, read to the end; null when it answered 200 and finished, else why not. */
async function one(url: string, n: number): Promise<string | null> {
  try {
    const res = await request(`${url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: [1, 2, 3, n % 1000], sampling_params: { max_new_tokens: 24, temperature: 0, ignore_eos: true }, stream: true }),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    if (res.statusCode === 200 && text.includes('[DONE]')) return null;
    const error = /"message":\s*"([^"]{0,80})/.exec(text)?.[1] ?? text.slice(0, 80);
    return `${res.statusCode} ${error}`;
  } catch (err) {
    return (err as Error).message;
  }
}

export async function runHubScenario(opts: HubScenarioOptions): Promise<HubScenarioResult> {
  const say = opts.say ?? (() => undefined);
  let cluster: SimCluster | null = null;
  const routers: RouterProc[] = [];
  let hub: HubHandle | null = null;
  try {
    cluster = await startCluster({ workers: 3, port: 0, tokenIntervalMs: 10 });
    const workers = cluster.workers().map((w) => w.url);
    for (let i = 0; i < opts.routers; i++) routers.push(await spawnRouter(workers));
    hub = await startHub({ routers: routers.map((r) => r.url) });
    const h = hub;
    await waitFor('every router connected', () => h.status().routers.every((r) => r.state === 'connected'), 10_000);
    say(`hub: ${opts.routers} routers connected, ${opts.rate} req/s each for ${opts.seconds} s`);

    let sent = 0;
    let ok = 0;
    let failed = 0;
    const failures = new Map<string, number>();
    const pending = new Set<Promise<void>>();
    const t0 = Date.now();
    let reconnected = opts.reconnectHoldMs <= 0;
    // On a schedule, not a timer per request: a late tick sends what is due, so the rate holds on a busy machine.
    let perRouter = 0;
    const total = opts.rate * opts.seconds;
    while (perRouter < total) {
      const due = Math.min(total, Math.floor(((Date.now() - t0) / 1000) * opts.rate) + 1);
      for (; perRouter < due; perRouter++) {
        for (const r of routers) {
          const p = one(r.url, sent++).then((why) => {
            if (why === null) ok++;
            else {
              failed++;
              failures.set(why, (failures.get(why) ?? 0) + 1);
            }
          });
          pending.add(p);
          void p.finally(() => pending.delete(p));
        }
      }
      if (!reconnected && Date.now() - t0 >= (opts.seconds * 1000) / 2) {
        reconnected = true;
        for (const link of h.hub.allLinks()) link.reconnect(opts.reconnectHoldMs);
        say(`hub: every stream dropped, reopened in ${opts.reconnectHoldMs} ms with Last-Event-ID`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all(pending);
    const traces = await Promise.all(routers.map((r) => traceRequests(r.url)));
    // On a loaded machine the hub (here in the load generator's process) may be behind: its
    // routers keep its events queued (and in their rings), so it catches up; how long is a figure.
    const caughtUpMs = await waitFor('the hub to hold every router\'s rows', () => h.status().routers.every((r, i) => r.requests >= traces[i]!), 120_000, 50).catch((err: Error) => {
      say(`hub: ${err.message}`);
      return null;
    });
    const status = h.status();
    if (failures.size > 0) say(`hub: failures ${JSON.stringify(Object.fromEntries([...failures].sort((a, b) => b[1] - a[1]).slice(0, 5)))}`);
    say(`hub: caught up ${caughtUpMs === null ? 'never' : `${caughtUpMs} ms`} after the load ended`);
    say(`hub: ${sent} sent, ${ok} ok, ${failed} failed; ${status.merged.events} events, ${status.merged.gaps} gaps; requests hub ${status.routers.map((r) => r.requests).join('+')} vs /traces ${traces.join('+')}`);

    let lostAfterMs: number | null = null;
    let backAfterMs: number | null = null;
    if (opts.killOne) {
      const victim = routers[0]!;
      const killedAt = Date.now();
      victim.proc.kill('SIGKILL');
      lostAfterMs = Date.now() - killedAt + (await waitFor('r0 lost', () => h.status().routers[0]!.state === 'lost', 10_000, 10));
      const again = await spawnRouter(workers, victim.port);
      routers[0] = again;
      const upAt = Date.now();
      await waitFor('r0 back', () => h.status().routers[0]!.state === 'connected', 10_000, 10);
      backAfterMs = Date.now() - upAt;
      say(`hub: r0 SIGKILLed, lost after ${lostAfterMs} ms; restarted, connected ${backAfterMs} ms after it listened`);
    }
    return {
      routers: opts.routers, rate: opts.rate, seconds: opts.seconds, sent, ok, failed, failures: Object.fromEntries(failures),
      events: status.merged.events, gaps: status.merged.gaps, reconnects: status.routers.reduce((n, r) => n + r.reconnects, 0),
      hubRequests: status.routers.map((r) => r.requests), traceRequests: traces, lostAfterMs, backAfterMs, caughtUpMs, final: h.status(),
    };
  } finally {
    await hub?.close();
    await Promise.all(routers.map((r) => stopProc(r.proc)));
    await cluster?.stop();
  }
}

export function hubTable(r: HubScenarioResult): string {
  return [
    '| routers × rate | duration | requests sent / ok | events at the hub | sequence gaps | reconnects (3 forced) | request rows: hub vs routers\' /traces | hub caught up after the load | lost after SIGKILL | back after restart |',
    '|---|---|---|---|---|---|---|---|---|---|',
    `| ${r.routers} × ${r.rate}/s | ${r.seconds} s | ${r.sent} / ${r.ok} | ${r.events} | ${r.gaps} | ${r.reconnects} | ${r.hubRequests.reduce((a, b) => a + b, 0)} vs ${r.traceRequests.reduce((a, b) => a + b, 0)} | ${r.caughtUpMs === null ? 'not in 2 min' : `${r.caughtUpMs} ms`} | ${r.lostAfterMs ?? '-'} ms | ${r.backAfterMs ?? '-'} ms |`,
  ].join('\n');
}

export function hubVerdicts(r: HubScenarioResult): string[] {
  const hubSum = r.hubRequests.reduce((a, b) => a + b, 0);
  const tracesSum = r.traceRequests.reduce((a, b) => a + b, 0);
  return [
    `${r.gaps === 0 ? 'PASS' : 'FAIL'} hub: ${r.gaps} sequence gaps over ${r.events} events (${r.reconnects} reconnects, the forced ones included)`,
    `${hubSum === tracesSum ? 'PASS' : 'FAIL'} hub: merged request rows ${hubSum} = routers' /traces ${tracesSum}`,
    ...(r.lostAfterMs !== null ? [`${r.lostAfterMs <= 2000 ? 'PASS' : 'FAIL'} hub: a SIGKILLed router marked lost after ${r.lostAfterMs} ms (≤ 2000)`] : []),
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({ options: { quick: { type: 'boolean' }, seconds: { type: 'string' }, routers: { type: 'string' }, rate: { type: 'string' } } });
  const result = await runHubScenario({
    routers: Number(values.routers ?? 3),
    rate: Number(values.rate ?? 25),
    seconds: Number(values.seconds ?? 60),
    reconnectHoldMs: 1000,
    killOne: true,
    say: (line) => console.log(line),
  });
  console.log(`\n${hubTable(result)}\n`);
  const verdicts = hubVerdicts(result);
  console.log(verdicts.join('\n'));
  if (verdicts.some((v) => v.startsWith('FAIL'))) process.exitCode = 1;
}
