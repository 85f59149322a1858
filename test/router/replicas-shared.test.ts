// What the replicas of one `baton router --replicas N` share (docs/replicas.md, "What replicas
// share"): real processes, a primary and two replicas over simulated SGLang workers.
//
// - cache_aware's picture of the workers' caches: a conversation's second turn that reaches the
//   other replica goes where its first turn's prefix is cached (every one of them, as through one
//   router), and /flush_cache on the shared port empties every replica's picture;
// - worker writes on the shared port (drain, add, remove, undrain) reach every replica, the answer
//   lists each replica's outcome, and a replica that starts later (a restart) gets them too;
// - a replica that does not answer makes the write's answer a 502 that names it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { reusePortSupported } from '../../router/replicas/primary.ts';
import { spawnRouter, traceRows, waitUntil, type RouterProc } from './harness/procs.ts';
import { parsePrometheusText, total } from '../observability/prom-text.ts';

interface Entry { id: string; index: number; epoch: number; pid: number; url: string; state: string }
interface ReplicasField { successful: string[]; failed: { replica: string; error: string }[]; pending: string[]; total_replicas: number; message: string }
interface WorkerBody { id: string; url: string; draining: boolean; drain_deadline?: number; replicas?: ReplicasField }

let cluster: SimCluster;
let router: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 4, port: 0, tokenIntervalMs: 1 });
  // The first three workers are the router's; the fourth is added through the worker API. Each
  // replica loads the sources through tsx: on a loaded 2-core machine two took ~30 s.
  router = await spawnRouter(['--replicas', '2', '--policy', 'cache_aware', '--health-interval-ms', '200', ...cluster.workers().slice(0, 3).flatMap((w) => ['--worker', w.url])], 100_000);
}, 120_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

/** The primary's list, through the shared port or (while a replica restarts) a live replica's own url. */
async function replicas(url = router.url): Promise<Entry[]> {
  const res = await call(url, 'GET', '/replicas');
  expect(res.status).toBe(200);
  return (JSON.parse(res.body) as { replicas: Entry[] }).replicas;
}

/**
 * One call on a connection of its own: a kept-alive connection to the shared port could belong
 * to a replica this test has stopped.
 */
function call(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  const text = body === undefined ? '' : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let out = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (out += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: out, headers: res.headers }));
    });
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
    req.end(text);
  });
}

async function generate(url: string, rid: string, ids: number[]): Promise<{ output_ids: number[]; meta_info: { cached_tokens: number } }> {
  const res = await call(url, 'POST', '/generate', { rid, input_ids: ids, sampling_params: { max_new_tokens: 8, ignore_eos: true } });
  expect(res.status, res.body).toBe(200);
  return JSON.parse(res.body) as { output_ids: number[]; meta_info: { cached_tokens: number } };
}

async function workersOf(url: string): Promise<WorkerBody[]> {
  const res = await call(url, 'GET', '/workers');
  expect(res.status).toBe(200);
  return (JSON.parse(res.body) as { workers: WorkerBody[] }).workers;
}

/** Pages of prefixes a replica has sent to the others, and received from them (its own /metrics). */
async function prefixPages(url: string): Promise<{ sent: number; received: number }> {
  const m = parsePrometheusText((await call(url, 'GET', '/metrics')).body);
  if (!m.has('baton_replica_prefix_pages_total')) return { sent: 0, received: 0 };
  return { sent: total(m, 'baton_replica_prefix_pages_total', { way: 'sent' }), received: total(m, 'baton_replica_prefix_pages_total', { way: 'received' }) };
}

/** Until each replica has received every page the other sent (at most `ms`; the assertions after it judge). */
async function exchanged(list: Entry[], ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const [a, b] = await Promise.all(list.map((r) => prefixPages(r.url)));
    if (a!.sent > 0 && a!.sent === b!.received && b!.sent === a!.received) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

// A conversation's tokens: 200 of its own (a system prompt and a first message), distinct from
// every other conversation's.
const conversation = (c: number) => Array.from({ length: 200 }, (_, i) => 3 + ((c * 1000 + i * 7) % 29_000));

describe('replicas share what cache_aware knows', () => {
  it("sends a second turn that reaches the other replica to the worker holding its first turn's prefix", async () => {
    const list = await replicas();
    expect(list.map((r) => r.state)).toEqual(['up', 'up']);
    const firsts: { prompt: number[]; output: number[] }[] = [];
    // First turns alternate between the replicas' own urls...
    for (let c = 0; c < 12; c++) {
      const prompt = conversation(c);
      const a = await generate(list[c % 2]!.url, `conv-${c}-turn-1`, prompt);
      firsts.push({ prompt, output: a.output_ids });
    }
    await exchanged(list);
    // ...and each second turn (the first turn, its answer and a new message) goes to the other.
    const hits: boolean[] = [];
    for (let c = 0; c < 12; c++) {
      const { prompt, output } = firsts[c]!;
      const b = await generate(list[(c + 1) % 2]!.url, `conv-${c}-turn-2`, [...prompt, ...output, ...Array.from({ length: 30 }, (_, i) => 5 + i)]);
      hits.push(b.meta_info.cached_tokens >= prompt.length);
    }
    expect(hits.filter(Boolean).length, `second turns that found their prefix cached: ${hits.map((h) => (h ? 1 : 0)).join('')}`).toBe(12);
  }, 120_000);

  it('/flush_cache on the shared port empties every replica\'s picture of the caches', async () => {
    const list = await replicas();
    // Two prompts, each sent through both replicas: each replica's own picture holds both,
    // whatever they share.
    const [p, q] = [conversation(50), conversation(51)];
    for (const r of list) {
      await generate(r.url, `before-flush-p-${r.index}`, p);
      await generate(r.url, `before-flush-q-${r.index}`, q);
    }
    await exchanged(list);
    const res = await call(router.url, 'POST', '/flush_cache');
    expect(res.status, res.body).toBe(200);
    expect(res.body).toMatch(/^Cache flushed\./);
    expect(res.headers['x-baton-replicas']).toBe('applied on every replica (2)');
    // Each replica now places a prompt it had sent as one never seen (one prompt each: what one
    // replica sends after the flush, the other learns).
    for (const [r, rid, prompt] of [[list[0]!, 'after-flush-p', p], [list[1]!, 'after-flush-q', q]] as const) {
      await generate(r.url, rid, [...prompt]);
      const rows = await traceRows(r.url, `kind=attempt&request=${rid}`);
      expect(rows.map((row) => row.placement_reason), `replica ${r.index}`).toEqual(['below_threshold 0/200']);
    }
  }, 60_000);
});

describe('worker writes on the shared port reach every replica', () => {
  let drained: WorkerBody;

  it('a drain: each replica marks the worker draining and sends it nothing new', async () => {
    const list = await replicas();
    const target = cluster.workers()[0]!;
    const id = (await workersOf(list[0]!.url)).find((w) => w.url === target.url)!.id;
    const res = await call(router.url, 'POST', `/workers/${id}/drain`, { grace_ms: 600_000 });
    expect(res.status, res.body).toBe(200);
    drained = JSON.parse(res.body) as WorkerBody;
    expect(drained).toMatchObject({ url: target.url, draining: true });
    // New requests at either replica go to the other worker: the drained one's own record of the
    // rids it was sent has none of them.
    for (const r of list) for (let i = 0; i < 6; i++) await generate(r.url, `after-drain-${r.index}-${i}`, [7, 8, 9, i]);
    expect((await cluster.stats(0)).rids.filter((rid) => rid.startsWith('after-drain-'))).toEqual([]);
    const others = await Promise.all([1, 2].map((i) => cluster.stats(i)));
    expect(others.flatMap((s) => s.rids).filter((rid) => rid.startsWith('after-drain-'))).toHaveLength(12);
    for (const r of list) {
      const w = (await workersOf(r.url)).find((x) => x.url === target.url)!;
      expect(w, `replica ${r.index}`).toMatchObject({ draining: true, drain_deadline: drained.drain_deadline });
    }
    expect(drained.replicas).toEqual({ successful: list.map((r) => r.id), failed: [], pending: [], total_replicas: 2, message: 'applied on every replica (2)' });
  }, 60_000);

  it('an add reaches every replica, and a replica restarted later has the add and the drain', async () => {
    const list = await replicas();
    const extra = cluster.workers()[3]!;
    const res = await call(router.url, 'POST', '/workers', { url: extra.url });
    expect(res.status, res.body).toBe(200);
    expect((JSON.parse(res.body) as WorkerBody).replicas).toMatchObject({ successful: list.map((r) => r.id), failed: [], total_replicas: 2 });
    for (const r of list) expect((await workersOf(r.url)).map((w) => w.url), `replica ${r.index}`).toContain(extra.url);

    const victim = list[1]!;
    process.kill(victim.pid, 'SIGKILL');
    let back: Entry | undefined;
    // Through the survivor's own url: with SO_REUSEPORT a connection to the shared port that the
    // kernel had queued on the killed process's socket is reset.
    await waitUntil(async () => {
      back = (await replicas(list[0]!.url)).find((r) => r.index === victim.index);
      return back?.state === 'up' && back.epoch === victim.epoch + 1;
    }, 60_000, 'the killed replica back');
    const workers = await workersOf(back!.url);
    expect(workers.map((w) => w.url)).toContain(extra.url);
    expect(workers.find((w) => w.url === drained.url)).toMatchObject({ draining: true, drain_deadline: drained.drain_deadline });
  }, 100_000);

  it('a remove and an undrain reach every replica, the restarted one too', async () => {
    const list = await replicas();
    const extra = cluster.workers()[3]!;
    const extraId = (await workersOf(list[0]!.url)).find((w) => w.url === extra.url)!.id;
    const removed = await call(router.url, 'DELETE', `/workers/${extraId}`);
    expect(removed.status, removed.body).toBe(200);
    expect(JSON.parse(removed.body)).toMatchObject({ removed: expect.any(String), replicas: { successful: list.map((r) => r.id), failed: [] } });
    const undrained = await call(router.url, 'PUT', `/workers/${drained.id}`, { draining: false });
    expect(undrained.status, undrained.body).toBe(200);
    for (const r of list) {
      const workers = await workersOf(r.url);
      expect(workers.map((w) => w.url), `replica ${r.index}`).not.toContain(extra.url);
      expect(workers.find((w) => w.url === drained.url), `replica ${r.index}`).toMatchObject({ draining: false });
    }
  }, 60_000);

  // Under SO_REUSEPORT the kernel may hand the write's own connection to the stopped replica.
  it.skipIf(reusePortSupported())('a replica that does not answer: 502, naming it; it applies the write once it runs again (skipped under SO_REUSEPORT: the write itself could land on the stopped replica)', async () => {
    const list = await replicas();
    const stopped = list[1]!;
    const target = cluster.workers()[1]!;
    const id = (await workersOf(list[0]!.url)).find((w) => w.url === target.url)!.id;
    process.kill(stopped.pid, 'SIGSTOP');
    let res: Awaited<ReturnType<typeof call>>;
    try {
      // With one replica stopped, the other accepts every connection on the shared port.
      res = await call(router.url, 'PUT', `/workers/${id}`, { draining: true });
    } finally {
      process.kill(stopped.pid, 'SIGCONT');
    }
    expect(res.status, res.body).toBe(502);
    const body = JSON.parse(res.body) as WorkerBody;
    expect(body).toMatchObject({ url: target.url, draining: true });
    expect(body.replicas!.successful).toEqual([list[0]!.id]);
    expect(body.replicas!.failed).toEqual([{ replica: stopped.id, error: expect.stringMatching(/did not answer within \d+ ms/) }]);
    expect(body.replicas!.message).toMatch(new RegExp(`applied on 1 of 2 replicas; replica 1 \\(${stopped.id}\\) did not answer`));
    await waitUntil(async () => (await workersOf(stopped.url)).find((w) => w.url === target.url)?.draining === true, 10_000, 'the stopped replica draining the worker once it runs');
    const back = await call(router.url, 'PUT', `/workers/${id}`, { draining: false });
    expect(back.status, back.body).toBe(200);
  }, 60_000);
});
