// Stalls: a worker that hangs mid-stream is caught by the inter-token timeout, a server that
// accepts a /generate but never answers by the first-token timeout (which does not bench the
// worker: queueing and prefill are load, not a fault); the request migrates and the client still
// gets the fault-free answer, token for token.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server, type Socket } from 'node:net';
import { runModel } from '../../sim/model.ts';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { waitUntil } from './helpers.ts';

const STALL_MS = 400;
const PROMPT = [21, 22, 23, 24];
const BUDGET = 40;

async function generate(url: string, stream: boolean, rid: string) {
  const res = await fetch(url + '/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input_ids: PROMPT, sampling_params: { max_new_tokens: BUDGET, ignore_eos: true }, stream, return_logprob: true, rid }),
  });
  const text = await res.text();
  if (!stream) return { status: res.status, body: JSON.parse(text) as { output_ids: number[]; meta_info: Record<string, unknown> } };
  const frames = text.split('\n\n').filter((f) => f.startsWith('data: {')).map((f) => JSON.parse(f.slice(6)) as { output_ids: number[]; meta_info: Record<string, unknown> });
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  return { status: res.status, body: frames.at(-1)! };
}

function expectExact(body: { output_ids: number[]; meta_info: Record<string, unknown> }) {
  const ref = runModel(PROMPT, { max_new_tokens: BUDGET, ignore_eos: true });
  expect(body.output_ids).toEqual(ref.output_ids);
  expect(body.meta_info.output_token_logprobs).toEqual(ref.output_ids.map((id, i) => [ref.output_logprobs[i], id, null]));
  expect(body.meta_info.finish_reason).toEqual({ type: 'length', length: BUDGET });
  expect(body.meta_info.completion_tokens).toBe(BUDGET);
  expect(body.meta_info.prompt_tokens).toBe(PROMPT.length);
}

describe('a worker that hangs mid-stream', () => {
  let hanging: SimWorker;
  let healthy: SimWorker;
  let router: RouterHandle;
  beforeAll(async () => {
    hanging = await startWorker({ tokenIntervalMs: 5 });
    healthy = await startWorker({ tokenIntervalMs: 5 });
    // Health checks off: the hang must be caught by the inter-token timeout, nothing else.
    router = await startRouter({ port: 0, workers: [hanging.url, healthy.url], interTokenTimeoutMs: STALL_MS, healthIntervalMs: 0, benchMs: 0 });
  });
  afterEach(() => {
    hanging.fault({ kind: 'clear' });
    for (const w of router.workers()) router.drainWorker(w.id, false);
  });
  afterAll(async () => {
    await router.close();
    await hanging.close();
    await healthy.close();
  });

  for (const stream of [true, false]) {
    it(`is detected by the inter-token timeout and the ${stream ? 'stream' : 'unary'} request migrates, token-exact`, async () => {
      const rid = `hang-${stream}`;
      // Attempt 0 must land on the worker that will hang: the other one waits, drained, until then.
      const other = router.workers().find((w) => w.url === healthy.url)!;
      router.drainWorker(other.id, true);
      hanging.fault({ kind: 'hang', afterTokens: 10 });
      const pending = generate(router.url, stream, rid);
      await waitUntil(() => hanging.stats().hung, 5000, 'the worker to hang');
      router.drainWorker(other.id, false);
      const hungAt = Date.now();
      const { status, body } = await pending;
      expect(status).toBe(200);
      expectExact(body);
      const rows = router.traceRows({ request: rid });
      const attempts = rows.filter((r) => r.kind === 'attempt').sort((a, b) => (a.kind === 'attempt' && b.kind === 'attempt' ? a.attempt - b.attempt : 0));
      expect(attempts.map((a) => a.kind === 'attempt' && [a.worker, a.outcome, a.error_kind])).toEqual([
        [hanging.url, 'failed', 'stalled'],
        [healthy.url, 'finished', null],
      ]);
      const first = attempts[0]!;
      if (first.kind === 'attempt') {
        expect(first.tokens).toBe(10);
        // Detected soon after the timeout (the sweeper ticks at a quarter of it), not by luck later.
        expect(first.ended_at - hungAt).toBeLessThan(STALL_MS + 1500);
      }
      expect(rows.find((r) => r.kind === 'request')).toMatchObject({ outcome: 'finished', attempts: 2, migrations: 1 });
    });
  }
});

describe('a server that accepts /generate but never answers its headers', () => {
  let blackHole: Server;
  let blackHoleUrl: string;
  const generateSeen: string[] = [];
  const sockets = new Set<Socket>();
  let healthy: SimWorker;
  let router: RouterHandle;

  beforeAll(async () => {
    // Answers health checks and probes like a worker, so the router takes it in; swallows
    // every /generate without a byte in reply.
    blackHole = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      let buf = '';
      s.on('data', (c: Buffer) => {
        buf += c.toString('latin1');
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const line = buf.slice(0, buf.indexOf('\r\n'));
        if (line.startsWith('POST /generate')) {
          generateSeen.push(line);
          buf = '';
          return; // silence
        }
        const info = line.includes('/server_info')
          ? JSON.stringify({ skip_tokenizer_init: true, incremental_streaming_output: false, preferred_sampling_params: null })
          : line.includes('model_info') ? JSON.stringify({ preferred_sampling_params: null }) : '';
        s.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(info)}\r\nconnection: close\r\n\r\n${info}`);
        buf = '';
      });
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => blackHole.listen(0, '127.0.0.1', () => r()));
    const addr = blackHole.address();
    blackHoleUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    healthy = await startWorker({ tokenIntervalMs: 2 });
    router = await startRouter({ port: 0, workers: [blackHoleUrl, healthy.url], interTokenTimeoutMs: 60_000, firstTokenTimeoutMs: STALL_MS, healthIntervalMs: 0, benchMs: 0 });
  });
  afterAll(async () => {
    await router.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => blackHole.close(() => r()));
    await healthy.close();
  });

  for (const stream of [true, false]) {
    it(`is detected by the first-token timeout and the ${stream ? 'stream' : 'unary'} request migrates, token-exact, without benching the worker`, async () => {
      const rid = `blackhole-${stream}`;
      const other = router.workers().find((w) => w.url === healthy.url)!;
      router.drainWorker(other.id, true);
      const seenBefore = generateSeen.length;
      const pending = generate(router.url, stream, rid);
      await waitUntil(() => generateSeen.length > seenBefore, 5000, 'the black hole to swallow the request');
      router.drainWorker(other.id, false);
      const { status, body } = await pending;
      router.drainWorker(other.id, false);
      expect(status).toBe(200);
      expectExact(body);
      const attempts = router.traceRows({ request: rid, kind: 'attempt' });
      expect(attempts.map((a) => a.kind === 'attempt' && [a.worker, a.outcome, a.error_kind, a.tokens])).toEqual([
        [blackHoleUrl, 'failed', 'first_token_timeout', 0],
        [healthy.url, 'finished', null, BUDGET],
      ]);
      // Queueing and prefill are load, not a fault: the silent worker is not benched.
      expect(router.workers().find((w) => w.url === blackHoleUrl)!.health).toBe('healthy');
    });
  }
});
