// A router whose log reader goes away (`baton router | head`, a log shipper restarted) keeps
// serving and still stops cleanly on SIGTERM: its next line would fail with EPIPE, which Node
// raises as an unhandled 'error' event (router/log-pipe.ts). Real processes: a lone router and a
// --replicas primary, whose stop logs a line per step.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter } from './harness/procs.ts';
import { pidAlive } from '../sim/helpers.ts';

let cluster: SimCluster;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 0 });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

async function generate(url: string): Promise<number> {
  const res = await fetch(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 4, ignore_eos: true } }) });
  await res.text();
  return res.status;
}

describe('a router without its log reader', () => {
  for (const replicas of [1, 2]) {
    it(`${replicas === 1 ? 'a lone router' : '--replicas 2'}: serves on, and SIGTERM stops it with exit code 0, nothing left`, async () => {
      const router = await spawnRouter([...(replicas > 1 ? ['--replicas', String(replicas)] : []), '--worker', cluster.workers()[0]!.url], 100_000);
      const pids = replicas > 1 ? ((await (await fetch(`${router.url}/replicas`)).json()) as { replicas: { pid: number }[] }).replicas.map((r) => r.pid) : [];
      // The reader goes away: every later line the router writes fails with EPIPE.
      router.proc.stdout!.destroy();
      router.proc.stderr!.destroy();
      expect(await generate(router.url)).toBe(200);
      const exited = new Promise<number | null>((r) => router.proc.once('exit', (code) => r(code)));
      router.proc.kill('SIGTERM');
      const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 20_000))]);
      if (code === 'hung') router.proc.kill('SIGKILL');
      expect(code).toBe(0);
      for (const pid of pids) expect(pidAlive(pid), `replica pid ${pid} outlived its primary`).toBe(false);
    }, 150_000);
  }
});
