// `baton serve --replicas 2` as a user runs it: a real process with a small simulated cluster and
// its traffic, the router as two replicas under a primary, the dashboard from a hub over them.
// The hub shows both replicas connected and routing; a simulated worker killed through the
// dashboard's API is marked; SIGTERM leaves no process of the tree behind.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LiveState } from '../../host/contract.ts';

const ROOT = join(import.meta.dirname, '../..');

/** Every descendant of `pid` now (ps reads /proc): the helpers, the workers, the replicas. */
function descendants(pid: number): number[] {
  const table = execFileSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' })
    .trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number) as [number, number]);
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of table) if (parent === p) { out.push(child); walk(child); }
  };
  walk(pid);
  return out;
}

/** The processes among `pids` still running, as ps describes them (a zombie has ended: not counted). */
function running(pids: number[]): string[] {
  let listed: string;
  try {
    listed = execFileSync('ps', ['-o', 'pid=,stat=,args=', '-p', pids.join(',')], { encoding: 'utf8' });
  } catch {
    return []; // ps exits 1 when it lists none
  }
  return listed.trim().split('\n').filter((l) => l !== '' && !/^\s*\d+\s+Z/.test(l));
}

let child: ChildProcess | null = null;
let tree: number[] = [];
afterAll(() => {
  // A failed run must not leak its processes either.
  for (const line of running([...(child?.pid ? [child.pid] : []), ...tree])) process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL');
});

describe('baton serve --replicas 2', () => {
  it('merges both replicas on the hub, kills a simulated worker through the dashboard, and stops every process on SIGTERM', async () => {
    const serve = spawn(process.execPath, [join(ROOT, 'bin/baton.js'), 'serve', '--replicas', '2', '--port', '0', '--sim', '2', '--token-interval-ms', '5'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    child = serve;
    let out = '';
    serve.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
    serve.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
    const exited = new Promise<number | null>((resolve) => serve.once('exit', (code) => resolve(code)));
    const url = await new Promise<string>((resolve, reject) => {
      const check = () => {
        const m = /dashboard on (http:\/\/\S+?)\/?\n/.exec(out);
        if (m) resolve(m[1]!);
      };
      serve.stdout!.on('data', check);
      void exited.then((code) => reject(new Error(`baton serve exited with ${code} before printing its URL:\n${out}`)));
    });
    const routerUrl = /listening on (http:\/\/127\.0\.0\.1:\d+) \(2 replicas by (node:cluster|SO_REUSEPORT)\)/.exec(out)?.[1];
    expect(routerUrl).toBeDefined();
    // The page names the replicas' shared port (its curl commands go there), not the hub's.
    expect(((await (await fetch(`${url}/api/snapshot`)).json()) as { routerUrl: string }).routerUrl).toBe(routerUrl);
    const live = async () => (await (await fetch(`${url}/api/live`)).json()) as LiveState;

    // Both replicas followed, each routing some of the traffic sent to the one shared port.
    await expect.poll(async () => (await live()).hub?.routers.map((r) => `${r.state} ${r.replica !== null} ${r.requests > 0}`), { timeout: 30_000, interval: 200 })
      .toEqual(['connected true true', 'connected true true']);
    tree = descendants(serve.pid!);
    expect(tree.length).toBeGreaterThanOrEqual(6); // 2 helpers, 2 workers, 2 replicas

    // The workers the replicas were given by URL are the host's simulated ones, with their controls.
    const before = await live();
    expect(before.router!.workers.map((w) => [w.simulated, w.sim_index])).toEqual([[true, 0], [true, 1]]);
    const killed = await fetch(`${url}/api/sim/0/kill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(killed.status).toBe(200);
    const victim = before.sim!.find((w) => w.index === 0)!.url;
    await expect.poll(async () => {
      const l = await live();
      const row = l.hub!.workers.find((w) => w.url === victim)!;
      return { sim: l.sim!.find((w) => w.index === 0)!.fault, healthyOn: `${row.healthy} of ${row.of}`, kill: l.faults.some((f) => f.kind === 'kill' && f.url === victim) };
    }, { timeout: 15_000, interval: 200 }).toEqual({ sim: 'kill', healthyOn: '0 of 2', kill: true });
    // The traffic generator's settings through the hub, as on a host of one router.
    const traffic = await fetch(`${url}/api/traffic`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rate: 1 }) });
    expect(((await traffic.json()) as { settings: { rate: number } }).settings.rate).toBe(1);

    tree = descendants(serve.pid!);
    serve.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out).not.toMatch(/while stopping/);
    expect(running(tree)).toEqual([]);
  }, 90_000);
});
