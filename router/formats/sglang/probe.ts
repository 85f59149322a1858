// What an SGLang worker tells about itself: token-only or text (skip_tokenizer_init), cumulative
// or incremental streaming, the model and weights it serves, its context length, and its
// preferred sampling defaults (which take part in admission: SGLang merges
// `{**preferred_sampling_params, **request}`).
import type { Pool } from 'undici';
import { getJson, positiveInt, preferredMaxNewTokens, preferredParams, str } from '../../core/probe.ts';
import type { ProbeResult } from '../../core/types.ts';

export async function probeWorker(pool: Pool, timeoutMs: number): Promise<ProbeResult | null> {
  const server = (await getJson(pool, '/server_info', timeoutMs)) ?? (await getJson(pool, '/get_server_info', timeoutMs));
  const model = (await getJson(pool, '/model_info', timeoutMs)) ?? (await getJson(pool, '/get_model_info', timeoutMs));
  // SGLang's own keys: vLLM serves a /server_info too (in dev mode), of another shape.
  if (!(server && 'skip_tokenizer_init' in server) && !(model && 'model_path' in model)) return null;
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
    // ServerArgs.page_size: the radix cache matches whole pages (radix_cache.py, page-aligned keys).
    pageSize: positiveInt(server?.page_size),
    // The scheduler streams every `req.sampling_params.stream_interval or self.stream_interval`
    // tokens (scheduler_output_processor_mixin.py `stream_output_generation`; the second is
    // ServerArgs.stream_interval, in /server_info), the request's merged over the preferred
    // sampling params (tokenizer_manager.py `_create_tokenized_object`).
    streamInterval: positiveInt(preferred?.stream_interval) ?? positiveInt(server?.stream_interval),
    // ServerArgs.disaggregation_mode / disaggregation_bootstrap_port (server_args.py), which
    // /server_info reports as `dataclasses.asdict(server_args)` (http_server.py get_server_info).
    disaggregationMode: server?.disaggregation_mode === 'prefill' || server?.disaggregation_mode === 'decode' ? server.disaggregation_mode : null,
    bootstrapPort: positiveInt(server?.disaggregation_bootstrap_port),
  };
}
