// SGLang's native front: POST|PUT /generate (http_server.py serves both) parsed and refused as
// SGLang's FastAPI app does, then the shared request path (http/request-path.ts); and SGLang's
// other endpoints (endpoints.ts: /abort_request, /flush_cache, /server_info, ...).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { FrontContext } from '../index.ts';
import type { Front, Parsed } from '../../http/request-path.ts';
import { requestIdHeaders } from '../../http/request-path.ts';
import { hasLossyNumber, isJsonContentType, mayHoldLossyNumber, unparseableBody } from '../../http/guards.ts';
import { reportedModels } from '../../pool/worker-pool.ts';
import type { ServedModels } from '../openai/models.ts';
import type { WorkerPool } from '../../pool/worker-pool.ts';
import { MalformedBody, parseGenerateRequest, workerRids, type GenerateRequest } from '../../formats/sglang/request.ts';
import { SGLANG } from '../../formats/sglang/index.ts';
import { BODY_PARSE_ERROR, PyBytes, httpException, malformedBody, objectError, writeValueError, type PydanticError } from '../../formats/sglang/errors.ts';
import { addSglangRoutes } from './endpoints.ts';

const REQUEST_ID_HEADERS = ['x-request-id', 'x-correlation-id', 'x-trace-id', 'request-id'];

/**
 * Python's json error for a body JSON.parse refused, as FastAPI reports it (`json_invalid`,
 * `loc: ('body', <position>)`): V8's wording mapped onto the closest of Python's messages.
 */
function jsonInvalid(text: string, err: Error): PydanticError {
  const m = err.message;
  const at = /position (\d+)/.exec(m);
  let pos = at ? Number(at[1]) : 0;
  let error = 'Expecting value';
  if (/Unexpected end/.test(m)) pos = text.length;
  else if (/non-whitespace character after JSON/.test(m)) error = 'Extra data';
  else if (/Bad control character/.test(m)) error = 'Invalid control character at';
  else if (/Expected property name|Expected double-quoted property name/.test(m)) error = 'Expecting property name enclosed in double quotes';
  else if (/Expected ',' or/.test(m)) error = "Expecting ',' delimiter";
  else if (/Expected ':'/.test(m)) error = "Expecting ':' delimiter";
  else if (/Unterminated string/.test(m)) error = 'Unterminated string starting at';
  return { type: 'json_invalid', loc: ['body', pos], msg: 'JSON decode error', input: {}, ctx: { error } };
}

/**
 * With the model's tokenizer (--tokenizer; the workers serve one model), a native request gains
 * Baton's text: a `text` prompt is tokenized here and sent as `input_ids` (SGLang's
 * tokenizer_manager encodes it the same way), so it can migrate; the answer's `text` is
 * rendered from the logical output ids (formats/sglang/detokenize.ts).
 */
function withTokenizer(parsed: GenerateRequest, lossyNumbers: boolean, models: ServedModels, pool: WorkerPool): GenerateRequest {
  let tok;
  try {
    tok = models.lookup(undefined, reportedModels(pool)).tokenizer;
  } catch {
    return parsed; // no model, or several: the workers' own text
  }
  const body = parsed.body;
  if (parsed.prompt.kind === 'text' && parsed.unparsed === null && typeof body.text === 'string' && body.input_ids === undefined && body.input_embeds === undefined) {
    const { text, ...rest } = body;
    const ids = tok.encode(text);
    if (ids.length === 0) return parsed; // SGLang refuses an empty prompt itself
    const tokenized = parseGenerateRequest({ ...rest, input_ids: ids }, { lossyNumbers });
    tokenized.tokenizer = tok;
    tokenized.textPrompt = true;
    return tokenized;
  }
  parsed.tokenizer = tok;
  return parsed;
}

/** SGLang's /generate: its parse and FastAPI's error shapes. */
function generateFront(models: ServedModels, pool: WorkerPool): Front {
  return {
    busy: (res, limit) => objectError(res, 503, `router is at its limit of ${limit} concurrent requests`, '503', { 'retry-after': '1' }),
    bodyError: (res, status, message) => httpException(res, status, message, { connection: 'close' }),
    duplicate: writeValueError,
    noWorker: (res, headers) => objectError(res, 503, 'no healthy worker available', '503', headers),
    parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null {
      // FastAPI reads the body as JSON only without a content type or with application/json (or
      // +json); any other body is validated as bytes, and an empty one is missing (SGLang: 400).
      if (raw.length === 0) {
        malformedBody(res, [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
        return null;
      }
      const contentType = req.headers['content-type'];
      if (!isJsonContentType(contentType)) {
        malformedBody(res, [{ type: 'dataclass_type', loc: ['body'], msg: 'Input should be a dictionary or an instance of GenerateReqInput', input: new PyBytes(raw.toString('latin1', 0, 200)), ctx: { class_name: 'GenerateReqInput' } }]);
        return null;
      }
      const text = raw.toString('utf8');
      // Python's json refuses bytes that are not UTF-8, and recursion past its limit; FastAPI then
      // says only this. The depth cap also keeps JSON.stringify (which recurses) from overflowing
      // when the body is forwarded (see jsonDepthExceeds).
      if (unparseableBody(raw, text)) {
        httpException(res, 400, BODY_PARSE_ERROR);
        return null;
      }
      let parsed: GenerateRequest;
      try {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch (err) {
          malformedBody(res, [jsonInvalid(text, err as Error)]);
          return null;
        }
        const lossyNumbers = mayHoldLossyNumber(json) && hasLossyNumber(text);
        parsed = parseGenerateRequest(json, { lossyNumbers, raw });
        if (!models.empty) parsed = withTokenizer(parsed, lossyNumbers, models, pool);
      } catch (err) {
        if (err instanceof MalformedBody) {
          malformedBody(res, err.errors);
          return null;
        }
        throw err;
      }
      const headerId = REQUEST_ID_HEADERS.map((h) => req.headers[h]).find((v): v is string => typeof v === 'string' && v.length > 0 && v.length <= 256);
      const id = parsed.rid ?? headerId ?? randomUUID().replace(/-/g, '');
      // Batches, n > 1 and requests the router cannot read go to one worker as written.
      const passthrough = parsed.unparsed !== null || parsed.prompt.kind === 'batch' || (typeof parsed.sampling.n === 'number' && parsed.sampling.n > 1);
      // The rids this request holds, as one SGLang worker would: a body rid reused while its first
      // request is in flight is refused as SGLang refuses it (a ValueError). Ids from headers or
      // made up here claim nothing: clients share correlation headers.
      const rids = passthrough ? workerRids(parsed) : parsed.rid !== null ? [parsed.rid] : [];
      return { format: SGLANG, parsed, text, id, idHeaders: requestIdHeaders(id), passthrough, rids };
    },
  };
}

/** SGLang's native routes: /generate (POST and PUT), and its other endpoints. */
export function addSglangFront(c: FrontContext): void {
  const { routes, pool, path, config } = c;
  addSglangRoutes(routes, { pool, registry: path.registry, bodyTimeoutMs: config.bodyTimeoutMs, forwardTimeoutMs: Math.max(30_000, config.healthTimeoutMs), keys: c.keys, replicas: c.replicas });
  const generate = path.route(generateFront(c.models, pool));
  // SGLang serves /generate on POST and PUT (http_server.py).
  routes.add('POST', '/generate', generate, false);
  routes.add('PUT', '/generate', generate, false);
}
