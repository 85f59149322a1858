// The workers that serve the OpenAI-family fronts (fronts/openai/api.ts: /v1/completions and
// /v1/chat/completions; fronts/openai/responses-api.ts: /v1/responses): the token-only worker format that serves
// a model, and the context length its workers bound a request with. Shared by those fronts, which
// do not import each other (docs/architecture.md, "Layers").
import type { WorkerPool } from '../../pool/worker-pool.ts';
import { formatNamed } from '../../formats/registry.ts';
import type { FormatName, WireFormat } from '../../core/types.ts';

/** Worker formats that can serve the front, in order of preference. */
const TOKEN_FORMATS: FormatName[] = ['sglang', 'vllm'];

/**
 * The context length a request is checked against (request.ts: prompt + max_tokens ≤ it, and the
 * default max_tokens is the rest), as the workers of `format` bound a request. vLLM's is
 * max_model_len itself (vllm/renderers/params.py TokenizeParams._token_len_check), the smallest
 * its probed workers report; SGLang's scheduler takes at most context_len − 1 (WorkerPool.maxReqLen).
 */
export function contextLengthFor(pool: Pick<WorkerPool, 'list' | 'maxReqLen'>, format: FormatName): number | null {
  if (format !== 'vllm') return pool.maxReqLen(format);
  let min: number | null = null;
  for (const w of pool.list()) {
    if (!w.probed || w.format !== 'vllm' || w.contextLength === null) continue;
    if (min === null || w.contextLength < min) min = w.contextLength;
  }
  return min;
}

/** The worker format whose eligible workers serve `model` (SGLang first), or null. */
export function workerFormatFor(pool: Pick<WorkerPool, 'list'>, model: string): WireFormat | null {
  const now = Date.now();
  for (const name of TOKEN_FORMATS) {
    if (pool.list().some((w) => (w.format ?? 'sglang') === name && w.eligible(now) && (w.modelPath === null || w.modelPath === model))) return formatNamed(name);
  }
  return null;
}
