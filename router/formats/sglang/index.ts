// SGLang's native /generate as a wire format (the seam: ../../core/types.ts). Client side: the body is
// read by request.ts, refusals and error bodies are SGLang's (formats/sglang/errors.ts); worker
// side: attempt bodies (continuation.ts), frames (session.ts, sse.ts, stitch.ts), in-band
// failure marks (failure.ts), abort (`/abort_request`) and probe (probe.ts).
import type { ServerResponse } from 'node:http';
import { admit } from '../../core/admission.ts';
import { writeValueError, sendJson } from './errors.ts';
import type { WireFormat } from '../../core/types.ts';
import { SGLANG_TOKENS } from './tokens.ts';
import { SGLANG_ADMISSION } from './admission.ts';
import { attemptBody } from './continuation.ts';
import { SGLANG_LOAD } from './load.ts';
import { probeWorker } from './probe.ts';
import { parseGenerateRequest, type GenerateRequest } from './request.ts';
import { SglangSession } from './session.ts';

export const SGLANG: WireFormat<'sglang'> = {
  name: 'sglang',
  workers: 'sglang',
  generatePath: '/generate',
  parse: (json, opts) => parseGenerateRequest(json, { lossyNumbers: opts.lossyNumbers }),
  admit: (req, ctx) => admit(req as GenerateRequest, ctx, SGLANG_ADMISSION),
  attemptBody: (req, promptIds, spec, minNewTokens) => attemptBody(req as GenerateRequest, promptIds, spec, minNewTokens),
  abortRequest: (rid) => ({ path: '/abort_request', body: JSON.stringify({ rid }) }),
  session: (req, info, sink) => new SglangSession(req as GenerateRequest, info, sink),
  writeRequestError(res: ServerResponse, stream: boolean, status: number, message: string, headers: Record<string, string> = {}) {
    if (status === 400) writeValueError(res, stream, message, headers);
    else sendJson(res, status, { error: { message } }, headers);
  },
  errors: {
    body: (status, message, type) => ({ error: { message, type, code: status } }),
    frame: (status, message, type) => ({ error: { message, type, code: status, retryable: status >= 500 } }),
  },
  tokens: SGLANG_TOKENS,
  probe: probeWorker,
  // The scheduler takes at most context_len − 1 (and max_total_tokens − 1): WorkerPool.maxReqLen.
  requestBound: 'max_req_len',
  // input_token_logprobs come with the stream's first chunk.
  streamsPromptLogprobs: true,
  load: SGLANG_LOAD,
  prefillServers: true,
};
