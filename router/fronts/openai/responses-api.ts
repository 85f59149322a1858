// The Responses front: `POST /v1/responses` (fronts/openai/responses/), served when the router has
// tokenizers (--tokenizer), over the same token-only workers as the OpenAI front, and migrating as a
// chat completion does; and the responses it stored (`store`, OpenAI's default): `GET`/`DELETE
// /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`, `POST /v1/responses/{id}/cancel`, and
// `previous_response_id` / `item_reference` in later requests.
//
// Replicas of one router (`--replicas`) each keep their own store. A response's id carries the
// replica id of the process that made it (fronts/openai/responses/store.ts), so a replica that is
// asked for a response it does not hold fetches it from that replica's own address (GET
// /replicas' `url`), through the same public routes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FrontContext, FrontReplica } from '../index.ts';
import { requestIdHeaders, type Front, type Parsed } from '../../http/request-path.ts';
import { reportedModels } from '../../pool/worker-pool.ts';
import { OpenAiError } from './request.ts';
import { NO_BODY, readOpenAiJson, writeOpenAiError } from './index.ts';
import { resolveParsers, type ReasoningField } from '../../parsers/index.ts';
import { parseResponses, referencesOf, type Resolved } from './responses/request.ts';
import { responsesOver } from './responses/index.ts';
import { ResponseKeys, ResponseStore, replicaOfKey } from './responses/store.ts';
import { invalidId, notFound, readStored, resolveRefs, type StoredParts, type StoreReader } from './responses/lookup.ts';
import { contextLengthFor, workerFormatFor } from './workers.ts';
import { isObject } from '../../core/json.ts';
import type { JsonObject } from '../../core/types.ts';

const PEER_TIMEOUT_MS = 5_000;

export function addResponsesFront(c: FrontContext): void {
  const { routes, pool, models, config } = c;
  if (models.empty) return;
  const parsers = resolveParsers(config.toolCallParser, config.reasoningParser, config.reasoningField as ReasoningField);
  const store = new ResponseStore({ maxResponses: config.responsesStoreMaxResponses, maxBytes: config.responsesStoreMaxBytes, ttlMs: config.responsesStoreTtlMs });
  const keys = new ResponseKeys(c.replica.id);
  const peers = new Peers(c.replica, c.keys.apiKey);
  const reader: StoreReader = {
    local: (id) => {
      const r = store.get(id);
      return r ? { response: JSON.parse(r.response) as JsonObject, input: JSON.parse(r.input) as JsonObject[] } : null;
    },
    remote: (key) => peers.read(key),
  };
  const error = (res: ServerResponse, e: OpenAiError) => writeOpenAiError(res, e.status, e.message, e.param, {}, e.type);

  const serve = (json: JsonObject, resolved: Resolved, key: string, req: IncomingMessage, res: ServerResponse): Parsed | null => {
    let rreq;
    try {
      rreq = parseResponses(json, {
        tokenizer: (m) => models.lookup(m, reportedModels(pool)),
        contextLength: (m, tok) => {
          const f = workerFormatFor(pool, m);
          return (f ? contextLengthFor(pool, f.workers) : null) ?? tok.contextLength;
        },
      }, parsers, { key, resolved, storing: store.enabled });
    } catch (err) {
      if (err instanceof OpenAiError) {
        error(res, err);
        return null;
      }
      throw err;
    }
    const native = workerFormatFor(pool, rreq.chat.model);
    if (!native) {
      writeOpenAiError(res, 503, `no healthy worker serves model ${rreq.chat.model}`);
      return null;
    }
    const { format, request } = responsesOver(native, rreq, store);
    const header = req.headers['x-request-id'];
    const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? key;
    return { format, parsed: request, text: '', id, idHeaders: requestIdHeaders(id), passthrough: false, rids: [] };
  };

  const front: Front = {
    busy: (res) => writeOpenAiError(res, 503, 'router is at its limit of concurrent requests', null, { 'retry-after': '1' }),
    bodyError: (res, status, message) => writeOpenAiError(res, status, message, null, { connection: 'close' }),
    parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null | Promise<Parsed | null> {
      const json = readOpenAiJson(raw, req, res);
      if (json === NO_BODY) return null;
      let found;
      try {
        found = resolveRefs(referencesOf(json), reader);
      } catch (err) {
        if (err instanceof OpenAiError) {
          error(res, err);
          return null;
        }
        throw err;
      }
      const key = keys.next();
      const go = (r: Resolved | OpenAiError): Parsed | null => {
        if (r instanceof OpenAiError) {
          error(res, r);
          return null;
        }
        return serve(json as JsonObject, r, key, req, res);
      };
      if (!(found instanceof Promise)) return go(found);
      return found.then(go, (err: unknown) => {
        if (err instanceof OpenAiError) return go(err);
        throw err;
      });
    },
  };
  routes.add('POST', '/v1/responses', c.path.route(front), false);

  // --- the stored responses ---------------------------------------------------------------------

  /** The stored response `id`, or an error: here, else from the replica that made it. */
  const find = async (id: string): Promise<StoredParts | OpenAiError> => {
    if (!id.startsWith('resp')) return invalidId(id, 'response_id');
    try {
      return (await readStored(id, reader)) ?? notFound(id, 'response_id');
    } catch (err) {
      if (err instanceof OpenAiError) return err;
      throw err;
    }
  };

  routes.add('GET', '/v1/responses/:id', async (req, res, params) => {
    const id = params.id!;
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    if (q.get('stream') === 'true') return writeOpenAiError(res, 400, 'stream is only for background responses, which Baton does not run', 'stream', {}, 'invalid_request_error');
    const r = store.get(id);
    if (r) return sendJson(res, 200, r.response);
    const found = await find(id);
    if (found instanceof OpenAiError) return error(res, found);
    sendJson(res, 200, JSON.stringify(found.response));
  }, false);

  routes.add('GET', '/v1/responses/:id/input_items', async (req, res, params) => {
    const page = inputPage(new URL(req.url ?? '/', 'http://x').searchParams);
    if (page instanceof OpenAiError) return error(res, page);
    const found = await find(params.id!);
    if (found instanceof OpenAiError) return error(res, found);
    const items = page.order === 'asc' ? found.input : [...found.input].reverse();
    let from = 0;
    if (page.after !== null) {
      const at = items.findIndex((i) => i.id === page.after);
      if (at < 0) return writeOpenAiError(res, 400, `No item with id '${page.after}' in the input of response '${params.id!}'.`, 'after', {}, 'invalid_request_error');
      from = at + 1;
    }
    const data = items.slice(from, from + page.limit);
    sendJson(res, 200, JSON.stringify({ object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: from + page.limit < items.length }));
  }, false);

  routes.add('DELETE', '/v1/responses/:id', async (_req, res, params) => {
    const id = params.id!;
    if (store.delete(id)) return sendJson(res, 200, JSON.stringify({ id, object: 'response', deleted: true }));
    if (!id.startsWith('resp')) return error(res, invalidId(id, 'response_id'));
    let owner;
    try {
      owner = await peers.forward(id.slice(5), 'DELETE', `/v1/responses/${encodeURIComponent(id)}`);
    } catch (err) {
      if (err instanceof OpenAiError) return error(res, err);
      throw err;
    }
    if (owner) return sendJson(res, owner.status, owner.text);
    error(res, notFound(id, 'response_id'));
  }, false);

  // Only a background response can be cancelled (vLLM's and SGLang's cancel_responses); Baton runs none.
  routes.add('POST', '/v1/responses/:id/cancel', async (_req, res, params) => {
    const found = await find(params.id!);
    if (found instanceof OpenAiError) return error(res, found);
    writeOpenAiError(res, 400, 'Cannot cancel a synchronous response.', 'response_id', {}, 'invalid_request_error');
  }, false);
}

function sendJson(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

/** GET .../input_items' query: OpenAI's `limit` (1-100, default 20), `order` (default desc), `after`. */
function inputPage(q: URLSearchParams): { limit: number; order: 'asc' | 'desc'; after: string | null } | OpenAiError {
  const limit = q.get('limit') === null ? 20 : Number(q.get('limit'));
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) return new OpenAiError(400, `limit must be an integer from 1 to 100, got '${q.get('limit')}'`, 'limit', 'invalid_request_error');
  const order = q.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') return new OpenAiError(400, `order must be 'asc' or 'desc', got '${order}'`, 'order', 'invalid_request_error');
  return { limit, order, after: q.get('after') };
}

/**
 * The other replicas of this router, asked for the responses they made. Only a replica of
 * `--replicas` has any; a lone router (or another router pod) has none, and a response it did not
 * make is not found.
 */
class Peers {
  constructor(
    private readonly self: FrontReplica,
    private readonly apiKey: string | null,
  ) {}

  /** Whether another replica of this router made `key`. */
  private elsewhere(key: string): boolean {
    const id = replicaOfKey(key);
    return this.self.peers !== undefined && id !== null && id !== this.self.id;
  }

  /** The own address of the live replica that made `key`, when it is another replica than this one. */
  private async owner(key: string): Promise<string | null> {
    if (!this.elsewhere(key)) return null;
    const list = await this.self.peers!().catch(() => null);
    // A replica that restarted or crashed took its store with it.
    return list?.find((r) => r.id === replicaOfKey(key) && r.state === 'up')?.url ?? null;
  }

  /** `method path` on the owner of `key`: its answer, or null when no other replica made it. */
  async forward(key: string, method: string, path: string): Promise<{ status: number; text: string } | null> {
    const url = await this.owner(key);
    if (url === null) return null;
    try {
      const r = await fetch(url + path, { method, headers: this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}, signal: AbortSignal.timeout(PEER_TIMEOUT_MS) });
      return { status: r.status, text: await r.text() };
    } catch (err) {
      throw new OpenAiError(503, `the replica that holds this response did not answer (${(err as Error).message}); try again`, null, 'ServiceUnavailableError');
    }
  }

  /** The stored response `resp_<key>` as its owner holds it, or null (no other replica made it, or it no longer has it). */
  read(key: string): Promise<StoredParts | null> | null {
    if (!this.elsewhere(key)) return null;
    return (async () => {
      const id = `resp_${key}`;
      const got = await this.forward(key, 'GET', `/v1/responses/${id}`);
      if (got === null || got.status === 404) return null;
      const response = this.body(got);
      const input: JsonObject[] = [];
      for (let after: string | null = null; ;) {
        const page = await this.forward(key, 'GET', `/v1/responses/${id}/input_items?order=asc&limit=100${after === null ? '' : `&after=${encodeURIComponent(after)}`}`);
        if (page === null || page.status === 404) return null;
        const list = this.body(page);
        const data = Array.isArray(list.data) ? (list.data as JsonObject[]) : [];
        input.push(...data);
        if (list.has_more !== true || data.length === 0) break;
        after = typeof list.last_id === 'string' ? list.last_id : null;
        if (after === null) break;
      }
      return { response, input };
    })();
  }

  private body(r: { status: number; text: string }): JsonObject {
    let json: unknown = null;
    try {
      json = JSON.parse(r.text);
    } catch {
      // reported below
    }
    if (r.status !== 200 || !isObject(json)) throw new OpenAiError(503, `the replica that holds this response answered ${r.status}: ${r.text.slice(0, 200)}`, null, 'ServiceUnavailableError');
    return json;
  }
}
