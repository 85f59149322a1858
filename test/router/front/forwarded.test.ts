// Values the router cannot use are never refused by the router: the body goes to one worker as
// the client wrote it, the worker answers, and the client gets that answer as the worker wrote it
// (the same bytes a direct call gets), never migrated. Values SGLang accepts are accepted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../../router/index.ts';
import { post, recordingProxy, send } from './helpers.ts';

let w: SimWorker;
let proxy: Awaited<ReturnType<typeof recordingProxy>>;
let r: RouterHandle;

beforeAll(async () => {
  w = await startWorker({ tokenIntervalMs: 0 });
  proxy = await recordingProxy(w.url);
  r = await startRouter({ port: 0, workers: [proxy.url], healthIntervalMs: 0, migrationLimit: 3 });
});
afterAll(async () => {
  await r.close();
  await proxy.close();
  await w.close();
});

const generateCalls = () => proxy.calls.filter((c) => c.path === '/generate');

/** Bodies SGLang refuses with its own message (or would read only by coercion): the worker's to answer. */
const UNUSABLE: [string, Record<string, unknown>][] = [
  ['max_new_tokens a string', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 'x' } }],
  ['a negative temperature', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4, temperature: -1 } }],
  ['top_k 0 while sampling', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4, temperature: 0.7, top_k: 0 } }],
  ['a penalty out of range', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 4, frequency_penalty: 3 } }],
  ['min_new_tokens above max_new_tokens', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 2, min_new_tokens: 3 } }],
  ['n 0', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 2, n: 0 } }],
  ['two grammars', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 2, regex: 'a', json_schema: '{}' } }],
  ['an empty prompt', { input_ids: [], sampling_params: { max_new_tokens: 2 } }],
  ['no prompt at all', { sampling_params: { max_new_tokens: 2 } }],
  ['a negative token id', { input_ids: [5, -1], sampling_params: { max_new_tokens: 2 } }],
];

describe.each([false, true])('stream=%s', (stream) => {
  it.each(UNUSABLE)('%s: the worker\'s own answer, byte for byte, from one worker, not migratable', async (name, body) => {
    const rid = `fw-${stream}-${name.replace(/\W+/g, '-')}`;
    const before = generateCalls().length;
    const viaRouter = await post(r.url, '/generate', { ...body, stream, rid });
    const sent = generateCalls().slice(before);
    // One upstream call, with the body exactly as the client wrote it.
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body).toBe(JSON.stringify({ ...body, stream, rid }));
    const direct = await post(w.url, '/generate', { ...body, stream, rid: `${rid}-direct` });
    expect(viaRouter.status).toBe(direct.status);
    expect(viaRouter.contentType).toBe(direct.contentType);
    expect(viaRouter.text.replaceAll(rid, 'RID')).toBe(direct.text.replaceAll(`${rid}-direct`, 'RID'));
    const row = r.traceRows({ request: rid, kind: 'request' })[0];
    expect(row).toMatchObject({ admitted: false, admission_reason: 'unparsed_field', attempts: 1 });
  });

  it('a value only pydantic\'s coercion could read goes to the worker too (it decides)', async () => {
    const body = { input_ids: [5, 6], sampling_params: { max_new_tokens: 2 }, return_logprob: 'yes', stream, rid: `coerce-${stream}` };
    const viaRouter = await post(r.url, '/generate', body);
    const direct = await post(w.url, '/generate', { ...body, rid: `coerce-${stream}-d` });
    expect(viaRouter.status).toBe(direct.status);
    expect(r.traceRows({ request: `coerce-${stream}`, kind: 'request' })[0]).toMatchObject({ admission_reason: 'unparsed_field' });
  });

  it('temperature 0 with top_k 0 is accepted (greedy sets top_k first) and may migrate', async () => {
    const rid = `greedy-k0-${stream}`;
    const res = await post(r.url, '/generate', { input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 3, temperature: 0, top_k: 0 }, stream, rid });
    expect(res.status).toBe(200);
    expect(res.text).not.toContain('"error"');
    expect(r.traceRows({ request: rid, kind: 'request' })[0]).toMatchObject({ admitted: true, admission_reason: null, outcome: 'finished' });
  });

  it('text with input_ids is read as input_ids (SGLang serves it from the ids), and the worker answers', async () => {
    const rid = `text-ids-${stream}`;
    const body = { text: 'ignored', input_ids: [5, 6, 7], sampling_params: { max_new_tokens: 3 }, stream };
    const viaRouter = await post(r.url, '/generate', { ...body, rid });
    const direct = await post(w.url, '/generate', { ...body, rid: `${rid}-d` });
    expect(viaRouter.status).toBe(direct.status);
    const row = r.traceRows({ request: rid, kind: 'request' })[0] as Record<string, unknown> | undefined;
    expect(row?.admission_reason).not.toBe('text_prompt');
    expect(row?.admission_reason).not.toBe('unparsed_field');
    expect(row?.prompt_tokens).toBe(3);
  });
});

it('a number JSON.parse cannot hold (a 64-bit bootstrap_room) reaches the worker exactly as written', async () => {
  const text = '{"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 2}, "rid": "big-room", "bootstrap_room": 9223372036854775807}';
  const before = generateCalls().length;
  const res = await send(r.url, '/generate', { body: text });
  expect(res.status).toBe(200);
  const sent = generateCalls().slice(before);
  expect(sent.map((c) => c.body)).toEqual([text]);
  expect(r.traceRows({ request: 'big-room', kind: 'request' })[0]).toMatchObject({ admission_reason: 'unparsed_field' });
});

it('a worker\'s refusal reaches the client in its own words (no rewording), also through a migratable path', async () => {
  // A token id past the vocabulary is well-typed: only the worker knows its vocabulary size.
  for (const stream of [false, true]) {
    const body = { input_ids: [5, 40_000], sampling_params: { max_new_tokens: 2 }, stream };
    const viaRouter = await post(r.url, '/generate', { ...body, rid: `vocab-${stream}` });
    const direct = await post(w.url, '/generate', { ...body, rid: `vocab-${stream}-d` });
    expect(viaRouter.status).toBe(direct.status);
    const message = (t: string) => {
      if (!stream) return (JSON.parse(t) as { error: { message: string } }).error.message;
      const frame = t.split('\n\n').find((f) => f.startsWith('data: {'))!;
      return (JSON.parse(frame.slice(6)) as { error: { message: string } }).error.message;
    };
    expect(message(viaRouter.text)).toBe(message(direct.text));
  }
});
