// A router process with /events consumers that never read (paused sockets) streams as fast as
// one without them, and its memory stays bounded. Timings are compared as a ratio of runs
// interleaved with and without the slow consumers, so a busy machine slows both alike.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { generate, scrape, spawnRouter, type RouterProcess } from './harness.ts';
import { total } from './prom-text.ts';

let cluster: SimCluster;
let router: RouterProcess;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 2 });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--health-interval-ms', '1000']);
});
afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

let round = 0;
/** 16 concurrent streams of 100 tokens; the wall time until the last one ends. */
async function streams(): Promise<number> {
  const r = round++;
  const t0 = performance.now();
  const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => generate(router.url, { id: `sc-${r}-${i}`, stream: true, maxNewTokens: 100 })));
  for (const a of answers) expect(a.tokens).toBe(100);
  return performance.now() - t0;
}

/** Subscribes to /events, sees the stream open, then never reads another byte. */
function slowConsumer(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => s.write(`GET /events HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`));
    s.once('data', (d: Buffer) => {
      s.pause();
      const head = d.toString('latin1');
      if (head.startsWith('HTTP/1.1 200') && head.includes('text/event-stream')) resolve(s);
      else reject(new Error(`/events did not open: ${head.slice(0, 200)}`));
    });
    s.on('error', reject);
  });
}

describe('a slow /events consumer', () => {
  it('does not slow the router, whose memory stays bounded', async () => {
    await streams(); // warm up
    const heap = async () => total(await scrape(router.url), 'baton_nodejs_heap_size_used_bytes');
    const heapBefore = await heap();
    const without: number[] = [];
    const withSlow: number[] = [];
    // Without, with, with, without: a drift in the machine's load weighs on both sides alike.
    for (const slow of [false, true, true, false]) {
      const consumers = slow ? await Promise.all([0, 1, 2].map(() => slowConsumer(router.url))) : [];
      try {
        (slow ? withSlow : without).push(await streams());
      } finally {
        for (const c of consumers) c.destroy();
      }
    }
    const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
    const ratio = sum(withSlow) / sum(without);
    const heapAfter = await heap();
    console.log(`streams without slow consumers ${without.map((x) => x.toFixed(0)).join('/')} ms, with ${withSlow.map((x) => x.toFixed(0)).join('/')} ms, ratio ${ratio.toFixed(2)}; router heap ${(heapBefore / 1e6).toFixed(1)} -> ${(heapAfter / 1e6).toFixed(1)} MB`);
    expect(ratio).toBeLessThan(2);
    expect(heapAfter - heapBefore).toBeLessThan(64 * 1024 * 1024);
  });
});
