// Baton in front of SGLang's real HTTP stack: FastAPI + Starlette + uvicorn, with SGLang's own
// /generate code (sglang_worker.py: the stream and unary branches and their exception handling as
// written in SGLang's http_server.py, uvicorn with `timeout_keep_alive=5`), once with uvicorn's
// h11 parser and once with httptools. The simulator (sim/) stays the fast default for everything
// else; here the HTTP behaviour itself is checked: what uvicorn sends when SGLang raises, how a
// stream closes, when a keep-alive connection goes away.
//
// Skipped, saying which apt-get line installs the stack, where Debian's python3-fastapi,
// python3-uvicorn, python3-httptools and python3-h11 are missing (.ci/run installs them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { RouterConfig } from '../../router/config.ts';
import { realStack, startUvicornWorker, type HttpImpl, type UvicornWorker } from './worker.ts';

const stack = realStack();
if (!stack.ok) console.log(`test/realstack/sglang-stack.test.ts skipped: ${stack.reason}`);
const SKIP_NOTE = stack.ok ? '' : ` [SKIPPED: ${stack.reason}]`;

interface Answer {
  status: number;
  contentType: string | null;
  text: string;
  /** The body ended without its end (the server closed the connection mid-body). */
  cut: boolean;
  headers: Headers;
}

async function post(url: string, path: string, body: unknown): Promise<Answer> {
  const res = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  let text = '';
  let cut = false;
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
  } catch {
    cut = true;
  }
  return { status: res.status, contentType: res.headers.get('content-type'), text, cut, headers: res.headers };
}

/** e2e_latency is a clock reading: the one field two runs of the same request may not share. */
const mask = (text: string) => text.replace(/"e2e_latency":[0-9.e+-]+/g, '"e2e_latency":0');
/** Also without what differs between two runs without a rid: the generated id, the cache's hits. */
const loose = (text: string) => mask(text).replace(/"id":"[0-9a-f]{32}"/g, '"id":""').replace(/"cached_tokens":\d+/g, '"cached_tokens":0');

interface Frame {
  output_ids?: number[];
  meta_info?: Record<string, unknown>;
  error?: { message: string };
}

function frames(text: string): { frames: Frame[]; done: boolean } {
  const out: Frame[] = [];
  let done = false;
  for (const f of text.split('\n\n')) {
    if (f === '') continue;
    if (f === 'data: [DONE]') done = true;
    else out.push(JSON.parse(f.slice('data: '.length)) as Frame);
  }
  return { frames: out, done };
}

/**
 * The same answer, as a client reads it: for a stream, the same last frame, [DONE] and no error
 * frame. Not the same frames: a worker that finds its reader behind coalesces the chunks it has
 * not sent yet (tokenizer_manager.py `_coalesce_streaming_chunks`), so how many cumulative frames
 * a stream has depends on the timing of its reader.
 */
function sameAnswer(got: string, want: string): boolean {
  if (!want.startsWith('data: ')) return loose(got) === loose(want);
  const g = frames(loose(got));
  const w = frames(loose(want));
  return g.done && w.done && !g.frames.some((f) => f.error) && JSON.stringify(g.frames.at(-1)) === JSON.stringify(w.frames.at(-1));
}

async function workerHealth(router: RouterHandle): Promise<string[]> {
  const r = (await (await fetch(router.url + '/workers')).json()) as { workers: { health: string }[] };
  return r.workers.map((w) => w.health);
}

async function attemptRows(router: RouterHandle): Promise<Record<string, unknown>[]> {
  const text = await (await fetch(`${router.url}/traces?format=jsonl&kind=attempt`)).text();
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const prompt = (seed: number, n = 12) => Array.from({ length: n }, (_, j) => 100 + ((seed * 7919 + j * 104729) % 30000));

interface Pacing {
  failures: string[];
  idles: number[];
}

/** One uvicorn mode's workers and routers. */
class Stack {
  a!: UvicornWorker;
  b!: UvicornWorker;
  /** The keep-alive test's own worker: its pacing runs while the other tests do. */
  c!: UvicornWorker;
  pacingRouters: RouterHandle[] = [];
  pacing!: Promise<Pacing>;
  private readonly routers: RouterHandle[] = [];

  constructor(readonly mode: HttpImpl) {}

  async start(): Promise<void> {
    const mode = this.mode;
    [this.a, this.b, this.c] = await Promise.all([
      startUvicornWorker({ http: mode, tokenDelayMs: 3 }),
      startUvicornWorker({ http: mode, tokenDelayMs: 3 }),
      startUvicornWorker({ http: mode, tokenDelayMs: 1 }),
    ]);
    for (let k = 0; k < 6; k++) this.pacingRouters.push(await this.router({}, [this.c.url]));
    this.pacing = this.pace().catch((err: Error) => ({ failures: [`pacing threw: ${err.message}`], idles: [] }));
  }

  async router(config: Partial<RouterConfig> = {}, workers = [this.a.url, this.b.url]): Promise<RouterHandle> {
    // Health checks off (each test's requests are the only traffic); a benched worker stays
    // benched for the test's length, so that GET /workers shows any blame.
    const r = await startRouter({ port: 0, workers, healthIntervalMs: 0, benchMs: 120_000, migrationLimit: 3, ...config });
    this.routers.push(r);
    return r;
  }

  /**
   * Finding 3: requests paced so that an upstream connection has sat idle 4.98–5.01 s, where
   * uvicorn (timeout_keep_alive=5) closes it. The race with uvicorn's close is narrow (a request
   * written in the millisecond or so around it), so there are several lanes, each with its own
   * router and so its own connections, at staggered gaps: batches through the pass-through path
   * (undici), and one stream through the migrating /generate path. One worker: a failure can
   * neither hide in a migration nor go unseen by the client.
   */
  private async pace(): Promise<Pacing> {
    const failures: string[] = [];
    const idles: number[] = [];
    const gaps = [4980, 4990, 5000];
    const lane = async (r: RouterHandle, body: Record<string, unknown>, what: string, offset: number) => {
      const want = await post(this.c.url, '/generate', body);
      for (const base of gaps) {
        const gap = base + offset;
        const before = await post(r.url, '/generate', body);
        const ended = performance.now();
        if (!sameAnswer(before.text, want.text)) failures.push(`${what}: ${before.status} ${before.text.slice(-400)}`);
        await sleep(gap - (performance.now() - ended));
        idles.push(performance.now() - ended);
        const got = await post(r.url, '/generate', body);
        if (got.status !== 200 || !sameAnswer(got.text, want.text)) failures.push(`${what} after ${gap} ms idle: ${got.status} ${got.text.slice(0, 600)} ... ${got.text.slice(-300)} WANT ${want.text.slice(0, 600)}`);
      }
    };
    const lanes: Promise<void>[] = [];
    for (const [k, r] of this.pacingRouters.entries()) {
      const batch = { input_ids: [prompt(40 + k, 5), prompt(50 + k, 6)], sampling_params: { max_new_tokens: 3 } };
      lanes.push(lane(r, batch, `batch lane ${k}`, 2 * k));
    }
    lanes.push(lane(this.pacingRouters[0]!, { input_ids: prompt(31), sampling_params: { max_new_tokens: 6 }, stream: true }, 'stream', 1));
    await Promise.all(lanes);
    return { failures, idles };
  }

  async close(): Promise<void> {
    await this.pacing?.catch(() => undefined);
    for (const r of this.routers) await r.close();
    await Promise.all([this.a, this.b, this.c].map((w) => w?.stop()));
  }
}

const MODES: HttpImpl[] = ['h11', 'httptools'];

describe.skipIf(!stack.ok)(`SGLang's real HTTP stack (FastAPI + uvicorn)${SKIP_NOTE}`, () => {
  const stacks = new Map<HttpImpl, Stack>(MODES.map((m) => [m, new Stack(m)]));

  // Both modes start together, so that their keep-alive pacing (~20 s) overlaps everything else.
  beforeAll(async () => {
    await Promise.all([...stacks.values()].map((s) => s.start()));
  }, 60_000);

  afterAll(async () => {
    await Promise.all([...stacks.values()].map((s) => s.close()));
  });

  for (const mode of MODES) {
    describe(`uvicorn --http ${mode}`, () => {
      const st = stacks.get(mode)!;
      const router = (config: Partial<RouterConfig> = {}) => st.router(config);

      it('the pool probes the uvicorn workers as SGLang token-only, cumulative workers', async () => {
        const r = await router();
        const info = (await (await fetch(r.url + '/workers')).json()) as { workers: Record<string, unknown>[] };
        expect(info.workers).toHaveLength(2);
        for (const w of info.workers) expect(w).toMatchObject({ health: 'healthy', format: 'sglang', token_only: true, incremental: false, model_path: 'baton/realstack-hash-model' });
      });

      it("stream and unary answers through Baton equal the worker's own, Content-Type included", async () => {
        const r = await router();
        const cases: Record<string, unknown>[] = [
          { input_ids: prompt(1), sampling_params: { max_new_tokens: 24 }, stream: true },
          { input_ids: prompt(2), sampling_params: { max_new_tokens: 16, stream_interval: 4 }, stream: true, return_logprob: true, top_logprobs_num: 2, logprob_start_len: 0 },
          { input_ids: prompt(3), sampling_params: { max_new_tokens: 16 }, return_logprob: true, logprob_start_len: 0 },
          { input_ids: prompt(4), sampling_params: { max_new_tokens: 8, temperature: 0 } },
        ];
        for (const [i, body] of cases.entries()) {
          const rid = `eq-${mode}-${i}`;
          // Both from a cold cache, so that cached_tokens agree.
          expect((await post(st.a.url, '/flush_cache', {})).status).toBe(200);
          const direct = await post(st.a.url, '/generate', { ...body, rid });
          expect((await post(r.url, '/flush_cache', {})).status).toBe(200);
          const via = await post(r.url, '/generate', { ...body, rid });
          expect(direct.status).toBe(200);
          expect(direct.contentType).toBe(body.stream ? 'text/event-stream; charset=utf-8' : 'application/json');
          expect(via.status).toBe(direct.status);
          expect(mask(via.text)).toBe(mask(direct.text));
          expect(via.contentType).toBe(direct.contentType);
        }
      });

      it('a ValueError (temperature -1) comes back exactly as SGLang writes it: in band on a stream, 400 unary', async () => {
        const r = await router();
        const body = { input_ids: prompt(5), sampling_params: { temperature: -1, max_new_tokens: 4 } };
        const message = 'temperature must be a non-negative finite number, got -1.';
        const directStream = await post(st.a.url, '/generate', { ...body, stream: true });
        expect(directStream.status).toBe(200);
        expect(directStream.text).toBe(`data: ${JSON.stringify({ error: { message, type: 'invalid_request_error', code: 400, retryable: false } })}\n\ndata: [DONE]\n\n`);
        const directUnary = await post(st.a.url, '/generate', body);
        expect(directUnary.status).toBe(400);
        expect(directUnary.text).toBe(JSON.stringify({ error: { message } }));

        const viaStream = await post(r.url, '/generate', { ...body, stream: true });
        expect([viaStream.status, viaStream.contentType, viaStream.text]).toEqual([200, directStream.contentType, directStream.text]);
        const viaUnary = await post(r.url, '/generate', body);
        expect([viaUnary.status, viaUnary.contentType, viaUnary.text]).toEqual([400, directUnary.contentType, directUnary.text]);
        expect(await workerHealth(r)).toEqual(['healthy', 'healthy']);
      });

      it('uvicorn as SGLang runs it: an unknown sampling key closes a stream after its 200, and is a 500 unary', async () => {
        const body = { input_ids: prompt(6), sampling_params: { max_tokens: 8 } };
        const stream = await post(st.a.url, '/generate', { ...body, stream: true });
        expect(stream.status).toBe(200);
        expect(stream.contentType).toBe('text/event-stream; charset=utf-8');
        expect(stream.cut).toBe(true);
        expect(stream.text).toBe('');
        const unary = await post(st.a.url, '/generate', body);
        expect([unary.status, unary.contentType, unary.text]).toEqual([500, 'text/plain; charset=utf-8', 'Internal Server Error']);
        expect(st.a.output.join('')).toContain("TypeError: SamplingParams.__init__() got an unexpected keyword argument 'max_tokens'");
      });

      for (const stream of [true, false]) {
        it(`finding 1 (${stream ? 'stream' : 'unary'}): an unknown sampling_params key benches no worker; the client gets a clear error and the next request is served`, async () => {
          const r = await router();
          // OpenAI's name beside SGLang's: the request is migratable, so a router that reads the
          // worker's closed connection as the worker's fault walks it through the whole cluster.
          const bad = await post(r.url, '/generate', { input_ids: prompt(7), sampling_params: { max_new_tokens: 8, max_tokens: 8 }, stream });
          if (bad.status === 200) {
            // In band: one error frame naming what went wrong, then [DONE].
            const { frames: fs, done } = frames(bad.text);
            expect(done).toBe(true);
            expect(fs.at(-1)?.error?.message).toMatch(/max_tokens/);
          } else {
            expect(bad.status).toBeGreaterThanOrEqual(400);
            expect(bad.text).toMatch(/max_tokens/);
          }
          expect(await workerHealth(r)).toEqual(['healthy', 'healthy']);
          const good = { input_ids: prompt(8), sampling_params: { max_new_tokens: 8 }, stream };
          const direct = await post(st.a.url, '/generate', good);
          const via = await post(r.url, '/generate', good);
          expect(via.status).toBe(200);
          expect(loose(via.text)).toBe(loose(direct.text));
          expect(await workerHealth(r)).toEqual(['healthy', 'healthy']);
        });
      }

      it('finding 2: stream_interval frames spaced beyond the inter-token deadline complete without a stall', async () => {
        const r = await router({ interTokenTimeoutMs: 200 });
        // 3 ms a token, a frame every 120 tokens: ~360 ms between frames, against a 200 ms deadline.
        const body = { input_ids: prompt(9), sampling_params: { max_new_tokens: 250, stream_interval: 120 }, stream: true, rid: `si-${mode}` };
        expect((await post(st.a.url, '/flush_cache', {})).status).toBe(200);
        const direct = await post(st.a.url, '/generate', body);
        expect((await post(r.url, '/flush_cache', {})).status).toBe(200);
        const via = await post(r.url, '/generate', body);
        const d = frames(direct.text);
        expect(d.frames.map((f) => f.meta_info?.completion_tokens)).toEqual([1, 121, 241, 250]);
        expect(via.status).toBe(200);
        expect(mask(via.text)).toBe(mask(direct.text));
        const rows = (await attemptRows(r)).filter((row) => row.request_id === `si-${mode}`);
        expect(rows.map((row) => [row.outcome, row.error_kind])).toEqual([['finished', null]]);
        expect(await workerHealth(r)).toEqual(['healthy', 'healthy']);
      });

      it('a worker killed mid-stream: Baton continues on the other uvicorn worker, token-exact', async () => {
        const r = await router();
        const body = { input_ids: prompt(10), sampling_params: { max_new_tokens: 200 }, stream: true, return_logprob: true, rid: `kill-${mode}` };
        const want = frames((await post(st.a.url, '/generate', { ...body, rid: `kill-ref-${mode}` })).text).frames.at(-1)!;
        expect(want.output_ids).toHaveLength(200);

        const res = await fetch(r.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const decoder = new TextDecoder();
        let text = '';
        let killed: string | null = null;
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          text += decoder.decode(chunk, { stream: true });
          if (killed === null && text.split('\n\n').length > 10) {
            // The worker that holds the stream: SGLang's /get_load counts its running requests.
            for (const w of [st.a, st.b]) {
              const load = (await (await fetch(w.url + '/get_load')).json()) as { num_reqs: number }[];
              if (load[0]!.num_reqs > 0) {
                killed = w.url;
                await w.kill();
                break;
              }
            }
            expect(killed).not.toBeNull();
          }
        }
        const got = frames(text);
        expect(got.done).toBe(true);
        expect(got.frames.every((f) => f.error === undefined)).toBe(true);
        const last = got.frames.at(-1)!;
        expect(last.output_ids).toEqual(want.output_ids);
        expect(last.meta_info!.output_token_logprobs).toEqual(want.meta_info!.output_token_logprobs);
        expect(last.meta_info).toMatchObject({ id: `kill-${mode}`, finish_reason: { type: 'length', length: 200 }, completion_tokens: 200, prompt_tokens: 12 });
        // Every frame the client saw extends the one before (cumulative): nothing lost or repeated.
        for (let i = 1; i < got.frames.length; i++) expect(got.frames[i]!.output_ids!.slice(0, got.frames[i - 1]!.output_ids!.length)).toEqual(got.frames[i - 1]!.output_ids);
        const rows = (await attemptRows(r)).filter((row) => row.request_id === `kill-${mode}`);
        expect(rows).toHaveLength(2);
        expect(rows.find((row) => row.attempt === 1)?.worker).not.toBe(killed);
      });
    });
  }

  // Last, so that every other test of both modes runs while the pacing (~16 s) goes on.
  for (const mode of MODES) {
    describe(`uvicorn --http ${mode}: upstream keep-alive`, () => {
      const st = stacks.get(mode)!;

      it('finding 3: requests paced to reuse an upstream keep-alive connection at ~4.9–5.0 s idle never fail and never blame the worker', async () => {
        const { failures, idles } = await st.pacing;
        expect(failures).toEqual([]);
        expect(idles).toHaveLength(21);
        for (const idle of idles) expect(idle).toBeGreaterThanOrEqual(4950);
        for (const r of st.pacingRouters) {
          expect(await workerHealth(r)).toEqual(['healthy']);
          expect((await attemptRows(r)).filter((row) => row.outcome !== 'finished')).toEqual([]);
        }
      }, 60_000);
    });
  }
});
