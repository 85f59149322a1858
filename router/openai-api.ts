// The OpenAI-compatible front's endpoints: POST /v1/completions, POST /v1/chat/completions and
// GET /v1/models, served when the router has tokenizers (--tokenizer). A request is tokenized
// here and served by the migration loop over the token-only workers that serve its model
// (SGLang's /generate or vLLM's /inference/v1/generate): format/openai/.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { FrontContext } from './format/fronts.ts';
import { requestIdHeaders, type Front, type Parsed } from './http/request-path.ts';
import { httpError } from './http/admin-api.ts';
import { reportedModels } from './pool/worker-pool.ts';
import type { WireFormat } from './format/types.ts';
import { contextLengthFor, workerFormatFor } from './openai-workers.ts';
import { OpenAiError, parseOpenAi, type OpenAiKind } from './format/openai/request.ts';
import { openAiOver, writeOpenAiError } from './format/openai/index.ts';
import { resolveParsers, type ReasoningField } from './format/openai/parsers/index.ts';

export { reportedModels } from './pool/worker-pool.ts';

export { contextLengthFor } from './openai-workers.ts';

/**
 * The OpenAI front's routes with tokenizers; without, GET /v1/models is the workers' own (the
 * first eligible worker's answer, passed on).
 */
export function addOpenAiFront(c: FrontContext): void {
  const { routes, pool, config } = c;
  if (!c.models.empty) return addOpenAiRoutes(c);
  routes.add('GET', '/v1/models', async (_req, res) => {
    const w = pool.pick(new Set());
    if (!w) return httpError(res, 503, 'no healthy worker available', 'ServiceUnavailableError');
    try {
      const up = await w.pool.request({ path: '/v1/models', method: 'GET', signal: AbortSignal.timeout(config.healthTimeoutMs) });
      const body = await up.body.text();
      res.writeHead(up.statusCode, { 'content-type': 'application/json' });
      res.end(body);
    } catch (err) {
      httpError(res, 502, `worker ${w.url} did not answer /v1/models: ${(err as Error).message}`, 'BadGatewayError');
    }
  }, false);
}

function addOpenAiRoutes(c: FrontContext): void {
  const { routes, pool, models, config } = c;
  const reported = () => reportedModels(pool);
  // The config checked the names (router/config.ts).
  const parsers = resolveParsers(config.toolCallParser, config.reasoningParser, config.reasoningField as ReasoningField);

  const workerFormat = (model: string): WireFormat | null => workerFormatFor(pool, model);

  const contextLength = (model: string, tokLen: number | null): number | null => {
    const f = workerFormat(model);
    return (f ? contextLengthFor(pool, f.workers) : null) ?? tokLen;
  };

  /** /v1/completions or /v1/chat/completions: the front's parse and error shapes. */
  const front = (kind: OpenAiKind): Front => ({
    busy: (res) => writeOpenAiError(res, 503, 'router is at its limit of concurrent requests', null, { 'retry-after': '1' }),
    bodyError: (res, status, message) => writeOpenAiError(res, status, message, null, { connection: 'close' }),
    parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null {
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch (err) {
        writeOpenAiError(res, 400, `the body is not JSON: ${(err as Error).message}`);
        return null;
      }
      let oreq;
      try {
        oreq = parseOpenAi(kind, json, {
          tokenizer: (m) => models.lookup(m, reported()),
          contextLength: (m, tok) => contextLength(m, tok.contextLength),
        }, parsers);
      } catch (err) {
        if (err instanceof OpenAiError) {
          writeOpenAiError(res, err.status, err.message, err.param, {}, err.type);
          return null;
        }
        throw err;
      }
      const native = workerFormat(oreq.model);
      if (!native) {
        writeOpenAiError(res, 503, `no healthy worker serves model ${oreq.model}`);
        return null;
      }
      const { format, request } = openAiOver(native, oreq);
      const header = req.headers['x-request-id'];
      const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? randomUUID().replace(/-/g, '');
      return { format, parsed: request, text: '', id, idHeaders: requestIdHeaders(id), passthrough: false, rids: [] };
    },
  });

  routes.add('POST', '/v1/completions', c.path.route(front('completion')), false);
  routes.add('POST', '/v1/chat/completions', c.path.route(front('chat')), false);
  routes.add('GET', '/v1/models', (_req, res) => {
    const created = Math.floor(Date.now() / 1000);
    const data = models.names(reported()).map((id) => ({ id, object: 'model', created, owned_by: 'baton', root: id, parent: null, max_model_len: contextLength(id, null) }));
    const text = JSON.stringify({ object: 'list', data });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
    res.end(text);
  }, false);
}
