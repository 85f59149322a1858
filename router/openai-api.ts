// The OpenAI-compatible front's endpoints: POST /v1/completions, POST /v1/chat/completions and
// GET /v1/models, served when the router has tokenizers (--tokenizer). A request is tokenized
// here and served by the migration loop over the token-only workers that serve its model
// (SGLang's /generate or vLLM's /inference/v1/generate): format/openai/.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { Routes } from './http/routes.ts';
import { BodyError, readBody } from './http/body.ts';
import type { WorkerPool } from './pool/worker-pool.ts';
import { formatNamed } from './format/registry.ts';
import type { FormatName, FormatRequest, WireFormat } from './format/types.ts';
import { OpenAiError, parseOpenAi, type OpenAiKind } from './format/openai/request.ts';
import { openAiOver, writeOpenAiError } from './format/openai/index.ts';
import type { ServedModels } from './format/openai/models.ts';
import { isHeaderSafe } from './http/guards.ts';

export interface OpenAiDeps {
  pool: WorkerPool;
  models: ServedModels;
  maxBodyBytes: number;
  bodyTimeoutMs: number;
  /** Whether the router may take one more request (its concurrency limit). */
  admit(): (() => void) | null;
  serve(format: WireFormat, req: IncomingMessage, res: ServerResponse, r: { parsed: FormatRequest; text: string; id: string; idHeaders: Record<string, string>; passthrough: boolean; rids: string[] }): Promise<void>;
}

/** Worker formats that can serve the front, in order of preference. */
const TOKEN_FORMATS: FormatName[] = ['sglang', 'vllm'];

/**
 * The context length a request is checked against (request.ts: prompt + max_tokens ≤ it, and the
 * default max_tokens is the rest), as the workers of `format` bound a request. vLLM's is
 * max_model_len itself (vllm/renderers/params.py TokenizeParams._token_len_check), the smallest
 * its probed workers report; SGLang's scheduler takes at most context_len − 1 (WorkerPool.maxReqLen).
 */
export function contextLengthFor(pool: Pick<WorkerPool, 'list' | 'maxReqLen'>, format: FormatName): number | null {
  if (format !== 'vllm') return pool.maxReqLen(format);
  let min: number | null = null;
  for (const w of pool.list()) {
    if (!w.probed || w.format !== 'vllm' || w.contextLength === null) continue;
    if (min === null || w.contextLength < min) min = w.contextLength;
  }
  return min;
}

/** The model names the probed workers report. */
export function reportedModels(pool: WorkerPool): string[] {
  const out = new Set<string>();
  for (const w of pool.list()) if (w.modelPath !== null && w.probed) out.add(w.modelPath);
  return [...out];
}

export function addOpenAiRoutes(routes: Routes, deps: OpenAiDeps): void {
  const { pool, models } = deps;
  const reported = () => reportedModels(pool);

  /** The worker format whose eligible workers serve `model` (SGLang first), or null. */
  const workerFormat = (model: string): WireFormat | null => {
    const now = Date.now();
    for (const name of TOKEN_FORMATS) {
      if (pool.list().some((w) => (w.format ?? 'sglang') === name && w.eligible(now) && (w.modelPath === null || w.modelPath === model))) return formatNamed(name);
    }
    return null;
  };

  const contextLength = (model: string, tokLen: number | null): number | null => {
    const f = workerFormat(model);
    return (f ? contextLengthFor(pool, f.workers) : null) ?? tokLen;
  };

  async function completion(kind: OpenAiKind, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readBody(req, deps.maxBodyBytes, deps.bodyTimeoutMs);
    } catch (err) {
      const e = err as BodyError;
      return writeOpenAiError(res, e.status ?? 400, e.message, null, { connection: 'close' });
    }
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      return writeOpenAiError(res, 400, `the body is not JSON: ${(err as Error).message}`);
    }
    let oreq;
    try {
      oreq = parseOpenAi(kind, json, {
        tokenizer: (m) => models.lookup(m, reported()),
        contextLength: (m, tok) => contextLength(m, tok.contextLength),
      });
    } catch (err) {
      if (err instanceof OpenAiError) return writeOpenAiError(res, err.status, err.message, err.param, {}, err.type);
      throw err;
    }
    const native = workerFormat(oreq.model);
    if (!native) return writeOpenAiError(res, 503, `no healthy worker serves model ${oreq.model}`);
    const { format, request } = openAiOver(native, oreq);
    const header = req.headers['x-request-id'];
    const id = (typeof header === 'string' && header.length > 0 && header.length <= 256 ? header : null) ?? randomUUID().replace(/-/g, '');
    const idHeaders: Record<string, string> = isHeaderSafe(id) && id.length <= 1024 ? { 'x-request-id': id } : {};
    await deps.serve(format, req, res, { parsed: request, text: '', id, idHeaders, passthrough: false, rids: [] });
  }

  const route = (kind: OpenAiKind) => async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const release = deps.admit();
    if (!release) {
      req.resume();
      return writeOpenAiError(res, 503, 'router is at its limit of concurrent requests', null, { 'retry-after': '1' });
    }
    try {
      await completion(kind, req, res);
    } finally {
      release();
    }
  };
  routes.add('POST', '/v1/completions', route('completion'), false);
  routes.add('POST', '/v1/chat/completions', route('chat'), false);
  routes.add('GET', '/v1/models', (_req, res) => {
    const created = Math.floor(Date.now() / 1000);
    const data = models.names(reported()).map((id) => ({ id, object: 'model', created, owned_by: 'baton', root: id, parent: null, max_model_len: contextLength(id, null) }));
    const text = JSON.stringify({ object: 'list', data });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
    res.end(text);
  }, false);
}
