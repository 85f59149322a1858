// SGLang's own endpoints besides /generate, answered for a cluster as one SGLang worker answers
// them (docs/sglang-fidelity.md, docs/architecture.md "Choices where the contract is silent"):
// - POST /abort_request: 200, empty body; aborts like SGLang's tokenizer manager + scheduler.
//   `abort_all` is destructive (the admin token when one is set), an abort by rid is not.
// - GET /health_generate: the reference worker's own one-token probe.
// - GET|POST /flush_cache: on every worker; SGLang's text, 200 only if every worker flushed.
//   Destructive: the admin token when one is set (guards.ts Access). On the shared port of
//   `--replicas`, every replica forgets what it sent the flushed workers; `x-baton-replicas` says
//   how that went, and a replica that failed it makes the answer a 502.
// - GET /server_info, /get_server_info, /model_info, /get_model_info, /get_weight_version: the
//   reference worker's answer, as it wrote it (sgl-model-gateway's `route_to_first`), so that the
//   five agree with each other; `x-baton-worker` names it, and `x-baton-disagreement` lists what
//   the workers disagree on (model_path, weight_version).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Routes } from '../../http/routes.ts';
import { BodyError, readBody } from '../../http/body.ts';
import type { WorkerPool } from '../../pool/worker-pool.ts';
import type { Worker } from '../../pool/worker.ts';
import type { RequestRegistry } from './registry.ts';
import { httpException, malformedBody, objectError, sendJson, type PydanticError } from '../../formats/sglang/errors.ts';
import { destructiveRefusal, type Keys } from '../../http/guards.ts';
import { shareWrite, type ReplicaWrites } from '../../http/worker-writes.ts';

export interface SglangApiContext {
  pool: WorkerPool;
  registry: RequestRegistry;
  bodyTimeoutMs: number;
  /** How long a worker may take to answer a forwarded call (SGLang's health probe waits up to 20 s). */
  forwardTimeoutMs: number;
  /** The router's api key and admin token (destructive calls check them). */
  keys: Keys;
  /** Under `--replicas`: /flush_cache on the shared port reaches every replica's picture of the caches. */
  replicas?: ReplicaWrites | null;
}

/** SGLang's /flush_cache text (http_server.py flush_cache), the same for success and refusal. */
export const FLUSH_CACHE_TEXT =
  'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';

function idNumber(w: Worker): number {
  const n = Number(w.id.replace(/^\D+/, ''));
  return Number.isFinite(n) ? n : Number.MAX_SAFE_INTEGER;
}

/** The worker that answers for the cluster: the first eligible one by id (w0, w1, ...). */
export function referenceWorker(pool: WorkerPool): Worker | null {
  const eligible = pool.list().filter((w) => w.eligible());
  eligible.sort((a, b) => idNumber(a) - idNumber(b) || a.id.localeCompare(b.id));
  return eligible[0] ?? null;
}

/** Which of model_path and weight_version the eligible, probed workers disagree on. */
export function disagreement(pool: WorkerPool): string[] {
  const out: string[] = [];
  const ws = pool.list().filter((w) => w.eligible() && w.probed);
  for (const [key, get] of [['model_path', (w: Worker) => w.modelPath], ['weight_version', (w: Worker) => w.weightVersion]] as const) {
    if (new Set(ws.map(get)).size > 1) out.push(key);
  }
  return out;
}

function noWorker(res: ServerResponse): void {
  objectError(res, 503, 'no healthy worker available', '503');
}

async function forward(ctx: SglangApiContext, res: ServerResponse, w: Worker, path: string, method: 'GET' | 'POST', body?: Buffer): Promise<void> {
  try {
    const up = await w.pool.request({
      path,
      method,
      headers: body ? { 'content-type': 'application/json' } : {},
      body,
      signal: AbortSignal.timeout(ctx.forwardTimeoutMs),
    });
    const text = Buffer.from(await up.body.arrayBuffer());
    const headers: Record<string, string> = { 'content-length': String(text.length), 'x-baton-worker': w.url };
    const ct = up.headers['content-type'];
    if (ct) headers['content-type'] = String(ct);
    const differ = disagreement(ctx.pool);
    if (differ.length > 0) headers['x-baton-disagreement'] = differ.join(', ');
    res.writeHead(up.statusCode, headers);
    res.end(text);
  } catch (err) {
    httpException(res, 503, `worker ${w.url} did not answer ${path}: ${(err as Error).message}`);
  }
}

/** The body of /abort_request as SGLang's AbortReq reads it: rid (str, default ""), abort_all (bool). */
export function parseAbortBody(raw: Buffer): { rid: string; abortAll: boolean } | PydanticError[] {
  let json: unknown;
  if (raw.length === 0) return [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }];
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    return [{ type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error', input: {}, ctx: { error: (err as Error).message } }];
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return [{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: json }];
  }
  const b = json as Record<string, unknown>;
  const errors: PydanticError[] = [];
  let rid = '';
  if (b.rid !== undefined) {
    if (typeof b.rid === 'string') rid = b.rid;
    else errors.push({ type: 'string_type', loc: ['body', 'rid'], msg: 'Input should be a valid string', input: b.rid });
  }
  let abortAll = false;
  if (b.abort_all !== undefined) {
    const v = b.abort_all;
    const word = typeof v === 'string' ? v.trim().toLowerCase() : null;
    if (typeof v === 'boolean') abortAll = v;
    else if (v === 0 || v === 1) abortAll = v === 1;
    else if (word !== null && ['1', 'on', 't', 'true', 'y', 'yes'].includes(word)) abortAll = true;
    else if (word !== null && ['0', 'off', 'f', 'false', 'n', 'no'].includes(word)) abortAll = false;
    else errors.push({ type: typeof v === 'string' || typeof v === 'number' ? 'bool_parsing' : 'bool_type', loc: ['body', 'abort_all'], msg: typeof v === 'string' || typeof v === 'number' ? 'Input should be a valid boolean, unable to interpret input' : 'Input should be a valid boolean', input: v });
  }
  return errors.length > 0 ? errors : { rid, abortAll };
}

/** The forwarded-to-a-worker abort, for passthrough requests: fire and forget. */
export function postAbort(w: Worker, body: string): void {
  void w.pool
    .request({ path: '/abort_request', method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(5000) })
    .then((r) => r.body.dump(), () => undefined);
}

export function addSglangRoutes(routes: Routes, ctx: SglangApiContext): void {
  routes.add('POST', '/abort_request', async (req: IncomingMessage, res: ServerResponse) => {
    let raw: Buffer;
    try {
      raw = await readBody(req, 64 * 1024, ctx.bodyTimeoutMs);
    } catch (err) {
      const e = err as BodyError;
      return httpException(res, e.status ?? 400, e.message, { connection: 'close' });
    }
    const parsed = parseAbortBody(raw);
    if (Array.isArray(parsed)) return malformedBody(res, parsed);
    // abort_all ends every client's requests: the admin token's (the door took either key).
    const refusal = parsed.abortAll ? destructiveRefusal(req, ctx.keys, true) : null;
    if (refusal !== null) return sendJson(res, refusal.status, refusal.body, refusal.headers);
    if (parsed.abortAll) {
      for (const e of ctx.registry.all()) if (e.kind === 'logical') e.abort();
    } else {
      for (const e of ctx.registry.toAbort(parsed.rid)) e.abort();
    }
    // Batches, n > 1 and unparsed requests run under the client's rids (or the worker's own):
    // only their worker can match them, with SGLang's own rules.
    const body = JSON.stringify(parsed.abortAll ? { rid: parsed.rid, abort_all: true } : { rid: parsed.rid, abort_all: false });
    for (const w of new Set(ctx.registry.all().map((e) => e.worker).filter((w): w is Worker => w !== null))) postAbort(w, body);
    res.writeHead(200, { 'content-length': '0' });
    res.end();
  }, 'abort');

  routes.add('GET', '/health_generate', async (_req, res) => {
    const w = referenceWorker(ctx.pool);
    if (!w) {
      res.writeHead(503, { 'content-length': '0' });
      return void res.end();
    }
    let status = 503;
    try {
      const up = await w.pool.request({ path: '/health_generate', method: 'GET', signal: AbortSignal.timeout(ctx.forwardTimeoutMs) });
      await up.body.dump();
      status = up.statusCode === 200 ? 200 : 503;
    } catch {
      status = 503;
    }
    res.writeHead(status, { 'content-length': '0', 'x-baton-worker': w.url });
    res.end();
  }, false);

  const flush = async (req: IncomingMessage, res: ServerResponse) => {
    const workers = ctx.pool.list();
    if (workers.length === 0) return noWorker(res);
    const results = await Promise.all(workers.map(async (w) => {
      try {
        const up = await w.pool.request({ path: '/flush_cache', method: 'POST', signal: AbortSignal.timeout(ctx.forwardTimeoutMs) });
        const text = await up.body.text();
        // The worker's cache is empty now: so is what cache_aware believes of it.
        if (up.statusCode === 200) ctx.pool.cacheFlushed(w);
        return { url: w.url, ok: up.statusCode === 200, text, ct: up.headers['content-type'] };
      } catch {
        return { url: w.url, ok: false, text: null, ct: undefined };
      }
    }));
    const first = results.find((r) => r.text !== null);
    const text = first?.text ?? FLUSH_CACHE_TEXT;
    const headers: Record<string, string> = { 'content-length': String(Buffer.byteLength(text)) };
    if (first?.ct) headers['content-type'] = String(first.ct);
    let status = results.every((r) => r.ok) ? 200 : 400;
    const flushed = results.filter((r) => r.ok).map((r) => r.url);
    // The text is the worker's (SGLang's own): how the replicas took it goes in a header.
    const report = flushed.length > 0 ? await shareWrite(ctx.replicas ?? null, req, { op: 'flushed', urls: flushed }) : null;
    if (report !== null) {
      headers['x-baton-replicas'] = report.message;
      if (report.failed.length > 0 && status === 200) status = 502;
    }
    res.writeHead(status, headers);
    res.end(text);
  };
  routes.add('GET', '/flush_cache', flush, 'destructive');
  routes.add('POST', '/flush_cache', flush, 'destructive');

  for (const path of ['/server_info', '/get_server_info', '/model_info', '/get_model_info', '/get_weight_version']) {
    routes.add('GET', path, async (_req, res) => {
      const w = referenceWorker(ctx.pool);
      if (!w) return noWorker(res);
      await forward(ctx, res, w, path, 'GET');
    }, false);
  }
}

