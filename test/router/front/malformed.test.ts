// Bodies FastAPI refuses, unknown paths and wrong methods: the router answers them itself, with
// SGLang's status and shape (400 {"object":"error",...,"type":"Bad Request"}, 404/405 {"detail"}),
// and forwards none of them. Each is compared with the simulated worker's own answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../../router/index.ts';
import { pyRepr, validationMessage } from '../../../router/formats/sglang/errors.ts';
import { send, type Exchange } from './helpers.ts';

let w: SimWorker;
let r: RouterHandle;

beforeAll(async () => {
  w = await startWorker({ tokenIntervalMs: 0 });
  r = await startRouter({ port: 0, workers: [w.url], healthIntervalMs: 0 });
});
afterAll(async () => {
  await r.close();
  await w.close();
});

function expectBadRequest(x: Exchange): Record<string, unknown> {
  expect(x.status, x.text).toBe(400);
  expect(x.contentType).toMatch(/^application\/json/);
  const body = JSON.parse(x.text) as Record<string, unknown>;
  expect(Object.keys(body)).toEqual(['object', 'message', 'type', 'param', 'code']);
  expect(body).toMatchObject({ object: 'error', type: 'Bad Request', param: null, code: 400 });
  expect(typeof body.message).toBe('string');
  return body;
}

describe('malformed /generate bodies: SGLang\'s 400, from the router, forwarded to no worker', () => {
  const cases: [string, string, string | null][] = [
    ['not JSON', '{"input_ids": [1, 2', 'json_invalid'],
    ['trailing garbage', '{"input_ids": [1]} x', 'json_invalid'],
    ['a JSON list', '[1, 2, 3]', 'dataclass_type'],
    ['a JSON string', '"hello"', 'dataclass_type'],
    ['null', 'null', 'dataclass_type'],
    ['rid of the wrong type', '{"input_ids": [1, 2], "rid": 5}', 'string_type'],
    ['stream of the wrong type', '{"input_ids": [1, 2], "stream": {"a": 1}}', 'bool_type'],
    ['stream that no coercion reads', '{"input_ids": [1, 2], "stream": "maybe"}', 'bool_parsing'],
    ['stream explicitly null (stream: bool = False is not Optional)', '{"input_ids": [1, 2], "stream": null}', 'bool_type'],
    ['input_ids a string', '{"input_ids": "1 2 3"}', 'list_type'],
    ['input_ids with a fraction', '{"input_ids": [1, 2.5]}', 'int_from_float'],
    ['input_ids with an object', '{"input_ids": [1, {}]}', 'int_type'],
    ['sampling_params a string', '{"input_ids": [1], "sampling_params": "greedy"}', 'dict_type'],
    ['return_logprob an object', '{"input_ids": [1], "return_logprob": {}}', 'bool_type'],
    ['logprob_start_len a word', '{"input_ids": [1], "logprob_start_len": "last"}', 'int_parsing'],
    ['text a number', '{"text": 5}', 'string_type'],
  ];
  it.each(cases)('%s', async (_name, body, type) => {
    const before = w.stats().requestsStarted;
    const viaRouter = await send(r.url, '/generate', { body });
    const parsed = expectBadRequest(viaRouter);
    if (type) expect(parsed.message).toContain(`'type': '${type}'`);
    expect(parsed.message).toMatch(/^\[\{'type': '/);
    expect(w.stats().requestsStarted).toBe(before);
    // The worker refuses the same body with the same status and shape. (The simulator reads an
    // explicit `stream: null` as false; pydantic refuses None for `stream: bool = False`.)
    if (body.includes('"stream": null')) return;
    const direct = await send(w.url, '/generate', { body });
    expect(direct.status).toBe(400);
    expect(Object.keys(JSON.parse(direct.text) as object)).toEqual(['object', 'message', 'type', 'param', 'code']);
  });

  it('a body that is not JSON by its content type is validated as bytes, like FastAPI does', async () => {
    const before = w.stats().requestsStarted;
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
      const x = await send(r.url, '/generate', { body: '{"input_ids": [1, 2]}', contentType: ct });
      const body = expectBadRequest(x);
      expect(body.message).toContain("'type': 'dataclass_type'");
      expect(body.message).toContain("'input': b'{\"input_ids\": [1, 2]}'");
    }
    expect(w.stats().requestsStarted).toBe(before);
  });

  it('an empty body is missing', async () => {
    const body = expectBadRequest(await send(r.url, '/generate', { body: '' }));
    expect(body.message).toBe("[{'type': 'missing', 'loc': ('body',), 'msg': 'Field required', 'input': None}]");
  });

  it('bytes that are not UTF-8, and nesting past the cap, get FastAPI\'s "error parsing the body"', async () => {
    const bad = Buffer.concat([Buffer.from('{"input_ids": [1], "rid": "a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const before = w.stats().requestsStarted;
    const deep = `{"input_ids": [1], "custom_params": ${'['.repeat(2000)}${']'.repeat(2000)}}`;
    for (const b of [bad, Buffer.from(deep)]) {
      const x = await send(r.url, '/generate', { body: b });
      expect(x.status).toBe(400);
      expect(JSON.parse(x.text)).toEqual({ object: 'error', message: 'There was an error parsing the body', type: '400', param: null, code: 400 });
    }
    expect(w.stats().requestsStarted).toBe(before);
  });

  it('the message is the repr of pydantic\'s error list, as FastAPI prints it', () => {
    expect(validationMessage([{ type: 'string_type', loc: ['body', 'rid', 'str'], msg: 'Input should be a valid string', input: 5 }]))
      .toBe("[{'type': 'string_type', 'loc': ('body', 'rid', 'str'), 'msg': 'Input should be a valid string', 'input': 5}]");
    expect(pyRepr({ a: [true, null, 'it\'s'] })).toBe(`{'a': [True, None, "it's"]}`);
  });
});

describe('unknown paths and wrong methods: Starlette\'s answers, for every route', () => {
  const SGLANG_ROUTES: [string, string[]][] = [
    ['/generate', ['POST', 'PUT']],
    ['/health', ['GET']],
    ['/health_generate', ['GET']],
    ['/abort_request', ['POST']],
    ['/flush_cache', ['GET', 'POST']],
    ['/server_info', ['GET']],
    ['/get_server_info', ['GET']],
    ['/model_info', ['GET']],
    ['/get_model_info', ['GET']],
    ['/v1/models', ['GET']],
    ['/metrics', ['GET']],
  ];

  it('404 {"detail": "Not Found"} for a path neither serves', async () => {
    for (const path of ['/nope', '/generate/x', '/v1/chat', '/workers/w0/x']) {
      const a = await send(r.url, path);
      expect([a.status, a.text], path).toEqual([404, '{"detail":"Not Found"}']);
      expect(a.contentType).toBe('application/json');
      if (path.startsWith('/workers')) continue;
      const b = await send(w.url, path);
      expect([b.status, JSON.parse(b.text)]).toEqual([404, { detail: 'Not Found' }]);
    }
  });

  it('a known path with a trailing slash is redirected (307) to the path without it, as Starlette does', async () => {
    const a = await send(r.url, '/get_model_info/');
    expect(a.status).toBe(307);
    expect(String(a.headers.location)).toBe(`${r.url}/get_model_info`);
  });

  it.each(SGLANG_ROUTES)('405 {"detail": "Method Not Allowed"} on %s for every other method, as the worker says', async (path, allowed) => {
    for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH']) {
      if (allowed.includes(method)) continue;
      const a = await send(r.url, path, { method, body: method === 'GET' ? undefined : '{}' });
      expect([a.status, a.text], `${method} ${path}`).toEqual([405, '{"detail":"Method Not Allowed"}']);
      expect(a.headers.allow).toBe(allowed.join(', '));
      const b = await send(w.url, path, { method, body: method === 'GET' ? undefined : '{}' });
      expect(b.status, `worker: ${method} ${path}`).toBe(405);
      expect(JSON.parse(b.text)).toEqual({ detail: 'Method Not Allowed' });
    }
  });

  it('the router\'s own routes answer wrong methods the same way', async () => {
    for (const [method, path] of [['POST', '/health'], ['DELETE', '/workers'], ['POST', '/traces'], ['PUT', '/events']] as const) {
      const a = await send(r.url, path, { method, body: '{}' });
      expect([a.status, a.text], `${method} ${path}`).toEqual([405, '{"detail":"Method Not Allowed"}']);
    }
  });
});
