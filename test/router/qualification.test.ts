// The seed's live qualification, automated: two workers, 16 concurrent 256-token streams with
// logprobs, kill -9 one worker after 8 streams have started. All 16 must complete with token ids
// and logprobs equal to a fault-free run, and every stream of the killed worker must have been
// continued on the survivor. Real router and worker processes; a real SIGKILL.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel, promptLogprobs } from '../../sim/model.ts';
import { spawnRouter, stream, traceRows, type RouterProc, type StreamResult } from './harness/procs.ts';

let cluster: SimCluster;
let router: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 8 });
  router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--migration-limit', '3', '--policy', 'round_robin']);
});

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

it('16 streams, one of two workers killed after 8 started: 16/16 complete, token- and logprob-exact', async () => {
  const N = 16;
  const prompts = Array.from({ length: N }, (_, i) => Array.from({ length: 12 + i }, (_, j) => 100 + ((i * 7919 + j * 104729) % 30000)));
  let started = 0;
  let killed: Promise<void> | null = null;
  const victim = 0;
  const results: Promise<StreamResult>[] = prompts.map((prompt, i) =>
    stream(router.url, {
      rid: `qual-${i}`,
      input_ids: prompt,
      sampling_params: { max_new_tokens: 256, ignore_eos: true },
      return_logprob: true,
      top_logprobs_num: 3,
      logprob_start_len: 0,
    }, (n) => {
      if (n === 1 && ++started === 8) killed = cluster.kill(victim);
    }),
  );
  const answers = await Promise.all(results);
  await killed;
  expect(killed).not.toBeNull();

  const victimUrl = cluster.workers()[victim]!.url;
  let migrated = 0;
  for (const [i, a] of answers.entries()) {
    expect(a.error).toBeNull();
    expect(a.done).toBe(true);
    const last = a.frames.at(-1)!;
    const meta = last.meta_info as Record<string, unknown>;
    const ref = runModel(prompts[i]!, { max_new_tokens: 256, ignore_eos: true, top_logprobs_num: 3 });
    expect(last.output_ids).toEqual(ref.output_ids);
    expect((meta.output_token_logprobs as [number, number, null][]).map((x) => [x[0], x[1]])).toEqual(ref.output_ids.map((t, k) => [ref.output_logprobs[k], t]));
    expect((meta.output_top_logprobs as [number, number, null][][]).map((row) => row.map((x) => [x[0], x[1]]))).toEqual(ref.output_top_logprobs);
    const input = promptLogprobs(prompts[i]!, 0, 3);
    expect((meta.input_token_logprobs as [number | null, number, null][]).map((x) => x[0])).toEqual(input.logprobs);
    expect(meta.completion_tokens).toBe(256);
    expect(meta.prompt_tokens).toBe(prompts[i]!.length);
    expect(meta.finish_reason).toEqual({ type: 'length', length: 256 });
    expect(meta.id).toBe(`qual-${i}`);

    const rows = await traceRows(router.url, `request=qual-${i}&kind=attempt`);
    const first = rows.find((r) => r.attempt === 0)!;
    if (first.worker === victimUrl) {
      // Every stream of the killed worker was continued on the survivor, from where it stopped.
      expect(rows).toHaveLength(2);
      const cont = rows.find((r) => r.attempt === 1)!;
      expect(cont.worker).not.toBe(victimUrl);
      expect(cont.replayed_tokens).toBe(first.tokens);
      expect(cont.budget_before).toBe(256 - (first.tokens as number));
      expect((first.tokens as number) + (cont.tokens as number)).toBe(256);
      migrated++;
    } else {
      expect(rows).toHaveLength(1);
    }
  }
  console.log(`qualification: 16/16 streams complete and exact; ${migrated} migrated from the killed worker to the survivor`);
  expect(migrated).toBeGreaterThanOrEqual(4);
});
