// What a worker tells about itself: token-only or text (skip_tokenizer_init), cumulative or
// incremental streaming, and its preferred sampling defaults (which take part in admission).
import type { Pool } from 'undici';

export interface ProbeResult {
  tokenOnly: boolean | null;
  incremental: boolean | null;
  defaultMaxNewTokens: number | null;
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

/** SGLang keeps preferred_sampling_params as the JSON string it was given on the command line. */
export function preferredMaxNewTokens(v: unknown): number | null {
  let obj = v;
  if (typeof v === 'string') {
    try {
      obj = JSON.parse(v);
    } catch {
      return null;
    }
  }
  if (typeof obj !== 'object' || obj === null) return null;
  const m = (obj as Record<string, unknown>).max_new_tokens;
  return typeof m === 'number' && Number.isInteger(m) && m >= 0 ? m : null;
}

export async function probeWorker(pool: Pool, timeoutMs: number): Promise<ProbeResult | null> {
  const server = (await getJson(pool, '/server_info', timeoutMs)) ?? (await getJson(pool, '/get_server_info', timeoutMs));
  const model = (await getJson(pool, '/get_model_info', timeoutMs)) ?? (await getJson(pool, '/model_info', timeoutMs));
  if (!server && !model) return null;
  const flag = (v: unknown) => (typeof v === 'boolean' ? v : null);
  const incremental = flag(server?.incremental_streaming_output) ?? flag(server?.stream_output);
  return {
    tokenOnly: flag(server?.skip_tokenizer_init),
    incremental: server ? (incremental ?? false) : null,
    defaultMaxNewTokens: preferredMaxNewTokens(server?.preferred_sampling_params ?? model?.preferred_sampling_params),
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
