// vLLM's token-in/token-out front (token_in_token_out/api_router.py): POST /inference/v1/generate,
// parsed and refused as vLLM's server does, then the shared request path (http/request-path.ts);
// and its abort, on /inference/v1/abort_requests and /abort_requests.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { FrontContext } from '../index.ts';
import { requestIdHeaders, type Front, type Parsed } from '../../http/request-path.ts';
import { readBody } from '../../http/body.ts';
import { hasLossyNumber, mayHoldLossyNumber, unparseableBody } from '../../http/guards.ts';
import type { FormatRequest } from '../../core/types.ts';
import { VLLM } from '../../formats/vllm/index.ts';
import { VllmMalformedBody } from '../../formats/vllm/request.ts';
// The answers the router has always given here in SGLang's shapes (a passed-through request with
// no worker, a body that is not UTF-8 or too deep).
import { BODY_PARSE_ERROR, objectError } from '../../formats/sglang/errors.ts';

const PREFIX = 'generate-tokens-';

const GENERATE: Front = {
  busy: (res, limit) => VLLM.writeRequestError(res, false, 503, `router is at its limit of ${limit} concurrent requests`, { 'retry-after': '1' }),
  bodyError: (res, status, message) => VLLM.writeRequestError(res, false, status, message, { connection: 'close' }),
  noWorker: (res, headers) => objectError(res, 503, 'no healthy worker available', '503', headers),
  parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null {
    const text = raw.toString('utf8');
    if (unparseableBody(raw, text)) {
      VLLM.writeRequestError(res, false, 400, BODY_PARSE_ERROR);
      return null;
    }
    let parsed: FormatRequest;
    try {
      const json: unknown = JSON.parse(text);
      parsed = VLLM.parse(json, { lossyNumbers: mayHoldLossyNumber(json) && hasLossyNumber(text), headers: req.headers });
    } catch (err) {
      const message = err instanceof VllmMalformedBody ? err.message : `JSON decode error: ${(err as Error).message}`;
      VLLM.writeRequestError(res, false, 400, message);
      return null;
    }
    // vLLM's request id: the X-Request-Id header, else the body's request_id (serving.py
    // `_base_request_id`), else a fresh one; the client sees `generate-tokens-<id>`.
    const header = req.headers['x-request-id'];
    const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? parsed.rid ?? randomUUID().replace(/-/g, '');
    // vLLM requests claim no ids here: whether a reused request_id is refused is the worker's call.
    return { format: VLLM, parsed, text, id, idHeaders: requestIdHeaders(id), passthrough: parsed.unparsed !== null || parsed.samples > 1, rids: [] };
  },
};

export function addVllmFront(c: FrontContext): void {
  const { routes, path } = c;
  const bodyTimeoutMs = c.config.bodyTimeoutMs;

  /** vLLM's abort: `{"request_ids": ["generate-tokens-<id>", ...]}`, exact ids; an empty 200. */
  async function abort(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let ids: unknown;
    try {
      ids = (JSON.parse((await readBody(req, 1 << 20, bodyTimeoutMs)).toString('utf8')) as { request_ids?: unknown }).request_ids;
    } catch {
      ids = undefined;
    }
    if (!Array.isArray(ids)) return VLLM.writeRequestError(res, false, 400, 'request_ids: Field required');
    const wanted = new Set(ids.filter((x): x is string => typeof x === 'string').map((x) => (x.startsWith(PREFIX) ? x.slice(PREFIX.length) : x)));
    for (const e of path.registry.all()) if (wanted.has(e.id)) e.abort();
    res.writeHead(200, { 'content-length': '0' });
    res.end();
  }

  routes.add('POST', '/inference/v1/generate', path.route(GENERATE), false);
  routes.add('POST', '/inference/v1/abort_requests', abort, false);
  routes.add('POST', '/abort_requests', abort, false);
}
