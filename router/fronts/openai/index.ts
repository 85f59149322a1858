// The OpenAI-compatible front as a wire format over a token-only worker format (the seam:
// ../../core/types.ts). Client side: OpenAI's requests, chunks, answers and error bodies (request.ts,
// session.ts). Worker side: the worker format's own native request (its admission, continuation
// body, abort and probe), read through its plain-token reader (`WireFormat.tokens`). Made per
// request, because the worker format is the one whose workers serve the request's model.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FormatRequest, WireFormat } from '../../core/types.ts';
import type { OpenAiRequest } from './request.ts';
import { OpenAiSession, openAiError } from './session.ts';

/** The client format of the OpenAI-family fronts, as trace rows and metrics name it (`WireFormat.name`). */
export const OPENAI_FORMAT = 'openai';

const TYPES: Record<number, string> = { 400: 'BadRequestError', 404: 'NotFoundError', 500: 'InternalServerError', 502: 'BadGatewayError', 503: 'ServiceUnavailableError', 504: 'GatewayTimeoutError' };

export function writeOpenAiError(res: ServerResponse, status: number, message: string, param: string | null = null, headers: Record<string, string> = {}, type = TYPES[status] ?? 'BadRequestError'): void {
  const text = JSON.stringify(openAiError(status, message, type, param));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

export const OPENAI_ERRORS = {
  body: (status: number, message: string) => openAiError(status, message, TYPES[status] ?? 'InternalServerError'),
  frame: (status: number, message: string) => openAiError(status, message, TYPES[status] ?? 'InternalServerError'),
};

/**
 * The front for one request over `native` (a worker format with a token reader): returns the
 * format and the native request the migration loop admits and continues.
 */
export function openAiOver(native: WireFormat, oreq: OpenAiRequest): { format: WireFormat; request: FormatRequest } {
  const tokens = native.tokens;
  if (!tokens) throw new Error(`wire format ${native.name} cannot serve the OpenAI front (no token reader)`);
  const request = tokens.request({
    promptIds: oreq.promptIds,
    maxTokens: oreq.maxTokens,
    minTokens: oreq.minTokens,
    stream: oreq.stream,
    sampling: oreq.sampling,
    logprobs: oreq.logprobs,
    promptLogprobs: oreq.promptLogprobs ?? null,
    model: oreq.model,
    constraint: oreq.constraint,
  });
  request.model = oreq.model;
  const format: WireFormat = {
    name: OPENAI_FORMAT,
    workers: native.workers,
    generatePath: native.generatePath,
    parse: () => request,
    admit: (req, ctx) => native.admit(req, ctx),
    attemptBody: (req, promptIds, spec, minNewTokens) => native.attemptBody(req, promptIds, spec, minNewTokens),
    abortRequest: (rid, served) => native.abortRequest(rid, served),
    session: (_req, info, sink) => new OpenAiSession(oreq, tokens, info, sink),
    errors: OPENAI_ERRORS,
    writeRequestError: (res, _stream, status, message, headers) => writeOpenAiError(res, status, message, null, headers),
    probe: native.probe,
  };
  return { format, request };
}

/** FastAPI's test for a JSON body: no content type, or application/json or application/*+json. */
export function jsonContentType(ct: string | undefined): boolean {
  if (ct === undefined || ct === '') return true;
  const type = ct.split(';')[0]!.trim().toLowerCase();
  const [main, sub] = type.split('/');
  return main === 'application' && sub !== undefined && (sub === 'json' || sub.endsWith('+json'));
}

/** What readOpenAiJson returns once it has answered the client with a 400. */
export const NO_BODY: unique symbol = Symbol('no body');

/**
 * The JSON body of an OpenAI route, as FastAPI under vLLM's and SGLang's servers reads it: as JSON
 * only without a content type or under application/json or +json (fastapi/routing.py
 * get_request_handler); any other body is bytes, which the request model refuses, and both
 * servers answer 400. NO_BODY when it answered the 400 itself.
 */
export function readOpenAiJson(raw: Buffer, req: IncomingMessage, res: ServerResponse): unknown {
  if (!jsonContentType(req.headers['content-type'])) {
    writeOpenAiError(res, 400, `body: Input should be a valid dictionary or object to extract fields from (the content type is ${String(req.headers['content-type'])}; send application/json)`);
    return NO_BODY;
  }
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (err) {
    writeOpenAiError(res, 400, `the body is not JSON: ${(err as Error).message}`);
    return NO_BODY;
  }
}
