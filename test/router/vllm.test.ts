// vLLM's token-in/token-out API through Baton: the router answers as the worker does (it cannot be
// told from it), and the seed's live qualification on vLLM — two simulated vLLM worker processes,
// 16 concurrent streams (and 16 unary requests), kill -9 one worker once 8 have started: all
// complete, exact in token ids, logprobs and usage, and every request of the killed worker is
// continued on the survivor.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startVllmWorker } from '../../sim/vllm/worker.ts';
import { vllmReference } from '../../sim/vllm/reference.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { SimWorker } from '../../sim/worker.ts';
import { comparable } from './harness/vllm-answer.ts';
import { spawnRouter, traceRows, type RouterProc } from './harness/procs.ts';

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});
afterAll(async () => {
  while (started.length) await started.pop()!.stop();
});

async function post(url: string, body: unknown): Promise<{ status: number; text: string; type: string }> {
  const res = await fetch(url + '/inference/v1/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') ?? '' };
}

describe('vLLM: the router answers as the worker does', () => {
  let w: SimWorker;
  let r: RouterHandle;
  it('for streams and unary requests, with and without logprobs and usage, and for a refusal', async () => {
    w = await startVllmWorker({ tokenIntervalMs: 0, prefillUsPerToken: 0 });
    r = await startRouter({ port: 0, workers: [w.url], healthIntervalMs: 0 });
    started.push({ stop: () => w.close() }, { stop: () => r.close() });
    expect(r.workers()[0]).toMatchObject({ format: 'vllm', token_only: true });
    const bodies: Record<string, unknown>[] = [];
    for (const stream of [false, true]) {
      for (const logprobs of [undefined, 2]) {
        for (const so of [undefined, { include_usage: true }, { include_usage: true, continuous_usage_stats: true }]) {
          if (!stream && so) continue;
          bodies.push({ token_ids: [11, 22, 33, 44], sampling_params: { max_tokens: 6, temperature: 0, ...(logprobs !== undefined ? { logprobs } : {}) }, stream, ...(so ? { stream_options: so } : {}) });
        }
      }
    }
    bodies.push({ token_ids: [5, 6, 99999], sampling_params: { max_tokens: 4 }, stream: true });
    bodies.push({ token_ids: [5, 6, 99999], sampling_params: { max_tokens: 4 } });
    let n = 0;
    for (const b of bodies) {
      const id = `same-${n++}`;
      const direct = await post(w.url, { ...b, request_id: id });
      const routed = await post(r.url, { ...b, request_id: id });
      expect([routed.status, routed.type.split(';')[0]], JSON.stringify(b)).toEqual([direct.status, direct.type.split(';')[0]]);
      expect(comparable(routed.text), JSON.stringify(b)).toEqual(comparable(direct.text));
    }
  });
});

async function vllmCluster(): Promise<SimCluster> {
  const c = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 8, format: 'vllm' });
  started.push(c);
  return c;
}

async function router(c: SimCluster): Promise<RouterProc> {
  const r = await spawnRouter([...c.workers().flatMap((w) => ['--worker', w.url]), '--migration-limit', '3', '--policy', 'round_robin', '--health-interval-ms', '500']);
  started.push(r);
  return r;
}

const N = 16;
const BUDGET = 200;
const prompts = Array.from({ length: N }, (_, i) => Array.from({ length: 12 + i }, (_, j) => 100 + ((i * 7919 + j * 104729) % 30000)));
const SP = { max_tokens: BUDGET, ignore_eos: true, logprobs: 3 };

describe('vLLM seed qualification: kill -9 one of two workers after 8 of 16 started', () => {
  for (const stream of [true, false]) {
    it(`${stream ? 'streams' : 'unary requests'}: 16/16 complete and exact in ids, logprobs and usage; every one of the killed worker's continued`, async () => {
      const c = await vllmCluster();
      const r = await router(c);
      const victim = c.workers()[0]!.url;
      let firstChunks = 0;
      let killed: Promise<void> | null = null;
      const answers = await Promise.all(prompts.map(async (prompt, i) => {
        const res = await fetch(r.url + '/inference/v1/generate', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ request_id: `vq-${stream}-${i}`, token_ids: prompt, sampling_params: SP, stream, stream_options: stream ? { include_usage: true } : undefined }),
        });
        if (!stream) {
          // Unary: kill once 8 requests are known to be generating (the router reports in-flight work).
          const j = (await res.json()) as Record<string, unknown>;
          const ch = (j.choices as Record<string, unknown>[])[0]!;
          return { ids: ch.token_ids as number[], logprobs: (ch.logprobs as { content: unknown[] }).content, usage: j.usage as Record<string, unknown>, finish: ch.finish_reason };
        }
        const out = { ids: [] as number[], logprobs: [] as unknown[], usage: null as Record<string, unknown> | null, finish: null as unknown };
        const reader = (res.body as ReadableStream<Uint8Array>).getReader();
        const decoder = new TextDecoder();
        let pending = '';
        let first = true;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          pending += decoder.decode(value, { stream: true });
          let k: number;
          while ((k = pending.indexOf('\n\n')) >= 0) {
            const f = pending.slice(0, k);
            pending = pending.slice(k + 2);
            if (f === 'data: [DONE]') continue;
            const j = JSON.parse(f.slice(6)) as Record<string, unknown>;
            expect(j.error).toBeUndefined();
            if (j.usage) out.usage = j.usage as Record<string, unknown>;
            const ch = (j.choices as Record<string, unknown>[])[0];
            if (!ch) continue;
            out.ids.push(...(ch.token_ids as number[]));
            out.logprobs.push(...(ch.logprobs as { content: unknown[] }).content);
            if (ch.finish_reason) out.finish = ch.finish_reason;
            if (first && ++firstChunks === 8) killed = c.kill(0);
            first = false;
          }
        }
        return out;
      }).concat(stream ? [] : [(async () => {
        // The unary variant's kill: when the victim has generated for a while (its stats say so).
        for (let t = 0; t < 200; t++) {
          await new Promise((res) => setTimeout(res, 20));
          const s = await c.stats(0).catch(() => null);
          if (s && s.tokensGenerated >= 8 * 20) break;
        }
        killed = c.kill(0);
        return null as never;
      })()]));
      await killed;
      expect(killed).not.toBeNull();
      let migrated = 0;
      for (let i = 0; i < N; i++) {
        const a = answers[i]!;
        const want = vllmReference(prompts[i]!, SP);
        expect(a.ids).toEqual(want.token_ids);
        expect(a.logprobs).toEqual(want.logprobs);
        expect(a.usage).toMatchObject(want.usage);
        expect(a.finish).toBe('length');
        const rows = await traceRows(r.url, `request=vq-${stream}-${i}&kind=attempt`);
        if (rows[0]!.worker === victim) {
          expect(rows).toHaveLength(2);
          expect(rows[1]!.worker).not.toBe(victim);
          expect(rows[1]!.replayed_tokens).toBe(rows[0]!.tokens);
          migrated++;
        } else expect(rows).toHaveLength(1);
      }
      console.log(`vLLM qualification (${stream ? 'stream' : 'unary'}): 16/16 exact; ${migrated} migrated from the killed worker`);
      // Round robin sends about half to the victim; every one of those was continued (checked above).
      expect(migrated).toBeGreaterThanOrEqual(6);
    }, 60_000);
  }
});
