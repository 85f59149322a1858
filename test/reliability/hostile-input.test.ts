// Hostile input at /generate: more than 10,000 fast-check cases of bodies that are broken in
// one way (wrong types, huge numbers, NaN spelled as strings, deep nesting, giant arrays, invalid
// UTF-8, truncated JSON, wrong content types). Every one gets SGLang's own answer and never a
// 5xx: a body FastAPI refuses (not JSON, not an object, a type pydantic refuses, invalid UTF-8,
// too deep) gets SGLang's 400 from the router itself and reaches no worker; a well-formed body
// with a value the router cannot use goes to one worker, whose refusal reaches the client as it
// wrote it, and the worker is not blamed for it. The router stays up. Then the limits that keep
// a hostile client from holding memory or sockets: the body size cap, header and body read
// timeouts (slowloris), and the concurrent-request cap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Pool } from 'undici';
import { startBench, rawExchange, statusOf, bodyOf, sleep, waitUntil, type Bench } from './helpers.ts';

const MAX_BODY = 512 * 1024;

/** A body SGLang accepts; every case below breaks it in one way. */
const validBody = fc.record({
  input_ids: fc.array(fc.integer({ min: 3, max: 31999 }), { minLength: 1, maxLength: 12 }),
  sampling_params: fc.record({ max_new_tokens: fc.integer({ min: 0, max: 8 }) }),
  stream: fc.boolean(),
});

/** Values no numeric field accepts: strings (NaN, inf, digits), booleans, lists, objects. */
const notANumber = fc.oneof(
  fc.constantFrom('NaN', 'nan', 'Infinity', '-Infinity', 'inf', '1e999', '5', '0x10', ''),
  fc.string({ maxLength: 20 }),
  fc.boolean(),
  fc.array(fc.integer(), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);
const notAnInteger = fc.oneof(notANumber, fc.double({ noInteger: true, noDefaultInfinity: true, noNaN: true }));
const notABool = fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.array(fc.boolean(), { maxLength: 3 }), fc.constant({}));
/** Magnitudes no integer field can take exactly (beyond 2^53) or at all (beyond double range). */
const huge = fc.oneof(
  fc.constantFrom(1e20, 2 ** 53 + 2, 1e300, -1e300, Number.MAX_VALUE),
  fc.bigInt({ min: 2n ** 60n, max: 2n ** 200n }).map((b) => Number(b)),
);

type Case = { body: string | Buffer; contentType?: string };
const json = (v: unknown): Case => ({ body: JSON.stringify(v) });

/** One field of sampling_params set to a value outside what SGLang accepts. */
const badSamplingValue: fc.Arbitrary<[string, unknown]> = fc.oneof(
  fc.tuple(fc.constant('max_new_tokens'), fc.oneof(notAnInteger, fc.integer({ max: -1 }), huge)),
  fc.tuple(fc.constant('min_new_tokens'), fc.oneof(notAnInteger, fc.integer({ max: -1 }), fc.integer({ min: 9, max: 1e6 }))),
  fc.tuple(fc.constant('temperature'), fc.oneof(notANumber, fc.double({ max: -1e-9, noNaN: true }))),
  fc.tuple(fc.constant('top_p'), fc.oneof(notANumber, fc.double({ min: 1.0000001, noNaN: true }), fc.double({ max: 0, noNaN: true }))),
  fc.tuple(fc.constant('min_p'), fc.oneof(notANumber, fc.double({ min: 1.0000001, noNaN: true }), fc.double({ max: -1e-9, noNaN: true }))),
  fc.tuple(fc.constant('top_k'), fc.oneof(notAnInteger, fc.integer({ max: -2 }), fc.constant(0), huge.filter((n) => n < 0))),
  fc.tuple(fc.constantFrom('frequency_penalty', 'presence_penalty'), fc.oneof(notANumber, fc.double({ min: 2.0000001, noNaN: true }), fc.double({ max: -2.0000001, noNaN: true }))),
  fc.tuple(fc.constant('repetition_penalty'), fc.oneof(notANumber, fc.double({ min: 2.0000001, noNaN: true }), fc.double({ max: 0, noNaN: true }))),
  fc.tuple(fc.constant('n'), fc.oneof(notAnInteger, fc.integer({ max: 0 }))),
  fc.tuple(fc.constant('stop_token_ids'), fc.oneof(fc.string(), fc.integer(), fc.array(fc.oneof(fc.string(), fc.integer({ max: -1 }), fc.double({ noInteger: true })), { minLength: 1, maxLength: 4 }))),
);

/** One top-level field set to the wrong type or an impossible value. */
const badTopLevel: fc.Arbitrary<[string, unknown]> = fc.oneof(
  fc.tuple(fc.constant('input_ids'), fc.oneof(
    fc.string(), fc.integer(), fc.constant([]), fc.constant({}),
    fc.array(fc.oneof(fc.integer({ max: -1 }), huge, fc.string({ maxLength: 3 }), fc.double({ noInteger: true }), fc.constant(null)), { minLength: 1, maxLength: 5 }),
    fc.constant([[]]), fc.constant([[1, 2], 3]),
  )),
  fc.tuple(fc.constant('sampling_params'), fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.array(fc.constant({}), { minLength: 1, maxLength: 2 }))),
  fc.tuple(fc.constantFrom('stream', 'return_logprob'), notABool),
  fc.tuple(fc.constant('rid'), fc.oneof(fc.integer(), fc.boolean(), fc.constant(''), fc.string({ minLength: 257, maxLength: 400 }), fc.array(fc.string(), { minLength: 1, maxLength: 2 }), fc.constant({}))),
  fc.tuple(fc.constant('logprob_start_len'), fc.oneof(notAnInteger, fc.integer({ max: -2 }), huge.filter((n) => n < 0))),
  fc.tuple(fc.constant('top_logprobs_num'), fc.oneof(notAnInteger, fc.integer({ max: -1 }))),
);

const wrongTypes: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(validBody, badSamplingValue).map(([b, [k, v]]) => json({ ...b, sampling_params: { ...b.sampling_params, [k]: v } })),
  fc.tuple(validBody, badTopLevel).map(([b, [k, v]]) => json({ ...b, [k]: v })),
  // Not one prompt: none, or two kinds at once.
  validBody.map(({ input_ids: _drop, ...rest }) => json(rest)),
  validBody.map((b) => json({ ...b, text: 'hello' })),
  validBody.map((b) => json({ ...b, input_embeds: [[0.1, 0.2]] })),
  // Not an object at all.
  fc.oneof(fc.integer(), fc.string(), fc.boolean(), fc.constant(null), fc.array(fc.integer())).map(json),
);

/** NaN, Infinity and friends as bare JSON tokens: not JSON at all. */
const nanTokens: fc.Arbitrary<Case> = fc.tuple(validBody, fc.constantFrom('NaN', 'Infinity', '-Infinity', 'nan', 'undefined', '+1', '01', '.5', '1.', '0x1F'), fc.constantFrom('max_new_tokens', 'temperature', 'top_p'))
  .map(([b, tok, key]) => ({ body: JSON.stringify(b).replace(/"sampling_params":\{/, `"sampling_params":{"${key}":${tok},`) }));

/** Deep nesting where a type is required, or anywhere (even an opaque field) past the depth cap. */
const deepNesting: fc.Arbitrary<Case> = fc.tuple(validBody, fc.integer({ min: 64, max: 60_000 }), fc.constantFrom('[', '{"a":'), fc.constantFrom('input_ids', 'sampling_params', 'max_new_tokens', 'opaque'))
  // Below the cap, {"a": {...}} is a well-formed object: fine as opaque data or as an unknown
  // sampling parameter, so only past the cap is it a case here.
  .filter(([, depth, open, where]) => (where !== 'opaque' && !(where === 'sampling_params' && open !== '[')) || depth > 600)
  .map(([b, depth, open, where]) => {
    const close = open === '[' ? ']' : '}';
    const nest = open.repeat(depth) + (open === '[' ? '1' : '1') + close.repeat(depth);
    const text = JSON.stringify(b);
    if (where === 'input_ids') return { body: text.replace(/"input_ids":\[[^\]]*\]/, `"input_ids":${nest}`) };
    if (where === 'sampling_params') return { body: text.replace(/"sampling_params":\{[^}]*\}/, `"sampling_params":${nest}`) };
    if (where === 'max_new_tokens') return { body: text.replace(/"max_new_tokens":\d+/, `"max_new_tokens":${nest}`) };
    return { body: text.slice(0, -1) + `,"custom_params":${nest}}` };
  });

/** Giant lists with one bad element somewhere (all-good giant lists would be valid requests). */
const giantArrays: fc.Arbitrary<Case> = fc.tuple(
  validBody,
  fc.integer({ min: 5_000, max: 60_000 }),
  fc.double({ min: 0, max: 1, noNaN: true }),
  fc.constantFrom<unknown>('x', -1, 1.5, null, 2 ** 40, [], {}),
  fc.constantFrom('input_ids', 'stop_token_ids', 'batch'),
).map(([b, n, at, bad, where]) => {
  const list: unknown[] = Array.from({ length: n }, (_, i) => 3 + (i % 30000));
  list[Math.floor(at * (n - 1))] = bad;
  if (where === 'input_ids') return json({ ...b, input_ids: list });
  if (where === 'stop_token_ids') return json({ ...b, sampling_params: { ...b.sampling_params, stop_token_ids: list } });
  return json({ ...b, input_ids: list.map((t) => (t === bad ? [] : [t])) });
});

/** Invalid UTF-8 inside a JSON string of an otherwise valid body. */
const invalidUtf8: fc.Arbitrary<Case> = fc.tuple(
  validBody,
  fc.constantFrom([0xff], [0xfe], [0xc3, 0x28], [0xa0, 0xa1], [0xe2, 0x28, 0xa1], [0xe2, 0x82], [0xf0, 0x28, 0x8c, 0xbc], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]),
  fc.constantFrom('rid', 'custom_params', 'lora_path'),
  fc.string({ maxLength: 8 }),
).map(([b, bytes, key, pad]) => {
  const text = JSON.stringify({ ...b, [key]: `${pad}@@BAD@@${pad}` });
  const [head, tail] = text.split('@@BAD@@') as [string, string];
  return { body: Buffer.concat([Buffer.from(head, 'utf8'), Buffer.from(bytes), Buffer.from(tail, 'utf8')]) };
});

/** A valid body cut short, or followed by garbage. */
const truncated: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(validBody, fc.double({ min: 0, max: 0.9999, noNaN: true })).map(([b, f]) => {
    const text = JSON.stringify(b);
    return { body: text.slice(0, Math.floor(f * (text.length - 1))) };
  }),
  fc.tuple(validBody, fc.constantFrom('}', ']', ',', 'x', '{}', ' 1', '"')).map(([b, junk]) => ({ body: JSON.stringify(b) + junk })),
);

/** A valid body sent as something other than JSON (FastAPI refuses these; so must the router). */
const wrongContentType: fc.Arbitrary<Case> = fc.tuple(
  validBody,
  fc.constantFrom('application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/html', 'text/csv', 'application/xml', 'application/octet-stream', 'image/png', 'application/jsonx', 'text/json-ish', 'application/x-ndjson'),
).map(([b, ct]) => ({ body: JSON.stringify(b), contentType: ct }));

/** Categories FastAPI refuses before any field is read: the router answers, no worker sees them. */
const ROUTER_ONLY: [string, fc.Arbitrary<Case>, number][] = [
  ['NaN and Infinity as bare tokens', nanTokens, 1000],
  ['invalid UTF-8', invalidUtf8, 1500],
  ['truncated JSON', truncated, 2500],
  ['wrong content types', wrongContentType, 1200],
];
/** Categories where some cases are the worker's to refuse (a value only SGLang can judge). */
const MIXED: [string, fc.Arbitrary<Case>, number][] = [
  ['wrong types and impossible values', wrongTypes, 3000],
  ['deep nesting', deepNesting, 600],
  ['giant arrays', giantArrays, 300],
];
const TOTAL = [...ROUTER_ONLY, ...MIXED].reduce((n, c) => n + c[2], 0);

describe('hostile /generate bodies', () => {
  let bench: Bench;
  let pool: Pool;
  beforeAll(async () => {
    bench = await startBench([{ tokenIntervalMs: 0 }], { maxBodyBytes: MAX_BODY });
    pool = new Pool(bench.router.url, { connections: 8 });
  });
  afterAll(async () => {
    await pool.close();
    await bench.close();
  });

  it(`answers ${TOTAL} broken requests as SGLang does, never with a 5xx, and blames no worker`, async () => {
    const statuses = new Map<number, number>();
    /** One exchange; checks the answer is one SGLang gives. Returns whether the router refused it itself. */
    const post = async (c: Case): Promise<void> => {
      const res = await pool.request({
        path: '/generate',
        method: 'POST',
        headers: { 'content-type': c.contentType ?? 'application/json' },
        body: c.body,
      });
      const text = await res.body.text();
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      const ct = String(res.headers['content-type']);
      const where = `status ${res.statusCode} for ${String(c.body).slice(0, 200)}: ${text.slice(0, 200)}`;
      if (res.statusCode === 200 && ct.startsWith('text/event-stream')) {
        // A stream the worker served or refused in-band (a ValueError): whole frames, then [DONE].
        if (!text.endsWith('data: [DONE]\n\n')) throw new Error(where);
        return;
      }
      if (res.statusCode !== 200 && res.statusCode !== 400) throw new Error(where);
      expect(ct, where).toMatch(/^application\/json/);
      const body = JSON.parse(text) as Record<string, unknown>;
      if (res.statusCode === 200) return;
      // SGLang's two 400 shapes: FastAPI's validation error, or a request's ValueError.
      const message = body.object === 'error' ? body.message : (body.error as { message?: unknown } | undefined)?.message;
      if (typeof message !== 'string' || message.length === 0) throw new Error(where);
      if (body.object === 'error') expect(body, where).toMatchObject({ param: null, code: 400 });
    };
    // Categories run side by side over one keep-alive pool: 10,000 round trips in seconds.
    await Promise.all(ROUTER_ONLY.map(([, arb, numRuns], i) => fc.assert(fc.asyncProperty(arb, post), { numRuns, seed: 7000 + i, endOnFailure: true })));
    const stats = bench.workers[0]!.stats();
    expect(stats.requestsStarted, `forwarded rids: ${stats.rids.slice(0, 5).join(', ')}`).toBe(0);
    await Promise.all(MIXED.map(([, arb, numRuns], i) => fc.assert(fc.asyncProperty(arb, post), { numRuns, seed: 7100 + i, endOnFailure: true })));
    expect([...statuses.keys()].every((s) => s === 200 || s === 400)).toBe(true);

    // Still up, still serving, and the worker was never blamed for a client's bad values.
    const w = bench.router.workers()[0]!;
    expect(w.health).toBe('healthy');
    expect(w.circuit).toBe('closed');
    const ok = await fetch(bench.router.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [5, 6], sampling_params: { max_new_tokens: 2 } }) });
    expect(ok.status).toBe(200);
  }, 170_000);

  it('reads JSON without a content type or with a +json or charset variant (as FastAPI does), and refuses text/plain as FastAPI does', async () => {
    for (const ct of [undefined, 'application/json; charset=utf-8', 'application/vnd.api+json', 'Application/JSON']) {
      const res = await fetch(bench.router.url + '/generate', {
        method: 'POST',
        headers: ct ? { 'content-type': ct } : {},
        body: Buffer.from(JSON.stringify({ input_ids: [5, 6], sampling_params: { max_new_tokens: 1 } })),
      });
      expect(res.status, `content-type ${ct}`).toBe(200);
    }
    const plain = await fetch(bench.router.url + '/generate', { method: 'POST', body: JSON.stringify({ input_ids: [5, 6], sampling_params: { max_new_tokens: 1 } }) });
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ object: 'error', type: 'Bad Request', code: 400 });
  });

  it('never echoes a rid into a header it cannot be (no blamed worker, no 500)', async () => {
    for (const [rid, stream] of [['line\nbreak', true], ['line\r\nx-evil: 1', false], ['€uro', false], ['€uro', true], ['tab\tok', false]] as const) {
      const res = await fetch(bench.router.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 3 }, stream, rid }) });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(res.headers.get('x-evil')).toBeNull();
      expect(text).toContain(JSON.stringify(rid).slice(1, -1));
    }
    const w = bench.router.workers()[0]!;
    expect(w.health).toBe('healthy');
    const rids = new Set<string>(['line\nbreak', 'line\r\nx-evil: 1', '€uro', 'tab\tok']);
    const rows = bench.router.traceRows({ kind: 'attempt' }).filter((r) => rids.has(r.request_id));
    expect(rows).toHaveLength(5);
    expect(rows.filter((r) => r.kind === 'attempt' && r.outcome !== 'finished')).toEqual([]);
  });
});

describe('limits against slow and greedy clients', () => {
  let bench: Bench;
  beforeAll(async () => {
    bench = await startBench([{ tokenIntervalMs: 40 }], {
      maxBodyBytes: 64 * 1024,
      bodyTimeoutMs: 400,
      headersTimeoutMs: 400,
      maxConcurrentRequests: 3,
    });
  });
  afterAll(async () => {
    await bench.close();
  });

  it('refuses a body over the cap with 413, by its declared length and when it streams in without one', async () => {
    const declared = await rawExchange(bench.router.url, (s) => {
      s.write(`POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n{"input_ids":[`);
    });
    expect(statusOf(declared.text)).toBe(413);
    expect(bodyOf(declared.text)).toMatchObject({ object: 'error', type: '413', code: 413, message: expect.stringMatching(/larger than/) });

    const chunked = await rawExchange(bench.router.url, async (s) => {
      s.write('POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n');
      const piece = '1,'.repeat(8 * 1024);
      for (let i = 0; i < 10 && !s.destroyed; i++) {
        s.write(`${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`);
        await sleep(5);
      }
    });
    expect(statusOf(chunked.text)).toBe(413);
    expect(bench.workers[0]!.stats().requestsStarted).toBe(0);
  });

  it('answers 408 to a body that trickles in (slowloris on the body)', async () => {
    const r = await rawExchange(bench.router.url, async (s) => {
      s.write('POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"in');
      for (let i = 0; i < 20 && !s.destroyed; i++) {
        await sleep(100);
        s.write(' ');
      }
    });
    expect(statusOf(r.text)).toBe(408);
    expect(bodyOf(r.text)).toMatchObject({ object: 'error', type: '408', code: 408, message: expect.stringMatching(/not received within 400 ms/) });
    expect(r.closed).toBe(true);
    expect(r.elapsedMs).toBeLessThan(3000);
  });

  it('closes a connection whose headers trickle in (slowloris on the headers)', async () => {
    const r = await rawExchange(bench.router.url, async (s) => {
      s.write('POST /generate HTTP/1.1\r\nhost: x\r\n');
      for (let i = 0; i < 40 && !s.destroyed; i++) {
        await sleep(100);
        s.write(`x-slow-${i}: 1\r\n`);
      }
    }, 6000);
    expect(r.closed).toBe(true);
    expect(r.elapsedMs).toBeLessThan(3000);
    expect([0, 408]).toContain(statusOf(r.text));
  });

  it('answers 503 with a clear message above the concurrent-request cap, and recovers', async () => {
    const ac = new AbortController();
    const long = () => fetch(bench.router.url + '/generate', { method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [9, 9], sampling_params: { max_new_tokens: 200 }, stream: true }) });
    const held = await Promise.all([long(), long(), long()]);
    for (const h of held) expect(h.status).toBe(200);
    const refused = await fetch(bench.router.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [9, 9], sampling_params: { max_new_tokens: 1 } }) });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ object: 'error', code: 503, message: expect.stringMatching(/limit of 3 concurrent requests/) });
    ac.abort();
    await Promise.all(held.map((h) => h.body?.cancel().catch(() => undefined)));
    await waitUntil(async () => {
      const res = await fetch(bench.router.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [9, 9], sampling_params: { max_new_tokens: 1 } }) });
      await res.text();
      return res.status === 200;
    }, 5000, 'a slot to free up');
  });
});
