// In-process fixtures for the property tests: simulated workers (cumulative and incremental),
// each behind a fault proxy, and routers over them with a given migration limit. Real sockets on
// loopback, no mocks; in-process only for speed (the integration tests use real processes).
import { startWorker, type SimWorker } from '../../../sim/worker.ts';
import { startVllmWorker } from '../../../sim/vllm/worker.ts';
import { startRouter, type RouterHandle } from '../../../router/index.ts';
import type { RouterConfig } from '../../../router/config.ts';
import { FaultBook, FaultProxy, type Fault } from './fault-proxy.ts';
import { foldText } from './fold-text.ts';

export type Mode = 'cumulative' | 'incremental' | 'mixed';

export class Fixture {
  private workers: SimWorker[] = [];
  readonly proxies: FaultProxy[] = [];
  readonly book = new FaultBook();
  readonly modeOf = new Map<string, 'cumulative' | 'incremental'>();
  private routers = new Map<string, RouterHandle>();

  /** Each worker's weight_version (the default weights unless `weightVersions` says otherwise). */
  readonly versionOf = new Map<string, string>();

  static async start(mode: Mode, n = 5, weightVersions: string[] = [], format: 'sglang' | 'vllm' = 'sglang'): Promise<Fixture> {
    const f = new Fixture();
    for (let i = 0; i < n; i++) {
      const incremental = format === 'vllm' || mode === 'incremental' || (mode === 'mixed' && i % 2 === 1);
      const weightVersion = weightVersions[i] ?? 'default';
      const w = format === 'vllm'
        ? await startVllmWorker({ tokenIntervalMs: 0, prefillUsPerToken: 0, weightVersion })
        : await startWorker({ tokenIntervalMs: 0, incremental, prefillUsPerToken: 0, weightVersion });
      f.workers.push(w);
      const p = await new FaultProxy(w.url, f.book).start();
      f.proxies.push(p);
      f.modeOf.set(p.url, incremental ? 'incremental' : 'cumulative');
      f.versionOf.set(p.url, weightVersion);
    }
    return f;
  }

  async router(limit: number, extra: Partial<RouterConfig> = {}): Promise<RouterHandle> {
    const key = `${limit}:${JSON.stringify(extra)}`;
    let r = this.routers.get(key);
    if (!r) {
      r = await startRouter({
        port: 0,
        workers: this.proxies.map((p) => p.url),
        migrationLimit: limit,
        benchMs: 0, // each case starts with every worker eligible
        circuitFailureThreshold: 1_000_000,
        healthIntervalMs: 0,
        interTokenTimeoutMs: 10_000,
        ...extra,
      });
      this.routers.set(key, r);
    }
    return r;
  }

  schedule(caseId: string, faults: (Fault | null)[]): void {
    this.book.schedules.set(caseId, faults);
  }

  /** Upstream calls of one logical request, over all workers, in arrival order. */
  calls(caseId: string) {
    return this.book.calls.get(caseId) ?? [];
  }

  async close(): Promise<void> {
    for (const r of this.routers.values()) await r.close();
    for (const p of this.proxies) await p.close();
    for (const w of this.workers) await w.close();
  }
}

export interface Answer {
  status: number;
  /** The assembled answer (unary body, or the stream folded per the client's mode). */
  body: Record<string, unknown> | null;
  error: string | null;
  frames: Record<string, unknown>[];
  headers: Headers;
}

/** Send a /generate and fold the answer the way an SGLang client would. */
export async function generate(url: string, body: Record<string, unknown>, incrementalClient = false): Promise<Answer> {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return foldText(res.status, res.headers, await res.text(), Boolean(body.stream), incrementalClient);
}

type Meta = Record<string, unknown>;
const OUTPUT_LISTS = ['output_token_logprobs', 'output_top_logprobs'];

export function fold(frames: Record<string, unknown>[], incremental: boolean): Record<string, unknown> {
  if (!incremental) {
    // Cumulative: every chunk extends the previous one; the last holds the whole answer.
    for (let i = 1; i < frames.length; i++) {
      const a = frames[i - 1]!.output_ids as number[];
      const b = frames[i]!.output_ids as number[];
      if (b.length < a.length || a.some((t, j) => b[j] !== t)) throw new Error(`cumulative chunk ${i} does not extend chunk ${i - 1}`);
    }
    return frames.at(-1)!;
  }
  const ids: number[] = [];
  const lists: Record<string, unknown[]> = {};
  for (const f of frames) {
    ids.push(...(f.output_ids as number[]));
    const m = f.meta_info as Meta;
    for (const k of OUTPUT_LISTS) if (Array.isArray(m[k])) (lists[k] ??= []).push(...(m[k] as unknown[]));
  }
  const last = frames.at(-1)!;
  return { ...last, output_ids: ids, meta_info: { ...(last.meta_info as Meta), ...lists } };
}

/** The parts of an answer a migration must not change. */
export function essence(a: Record<string, unknown>): Record<string, unknown> {
  const m = a.meta_info as Meta;
  return {
    output_ids: a.output_ids,
    finish_reason: m.finish_reason,
    prompt_tokens: m.prompt_tokens,
    completion_tokens: m.completion_tokens,
    output_token_logprobs: m.output_token_logprobs,
    output_top_logprobs: m.output_top_logprobs,
    input_token_logprobs: m.input_token_logprobs,
    input_top_logprobs: m.input_top_logprobs,
    // Counters that grow with the output: rebased across attempts (docs/trace-rows.md).
    output_token_logprobs_length: m.output_token_logprobs_length,
    reasoning_tokens: m.reasoning_tokens,
    num_retractions: m.num_retractions,
  };
}

export async function waitFor<T>(fn: () => T | undefined | null | false, ms = 3000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}
