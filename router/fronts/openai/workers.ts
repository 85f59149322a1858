// The workers that serve the OpenAI-family fronts (fronts/openai/api.ts: /v1/completions and
// /v1/chat/completions; fronts/openai/responses-api.ts: /v1/responses): the token-only worker format that serves
// a model, and the context length its workers bound a request with. Shared by those fronts, which
// do not import each other (docs/architecture.md, "Layers").
import type { WorkerPool } from '../../pool/worker-pool.ts';
import { FORMATS } from '../../formats/registry.ts';
import { speaks } from '../../pool/worker.ts';
import type { FormatName, WireFormat } from '../../core/types.ts';

/**
 * The context length a request is checked against (request.ts: prompt + max_tokens ≤ it, and the
 * default max_tokens is the rest), as the workers of `format` bound a request
 * (`WireFormat.requestBound`): the smallest context length its probed workers report (vLLM's
 * max_model_len), or the scheduler's bound (WorkerPool.maxReqLen: SGLang's context_len − 1).
 */
export function contextLengthFor(pool: Pick<WorkerPool, 'list' | 'maxReqLen'>, format: FormatName): number | null {
  if (FORMATS.find((f) => f.workers === format)?.requestBound !== 'context_length') return pool.maxReqLen(format);
  let min: number | null = null;
  for (const w of pool.list()) {
    if (!w.probed || w.format !== format || w.contextLength === null) continue;
    if (min === null || w.contextLength < min) min = w.contextLength;
  }
  return min;
}

/**
 * The worker format whose eligible workers serve `model`, or null: of the formats with a token
 * reader (`WireFormat.tokens`), in the registry's order (SGLang first).
 */
export function workerFormatFor(pool: Pick<WorkerPool, 'list'>, model: string): WireFormat | null {
  const now = Date.now();
  for (const f of FORMATS) {
    if (!f.tokens) continue;
    if (pool.list().some((w) => speaks(w, f.workers) && w.eligible(now) && (w.modelPath === null || w.modelPath === model))) return f;
  }
  return null;
}
