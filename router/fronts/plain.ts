// The plain front: a wire format of formats/registry.ts that no front serves (no route takes a
// POST on its generate path) is served there with nothing but its `WireFormat`: the body parsed
// by the format, refused in its error shapes, then the shared request path
// (http/request-path.ts). Its requests claim no rids, and a client aborts one by closing the
// connection. SGLang and vLLM have fronts of their own (fronts/sglang/, fronts/vllm/), so this
// serves a format that was added as a folder and a registry line only.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { FrontContext } from './index.ts';
import { requestIdHeaders, type Front, type Parsed } from '../http/request-path.ts';
import { hasLossyNumber, mayHoldLossyNumber, unparseableBody } from '../http/guards.ts';
import type { FormatRequest, WireFormat } from '../core/types.ts';
import { FORMATS } from '../formats/registry.ts';

/** The front of one format, from its WireFormat alone. */
function plainFront(format: WireFormat): Front {
  return {
    busy: (res, limit) => format.writeRequestError(res, false, 503, `router is at its limit of ${limit} concurrent requests`, { 'retry-after': '1' }),
    bodyError: (res, status, message) => format.writeRequestError(res, false, status, message, { connection: 'close' }),
    noWorker: (res, headers) => format.writeRequestError(res, false, 503, 'no healthy worker available', headers),
    parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null {
      const text = raw.toString('utf8');
      if (unparseableBody(raw, text)) {
        format.writeRequestError(res, false, 400, 'the body is not UTF-8 JSON the router can read');
        return null;
      }
      let parsed: FormatRequest;
      try {
        const json: unknown = JSON.parse(text);
        parsed = format.parse(json, { lossyNumbers: mayHoldLossyNumber(json) && hasLossyNumber(text), headers: req.headers });
      } catch (err) {
        // Bad JSON, or what the format's server refuses outright (its parse throws it).
        format.writeRequestError(res, false, 400, (err as Error).message);
        return null;
      }
      const header = req.headers['x-request-id'];
      const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? parsed.rid ?? randomUUID().replace(/-/g, '');
      const passthrough = parsed.unparsed !== null || parsed.prompt.kind === 'batch' || parsed.samples > 1;
      return { format, parsed, text, id, idHeaders: requestIdHeaders(id), passthrough, rids: [] };
    },
  };
}

/** Registered after every other front: a format whose generate path a front took already is left to it. */
export function addPlainFronts(c: FrontContext): void {
  for (const format of FORMATS) {
    const taken = c.routes.match('POST', format.generatePath);
    if (taken !== null && 'route' in taken) continue;
    c.routes.add('POST', format.generatePath, c.path.route(plainFront(format)), false);
  }
}
