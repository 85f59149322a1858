// A client that stops reading: the router must stop reading the worker too (its upstream call
// paused until the client's socket drains), so a slow client costs a bounded amount of the
// router's memory, and the answer must still arrive whole once the client reads again. The
// simulated worker waits for 'drain' like any HTTP server, so a paused router shows at the worker
// as a generation that stops advancing.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigLogprobStream, startBench, sleep, waitUntil, type Bench } from '../reliability/helpers.ts';

let bench: Bench;
beforeAll(async () => {
  bench = await startBench([{ tokenIntervalMs: 0 }]);
});
afterAll(async () => {
  await bench.close();
});

describe('backpressure from a client that does not read', () => {
  it('pauses the worker, then delivers every frame once the client reads', async () => {
    const maxNew = 200;
    // ~200 KB a frame, ~40 MB in all.
    const body = bigLogprobStream(maxNew);
    const u = new URL(bench.router.url);
    const s = connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    let closed = false;
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('close', () => (closed = true));
    await new Promise<void>((r) => s.on('connect', () => r()));
    s.write(`POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    // Read the response's start, then stop reading.
    await waitUntil(() => chunks.length > 0, 5000, 'the first bytes');
    s.pause();
    const w = bench.workers[0]!;
    // The worker stops advancing: every buffer between it and the client is full.
    let last = -1;
    await waitUntil(async () => {
      const now = w.stats().tokensGenerated;
      const still = now === last;
      last = now;
      await sleep(150);
      return still && w.stats().tokensGenerated === now;
    }, 8000, 'the worker to stop advancing');
    const stuck = w.stats();
    expect(stuck.inFlight).toBe(1);
    expect(stuck.requestsFinished).toBe(0);
    expect(stuck.tokensGenerated).toBeLessThan(maxNew);

    s.resume();
    await waitUntil(() => w.stats().requestsFinished === 1, 20000, 'the worker to finish');
    await waitUntil(() => closed || Buffer.concat(chunks).subarray(-64).includes('0\r\n\r\n'), 20000, 'the end of the answer');
    s.end();
    const raw = Buffer.concat(chunks).toString('latin1');
    expect(raw.startsWith('HTTP/1.1 200')).toBe(true);
    // Dechunk, then check every frame: one per token, counters in order, the client's id.
    let rest = raw.slice(raw.indexOf('\r\n\r\n') + 4);
    let text = '';
    for (;;) {
      const nl = rest.indexOf('\r\n');
      const n = parseInt(rest.slice(0, nl), 16);
      if (!(n > 0)) break;
      text += rest.slice(nl + 2, nl + 2 + n);
      rest = rest.slice(nl + 2 + n + 2);
    }
    const frames = text.split('\n\n').filter((f) => f.length > 0);
    expect(frames.at(-1)!.slice(0, 40)).toBe('data: [DONE]');
    const chunksJson = frames.slice(0, -1).map((f) => JSON.parse(Buffer.from(f.slice(6), 'latin1').toString('utf8')) as { meta_info: { completion_tokens: number; id: string; finish_reason: unknown } });
    expect(chunksJson.map((c) => c.meta_info.completion_tokens)).toEqual(Array.from({ length: maxNew }, (_, i) => i + 1));
    expect(new Set(chunksJson.map((c) => c.meta_info.id)).size).toBe(1);
    expect(chunksJson.at(-1)!.meta_info.finish_reason).toMatchObject({ type: 'length' });
  }, 60_000);
});
