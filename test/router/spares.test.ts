// Spare connections (router/pool/spares.ts): sized by the pool, renewed before a server's idle
// timeout, never used once the server closed or wrote to them; and, with real worker processes,
// a continuation written to the survivor in the same event-loop turn as the failure.
import diagnosticsChannel from 'node:diagnostics_channel';
import { createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { buildConnector } from 'undici';
import { SPARE_MAX_AGE_MS, SPARE_RENEW_MS, SPARE_RETRY_MS, SpareConnections } from '../../router/pool/spares.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { stream, waitUntil } from './harness/procs.ts';

describe('SpareConnections against a real TCP server', () => {
  let server: Server;
  const accepted: Socket[] = [];
  let spares: SpareConnections;

  async function listen(): Promise<URL> {
    server = createServer((s) => {
      accepted.push(s);
      s.on('error', () => undefined);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    return new URL(`http://127.0.0.1:${port}`);
  }

  afterEach(async () => {
    spares?.close();
    for (const s of accepted) s.destroy();
    accepted.length = 0;
    await new Promise((r) => server.close(r));
  });

  it('opens the target, hands out a connected socket, refills, and closes everything on close()', async () => {
    const connector = buildConnector({ timeout: 2000 });
    let connects = 0;
    spares = new SpareConnections(await listen(), (opts, cb) => {
      connects++;
      return connector(opts, cb);
    });
    spares.maintain();
    expect(spares.size).toBe(0); // no target, no traffic: no connections
    spares.target = 3;
    spares.maintain();
    await waitUntil(() => spares.size === 3 && accepted.length === 3, 5000, 'three spares');

    const before = connects;
    const got = spares.claim()!;
    expect(got).not.toBeNull();
    expect(spares.taken).toBe(1);
    // Its replacement connects once the caller's code (which writes the continuation on it) has
    // run: a connect wakes the worker, and must not come between a failure and its continuation.
    expect(connects).toBe(before);
    await Promise.resolve();
    expect(connects).toBe(before + 1);
    expect(got.destroyed).toBe(false);
    expect(got.remotePort).toBe((server.address() as { port: number }).port);
    // Taking one starts a replacement at once.
    await waitUntil(() => spares.size === 3 && accepted.length === 4, 5000, 'a replacement');
    got.destroy();

    spares.close();
    expect(spares.size).toBe(0);
    await waitUntil(() => accepted.every((s) => s.readableEnded || s.destroyed), 5000, 'server sees every spare closed');
  });

  it('connects to an IPv6 worker by its bare address', async (ctx) => {
    server = createServer((s) => {
      accepted.push(s);
      s.on('error', () => undefined);
    });
    try {
      server.listen(0, '::1');
      await once(server, 'listening');
    } catch (err) {
      server = createServer().listen(0, '127.0.0.1'); // for afterEach
      await once(server, 'listening');
      ctx.skip(`skipped: no IPv6 loopback on this machine (${(err as Error).message})`);
      return;
    }
    const { port } = server.address() as { port: number };
    spares = new SpareConnections(new URL(`http://[::1]:${port}`), buildConnector({ timeout: 2000 }));
    spares.target = 1;
    spares.maintain();
    await waitUntil(() => spares.size === 1 && accepted.length === 1, 5000, 'an IPv6 spare');
    expect(accepted[0]!.remoteAddress).toBe('::1');
  });

  it('never hands out a socket the server closed or wrote to', async () => {
    spares = new SpareConnections(await listen(), buildConnector({ timeout: 2000 }));
    spares.target = 2;
    spares.maintain();
    await waitUntil(() => spares.size === 2 && accepted.length === 2, 5000, 'two spares');
    accepted[0]!.end(); // the server closes one (an idle timeout)
    accepted[1]!.write('HTTP/1.1 408 Request Timeout\r\n\r\n'); // and answers on the other unasked
    await waitUntil(() => spares.size < 2, 5000, 'the closed spare is forgotten');
    await new Promise((r) => setTimeout(r, 100));
    expect(spares.take()).toBeNull();
  });

  it('renews spares before they reach SPARE_MAX_AGE_MS, never leaving none; without traffic lets them age out; out of service closes them all', async () => {
    spares = new SpareConnections(await listen(), buildConnector({ timeout: 2000 }));
    spares.target = 2;
    spares.maintain();
    await waitUntil(() => spares.size === 2, 5000, 'two spares');
    const oldBy = Date.now(); // the first two were made by now
    expect(spares.take(oldBy + SPARE_MAX_AGE_MS)).toBeNull(); // too old to use: closed
    spares.maintain();
    await waitUntil(() => spares.size === 2 && accepted.length === 4, 5000, 'two new spares');
    const first = Date.now();
    await new Promise((r) => setTimeout(r, 30));
    // Due for renewal: replacements open while the old ones can still be used...
    spares.maintain(first + SPARE_RENEW_MS + 20);
    expect(spares.size).toBe(2);
    await waitUntil(() => spares.size === 4 && accepted.length === 6, 5000, 'replacements beside the old');
    // ...and the old close once too old, while the replacements stay.
    spares.maintain(first + SPARE_MAX_AGE_MS);
    expect(spares.size).toBe(2);
    // No traffic (target 0): nothing new opens, and the spares stay usable until they age out.
    spares.target = 0;
    const before = accepted.length;
    spares.maintain();
    expect(spares.size).toBe(2);
    expect(accepted.length).toBe(before);
    spares.maintain(Date.now() + SPARE_MAX_AGE_MS);
    expect(spares.size).toBe(0);
    // A worker out of service: every spare closes at once, whatever its age.
    spares.target = 2;
    spares.maintain();
    await waitUntil(() => spares.size === 2, 5000, 'two spares again');
    spares.target = 0;
    spares.maintain(Date.now(), true);
    expect(spares.size).toBe(0);
    await waitUntil(() => accepted.every((s) => s.readableEnded || s.destroyed), 5000, 'server sees them closed');
  });

  it('a worker that refuses connections leaves no spare and no error, and is not retried at once', async () => {
    const url = await listen();
    await new Promise((r) => server.close(r));
    server = createServer(); // for afterEach
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = buildConnector({ timeout: 2000 });
    let attempts = 0;
    const counting: buildConnector.connector = (opts, cb) => {
      attempts++;
      base(opts, cb);
    };
    spares = new SpareConnections(url, counting);
    spares.target = 2;
    spares.maintain();
    expect(attempts).toBe(2);
    await waitUntil(() => spares.size === 0 && (spares as unknown as { connecting: number }).connecting === 0, 5000, 'refused');
    spares.maintain();
    spares.maintain();
    expect(attempts).toBe(2); // within SPARE_RETRY_MS of the refusal
    spares.maintain(Date.now() + SPARE_RETRY_MS);
    expect(attempts).toBe(4);
    expect(spares.size).toBe(0);
    await waitUntil(() => (spares as unknown as { connecting: number }).connecting === 0, 5000, 'refused again');
    // Back in service (a health check passed): tried again at once, not after the pause.
    spares.maintain();
    expect(attempts).toBe(4);
    spares.recovered();
    spares.maintain();
    expect(attempts).toBe(6);
  });
});

describe('a continuation on a spare connection (real worker processes)', () => {
  let cluster: SimCluster | null = null;
  let router: RouterHandle | null = null;
  afterAll(async () => {
    await router?.close();
    await cluster?.stop();
  });

  it('is written to the survivor before the event loop turns, and the answer is token-exact', async () => {
    cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 15 });
    router = await startRouter({ port: 0, workers: cluster.workers().map((w) => w.url), healthIntervalMs: 0 });
    let failure: { sentSameTurn: boolean | null } | null = null;
    const onError = () => {
      if (failure) return;
      const f = { sentSameTurn: null as boolean | null };
      failure = f;
      // If the continuation's headers are not written by the time this runs, it waited a turn.
      setImmediate(() => {
        if (f.sentSameTurn === null) f.sentSameTurn = false;
      });
    };
    const onSend = (msg: unknown) => {
      // The continuation is the request whose rid says attempt 1 (router/migration/rid.ts).
      const body = String((msg as { exchange: { body?: unknown } }).exchange.body ?? '');
      if (failure && failure.sentSameTurn === null && /~m1~[0-9a-f]{24}"/.test(body)) failure.sentSameTurn = true;
    };
    diagnosticsChannel.subscribe('baton:h1:error', onError);
    diagnosticsChannel.subscribe('baton:h1:send', onSend);
    try {
      const body = { input_ids: [5, 6, 7, 8], sampling_params: { max_new_tokens: 120, ignore_eos: true } };
      const r = await stream(router.url, body, async (n) => {
        if (n !== 20) return;
        const busy = router!.workers().find((w) => w.in_flight > 0)!;
        // Spares are sized once a tick (100 ms) from the load: wait until the survivor has some.
        await new Promise((res) => setTimeout(res, 300));
        const victim = cluster!.workers().findIndex((w) => w.url === busy.url);
        await cluster!.kill(victim);
      });
      expect(r.error).toBeNull();
      expect(r.done).toBe(true);
      const last = r.frames.at(-1)!;
      expect(last.output_ids).toEqual(runModel(body.input_ids, body.sampling_params).output_ids);
      expect(failure).not.toBeNull();
      expect(failure!.sentSameTurn).toBe(true);
      const rows = router.traceRows({ kind: 'attempt', request: (last.meta_info as { id: string }).id });
      expect(rows.length).toBe(2);
    } finally {
      diagnosticsChannel.unsubscribe('baton:h1:error', onError);
      diagnosticsChannel.unsubscribe('baton:h1:send', onSend);
    }
  });
});
