// The Responses front (`POST /v1/responses`) as a wire format over a token-only worker format: the
// OpenAI front's worker side (its native request, admission, continuation and abort: the request
// migrates exactly as a chat completion does), with the Responses session rendering the answer.
import type { FormatRequest, WireFormat } from '../../../core/types.ts';
import { openAiOver } from '../index.ts';
import type { ResponsesRequest } from './request.ts';
import { ResponsesSession } from './session.ts';
import type { ResponseStore } from './store.ts';

/** `store`: where the answer is kept when the request stores it (rreq.store). */
export function responsesOver(native: WireFormat, rreq: ResponsesRequest, store: ResponseStore | null): { format: WireFormat; request: FormatRequest } {
  const { format, request } = openAiOver(native, rreq.chat);
  const tokens = native.tokens!;
  return { format: { ...format, session: (_req, info, sink) => new ResponsesSession(rreq, tokens, info, sink, store) }, request };
}
