// What a vLLM worker tells about itself. vLLM serves `GET /v1/models` with `owned_by: "vllm"`
// and `max_model_len` (vllm/entrypoints/openai/models/protocol.py ModelCard); its tokens API
// always answers token ids, as deltas. It advertises no sampling defaults a router can read.
import type { Pool } from 'undici';
import { getJson, positiveInt, str } from '../../pool/probe.ts';
import type { ProbeResult } from '../types.ts';

export async function probeVllm(pool: Pool, timeoutMs: number): Promise<ProbeResult | null> {
  const models = await getJson(pool, '/v1/models', timeoutMs);
  const data = Array.isArray(models?.data) ? (models!.data as unknown[]) : [];
  const card = data.find((m): m is Record<string, unknown> => typeof m === 'object' && m !== null && (m as Record<string, unknown>).owned_by === 'vllm');
  if (!card) return null;
  return {
    tokenOnly: true,
    incremental: true,
    preferred: null,
    defaultMaxNewTokens: null,
    modelPath: str(card.root) ?? str(card.id),
    weightVersion: null,
    contextLength: positiveInt(card.max_model_len),
    maxTotalTokens: null,
  };
}
