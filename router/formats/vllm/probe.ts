// What a vLLM worker tells about itself. vLLM serves `GET /v1/models` with `owned_by: "vllm"`
// and `max_model_len` (vllm/entrypoints/openai/models/protocol.py ModelCard); its tokens API
// always answers token ids, as deltas. It advertises no sampling defaults a router can read.
//
// Which abort endpoint it serves depends on its version and flags
// (vllm/entrypoints/scale_out/token_in_token_out/api_router.py, and serve/disagg/api_router.py
// before it, each `attach_router`):
// - since vLLM PR #58588 (2026-10): `POST /inference/v1/abort_requests` wherever
//   `/inference/v1/generate` is, and the older `POST /abort_requests` too with `--tokens-only`;
// - before: `POST /abort_requests` only, and only with `--tokens-only`; a server started with
//   `--enable-scale-out` alone serves none, and only closing the connection aborts a request
//   (`@with_cancellation` on `generate`).
// Both take `{"request_ids": ["generate-tokens-<id>"]}`. A GET tells them apart without touching
// any request: FastAPI answers a POST-only route's GET with 405 (Starlette's Route.handle) and an
// unknown path with 404. A POST would not do: the RLHF dev router's own `/abort_requests`
// (serve/dev/rlhf/api_router.py) aborts every request when `request_ids` is empty or missing.
import type { Pool } from 'undici';
import { getJson, positiveInt, str } from '../../core/probe.ts';
import type { ProbeResult } from '../../core/types.ts';

/** vLLM's abort paths, newest first: the one under `/inference` is guarded by `--api-key` like generate. */
export const VLLM_ABORT_PATHS = ['/inference/v1/abort_requests', '/abort_requests'] as const;

/** The status of a GET on `path`, or null when the worker did not answer. */
async function getStatus(pool: Pool, path: string, timeoutMs: number): Promise<number | null> {
  try {
    const res = await pool.request({ path, method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    return res.statusCode;
  } catch {
    return null;
  }
}

/**
 * The abort path the worker serves: the first of VLLM_ABORT_PATHS that is not a 404; null when
 * both are (none served); undefined when it cannot be told (no answer, or an authentication
 * middleware answering for every path under its prefix), so the newest path is used.
 */
export async function probeAbortPath(pool: Pool, timeoutMs: number): Promise<string | null | undefined> {
  let unknown = false;
  for (const path of VLLM_ABORT_PATHS) {
    const status = await getStatus(pool, path, timeoutMs);
    if (status === 404) continue;
    if (status === null || status === 401 || status === 403) {
      unknown = true;
      continue;
    }
    return path;
  }
  return unknown ? undefined : null;
}

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
    // vLLM advertises no block size; prefix caching hits whole blocks, 16 tokens by default
    // (CacheConfig.block_size, set to 16 by the CUDA platform when not given). cache_aware's tree
    // pages by it, so it never counts a partial block as cached.
    pageSize: 16,
    abortPath: await probeAbortPath(pool, timeoutMs),
  };
}
