// The OpenAI-compatible front's endpoints: POST /v1/completions, POST /v1/chat/completions and
// GET /v1/models, served when the router has tokenizers (--tokenizer). A request is tokenized
// here and served by the migration loop over the token-only workers that serve its model
// (SGLang's /generate or vLLM's /inference/v1/generate): fronts/openai/.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { FrontContext } from '../index.ts';
import { requestIdHeaders, type Front, type Parsed } from '../../http/request-path.ts';
import { httpError } from '../../http/admin-api.ts';
import { reportedModels } from '../../pool/worker-pool.ts';
import type { WireFormat } from '../../core/types.ts';
import { contextLengthFor, workerFormatFor } from './workers.ts';
import { OpenAiError, parseOpenAi, type OpenAiKind } from './request.ts';
import { resolveParsers, type ReasoningField } from '../../parsers/index.ts';
import { NO_BODY, OPENAI_ERRORS, openAiOver, readOpenAiJson, writeOpenAiError } from './index.ts';
import { ChoiceGroup, fansOut, splitChoices } from './fanout.ts';
import { addTokenizeRoutes } from './tokenize.ts';

export { reportedModels } from '../../pool/worker-pool.ts';

export { contextLengthFor } from './workers.ts';

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
      const json = readOpenAiJson(raw, req, res);
      if (json === NO_BODY) return null;
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
      if ((oreq.promptLogprobs ?? null) !== null && native.streamsPromptLogprobs !== true) {
        // vLLM's /inference/v1/generate sends prompt_logprobs in a unary answer only, and every
        // attempt streams; SGLang's input_token_logprobs come with its stream's first chunk.
        writeOpenAiError(res, 400, 'prompt logprobs (echo with logprobs, prompt_logprobs) need SGLang workers: vLLM\'s /inference/v1/generate streams none', oreq.echo ? 'echo' : 'prompt_logprobs');
        return null;
      }
      const header = req.headers['x-request-id'];
      const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? randomUUID().replace(/-/g, '');
      const idHeaders = requestIdHeaders(id);
      if (fansOut(oreq)) {
        // n > 1, or a list of prompts: one logical request per choice (fronts/openai/fanout.ts),
        // logical ids `<id>-<index>` (vLLM names its children apart from the parent too).
        const kids = splitChoices(oreq, `${oreq.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${id}`);
        // Each choice counts against the router's concurrency limit (http/request-path.ts).
        if (kids.length > c.config.maxConcurrentRequests) {
          writeOpenAiError(res, 400, `this request asks for ${kids.length} choices (prompts × n), more than --max-concurrent-requests ${c.config.maxConcurrentRequests} lets the router serve at once`, 'n');
          return null;
        }
        const built = kids.map((k, i) => ({ ...openAiOver(native, k), id: `${id}-${i}` }));
        let group: ChoiceGroup | null = null;
        return {
          format: built[0]!.format, parsed: built[0]!.request, text: '', id, idHeaders, passthrough: false, rids: [],
          fanout: {
            children: built.map((b) => ({ format: b.format, parsed: b.request, id: b.id })),
            sinks: (client, res) => (group = new ChoiceGroup(client, res, kids, oreq.n ?? 1, idHeaders, OPENAI_ERRORS)).sinks,
            attach: (lrs) => group!.attach(lrs),
          },
        };
      }
      const { format, request } = openAiOver(native, oreq);
      return { format, parsed: request, text: '', id, idHeaders, passthrough: false, rids: [] };
    },
  });

  routes.add('POST', '/v1/completions', c.path.route(front('completion')), false);
  routes.add('POST', '/v1/chat/completions', c.path.route(front('chat')), false);
  const card = (id: string, created: number) => ({ id, object: 'model', created, owned_by: 'baton', root: id, parent: null, max_model_len: contextLength(id, null) });
  const sendJson = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
    res.end(text);
  };
  routes.add('GET', '/v1/models', (_req, res) => {
    const created = Math.floor(Date.now() / 1000);
    sendJson(res, 200, { object: 'list', data: models.names(reported()).map((id) => card(id, created)) });
  }, false);
  // OpenAI's retrieve-model call (the SDK's models.retrieve): the model's card, or a 404 in
  // OpenAI's error shape. A model id may hold '/', so the rest of the path is the id.
  const retrieve = (req: IncomingMessage, res: ServerResponse) => {
    let id: string;
    try {
      id = decodeURIComponent((req.url ?? '').split('?')[0]!.slice('/v1/models/'.length));
    } catch {
      return writeOpenAiError(res, 404, 'The model does not exist.', 'model', {}, 'NotFoundError');
    }
    if (!models.names(reported()).includes(id)) return writeOpenAiError(res, 404, `The model \`${id}\` does not exist.`, 'model', {}, 'NotFoundError');
    sendJson(res, 200, card(id, Math.floor(Date.now() / 1000)));
  };
  routes.add('GET', '/v1/models/:id', retrieve, false);
  routes.add('GET', '/v1/models/:org/:name', retrieve, false);
  addTokenizeRoutes(c, (m) => models.lookup(m, reported()), (m, tok) => contextLength(m, tok.contextLength));
}
