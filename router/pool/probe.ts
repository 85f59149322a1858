// What a worker tells about itself: token-only or text (skip_tokenizer_init), cumulative or
// incremental streaming, the model and weights it serves, its context length, and its
// preferred sampling defaults (which take part in admission: SGLang merges
// `{**preferred_sampling_params, **request}`).
import type { Pool } from 'undici';

export interface ProbeResult {
  tokenOnly: boolean | null;
  incremental: boolean | null;
  /** preferred_sampling_params as an object (null when none is advertised). */
  preferred: Record<string, unknown> | null;
  defaultMaxNewTokens: number | null;
  modelPath: string | null;
  weightVersion: string | null;
  contextLength: number | null;
  maxTotalTokens: number | null;
}

async function getJson(pool: Pool, path: string, timeoutMs: number): Promise<Record<string, unknown> | null> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await pool.request({ path, method: 'GET', signal });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return null;
    }
    const v = (await res.body.json()) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * SGLang advertises preferred_sampling_params as an object since December 2025; before, as the
 * JSON string it was given on the command line. Both are read.
 */
export function preferredParams(v: unknown): Record<string, unknown> | null {
  let obj = v;
  if (typeof v === 'string') {
    try {
      obj = JSON.parse(v);
    } catch {
      return null;
    }
  }
  return typeof obj === 'object' && obj !== null && !Array.isArray(obj) ? (obj as Record<string, unknown>) : null;
}

export function preferredMaxNewTokens(v: unknown): number | null {
  const m = preferredParams(v)?.max_new_tokens;
  return typeof m === 'number' && Number.isInteger(m) && m >= 0 ? m : null;
}

function positiveInt(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null;
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v.length > 0 ? v : null;
}

export async function probeWorker(pool: Pool, timeoutMs: number): Promise<ProbeResult | null> {
  const server = (await getJson(pool, '/server_info', timeoutMs)) ?? (await getJson(pool, '/get_server_info', timeoutMs));
  const model = (await getJson(pool, '/model_info', timeoutMs)) ?? (await getJson(pool, '/get_model_info', timeoutMs));
  if (!server && !model) return null;
  const flag = (v: unknown) => (typeof v === 'boolean' ? v : null);
  const incremental = flag(server?.incremental_streaming_output) ?? flag(server?.stream_output);
  const preferred = preferredParams(server?.preferred_sampling_params ?? model?.preferred_sampling_params);
  return {
    tokenOnly: flag(server?.skip_tokenizer_init),
    incremental: server ? (incremental ?? false) : null,
    preferred,
    defaultMaxNewTokens: preferredMaxNewTokens(preferred),
    modelPath: str(model?.model_path) ?? str(server?.model_path),
    weightVersion: str(model?.weight_version) ?? str(server?.weight_version),
    contextLength: positiveInt(server?.context_length),
    maxTotalTokens: positiveInt(server?.max_total_num_tokens),
  };
}

export async function checkHealth(pool: Pool, timeoutMs: number): Promise<boolean> {
  try {
    const res = await pool.request({ path: '/health', method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}
