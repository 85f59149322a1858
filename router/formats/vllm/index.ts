// vLLM's native token-in/token-out generate API (`POST /inference/v1/generate`, served with
// `--tokens-only` or `--enable-scale-out`) as a wire format (the seam: ../../core/types.ts). Research
// notes with sources: ../../../../shared/docs/vllm-wire.md; checked against vLLM's
// vllm/entrypoints/scale_out/token_in_token_out/{serving,protocol}.py (docs/vllm.md).
import type { ServerResponse } from 'node:http';
import { admit } from '../../core/admission.ts';
import type { WireFormat } from '../../core/types.ts';
import { VLLM_TOKENS } from './tokens.ts';
import { VLLM_ADMISSION } from './admission.ts';
import { vllmAttemptBody } from './continuation.ts';
import { VLLM_LOAD } from './load.ts';
import { VLLM_ABORT_PATHS, probeVllm } from './probe.ts';
import { parseVllmRequest, type VllmRequest } from './request.ts';
import { VllmSession } from './session.ts';

/** vLLM's ErrorResponse (vllm/entrypoints/openai/engine/protocol.py): `{"error": ErrorInfo}`. */
export function vllmError(status: number, message: string, type: string): { error: { message: string; type: string; param: null; code: number } } {
  return { error: { message, type, param: null, code: status } };
}

const TYPES: Record<number, string> = { 400: 'BadRequestError', 404: 'NotFoundError', 500: 'InternalServerError', 503: 'ServiceUnavailableError' };

export const VLLM: WireFormat<'vllm'> = {
  name: 'vllm',
  workers: 'vllm',
  generatePath: '/inference/v1/generate',
  parse: (json, opts) => parseVllmRequest(json, opts),
  admit: (req, ctx) => admit(req as VllmRequest, ctx, VLLM_ADMISSION),
  attemptBody: (req, promptIds, spec, minNewTokens) => vllmAttemptBody(req as VllmRequest, promptIds, spec, minNewTokens),
  // The engine knows a request as `generate-tokens-<request_id>` (serving.py serve_tokens), at the
  // path the worker was probed to serve (probe.ts); with none, closing the connection aborts.
  abortRequest: (rid, served) => (served === null ? null : { path: served ?? VLLM_ABORT_PATHS[0], body: JSON.stringify({ request_ids: [`generate-tokens-${rid}`] }) }),
  session: (req, info, sink) => new VllmSession(req as VllmRequest, info, sink),
  writeRequestError(res: ServerResponse, _stream: boolean, status: number, message: string, headers: Record<string, string> = {}) {
    const text = JSON.stringify(vllmError(status, message, TYPES[status] ?? 'BadRequestError'));
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
    res.end(text);
  },
  errors: {
    body: (status, message) => vllmError(status, message, TYPES[status] ?? 'InternalServerError'),
    frame: (status, message) => vllmError(status, message, TYPES[status] ?? 'InternalServerError'),
  },
  tokens: VLLM_TOKENS,
  probe: probeVllm,
  // max_model_len itself (vllm/renderers/params.py TokenizeParams._token_len_check).
  requestBound: 'context_length',
  // /inference/v1/generate sends prompt_logprobs in a unary answer only, and every attempt streams.
  streamsPromptLogprobs: false,
  load: VLLM_LOAD,
};
