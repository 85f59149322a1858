// The Responses front: `POST /v1/responses`, the stateless subset (format/responses/), served when
// the router has tokenizers (--tokenizer), over the same token-only workers as the OpenAI front,
// and migrating as a chat completion does.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { FrontContext } from './format/fronts.ts';
import { requestIdHeaders, type Front, type Parsed } from './http/request-path.ts';
import { reportedModels } from './pool/worker-pool.ts';
import { OpenAiError } from './format/openai/request.ts';
import { NO_BODY, readOpenAiJson, writeOpenAiError } from './format/openai/index.ts';
import { resolveParsers, type ReasoningField } from './format/openai/parsers/index.ts';
import { parseResponses } from './format/openai/responses/request.ts';
import { responsesOver } from './format/openai/responses/index.ts';
import { contextLengthFor, workerFormatFor } from './openai-workers.ts';

export function addResponsesFront(c: FrontContext): void {
  const { routes, pool, models, config } = c;
  if (models.empty) return;
  const parsers = resolveParsers(config.toolCallParser, config.reasoningParser, config.reasoningField as ReasoningField);
  const front: Front = {
    busy: (res) => writeOpenAiError(res, 503, 'router is at its limit of concurrent requests', null, { 'retry-after': '1' }),
    bodyError: (res, status, message) => writeOpenAiError(res, status, message, null, { connection: 'close' }),
    parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null {
      const json = readOpenAiJson(raw, req, res);
      if (json === NO_BODY) return null;
      let rreq;
      try {
        rreq = parseResponses(json, {
          tokenizer: (m) => models.lookup(m, reportedModels(pool)),
          contextLength: (m, tok) => {
            const f = workerFormatFor(pool, m);
            return (f ? contextLengthFor(pool, f.workers) : null) ?? tok.contextLength;
          },
        }, parsers);
      } catch (err) {
        if (err instanceof OpenAiError) {
          writeOpenAiError(res, err.status, err.message, err.param, {}, err.type);
          return null;
        }
        throw err;
      }
      const native = workerFormatFor(pool, rreq.chat.model);
      if (!native) {
        writeOpenAiError(res, 503, `no healthy worker serves model ${rreq.chat.model}`);
        return null;
      }
      const { format, request } = responsesOver(native, rreq);
      const header = req.headers['x-request-id'];
      const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? randomUUID().replace(/-/g, '');
      return { format, parsed: request, text: '', id, idHeaders: requestIdHeaders(id), passthrough: false, rids: [] };
    },
  };
  routes.add('POST', '/v1/responses', c.path.route(front), false);
}
