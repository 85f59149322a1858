// A small HTTP proxy in front of one worker that refuses a seeded share of continuations with
// 429, as a rate-limiting gateway or an overloaded SGLang front would: a 4xx that belongs to
// the request, not to the worker. Everything else (health checks, probes, other attempts,
// /abort_request) passes through untouched, streamed both ways; when the worker fails (killed,
// reset, hung), the proxy fails the same way toward the router (a destroyed socket, silence).
//
// A continuation is recognised by its upstream rid (router/migration/rid.ts: `<id>~m<k>~<nonce>`,
// k >= 1). Whether attempt k of request id is refused is a pure function of (seed, id, k).
//
// In front of a vLLM worker it reads vLLM's generate (`POST /inference/v1/generate`, the rid in
// `request_id`) and answers in vLLM's error shape (`{"error": {"message", "type", "param", "code"}}`).

import { createServer, request as httpRequest, Agent, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fmix32 } from '../sim/model.ts';
import { parseUpstreamRid } from '../router/migration/rid.ts';
import { GENERATE_PATH, type WireFormat } from './formats.ts';

export interface Refusal {
  rid: string;
  id: string;
  attempt: number;
  at: number;
}

/** Whether attempt `attempt` of logical request `id` is refused (pure: seed, id, attempt). */
export function refusesContinuation(seed: number, share: number, id: string, attempt: number): boolean {
  if (attempt < 1 || share <= 0) return false;
  let h = fmix32((seed ^ 0x429c0de) >>> 0);
  for (let i = 0; i < id.length; i++) h = fmix32((h ^ id.charCodeAt(i)) >>> 0);
  h = fmix32((h ^ Math.imul(attempt, 0x9e3779b1)) >>> 0);
  return h / 4294967296 < share;
}

/** The body the proxy answers with (the format's error shape for its generate). */
export function refusalBody(rid: string, attempt: number, format: WireFormat = 'sglang'): string {
  const message = `Too Many Requests: the gateway refused continuation attempt ${attempt} (${rid})`;
  if (format === 'vllm') return JSON.stringify({ error: { message, type: 'TooManyRequests', param: null, code: 429 } });
  return JSON.stringify({ error: { message, code: 429 } });
}

function withoutHopByHop(h: IncomingHttpHeaders): IncomingHttpHeaders {
  const out = { ...h };
  delete out.connection;
  delete out['keep-alive'];
  return out;
}

export class ContinuationProxy {
  readonly refusals: Refusal[] = [];
  /** Continuations (attempt >= 1) seen on the generate path. */
  continuations = 0;
  url = '';
  private readonly server: Server;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 512 });
  private readonly sockets = new Set<Socket>();
  private readonly target: URL;

  constructor(
    target: string,
    private readonly seed: number,
    private readonly share: number,
    readonly format: WireFormat = 'sglang',
  ) {
    this.target = new URL(target);
    this.server = createServer((req, res) => this.onRequest(req, res));
    // uvicorn's keep-alive timeout, as the worker behind it.
    this.server.keepAliveTimeout = 5000;
    this.server.requestTimeout = 0;
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'POST' && path === GENERATE_PATH[this.format]) {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('error', () => res.destroy());
      req.on('end', () => {
        const body = Buffer.concat(parts);
        const refusal = this.judge(body);
        if (refusal) {
          this.refusals.push(refusal);
          const text = refusalBody(refusal.rid, refusal.attempt, this.format);
          res.writeHead(429, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'retry-after': '1' });
          res.end(text);
          return;
        }
        this.forward(req, res, body);
      });
      return;
    }
    this.forward(req, res, req);
  }

  private judge(body: Buffer): Refusal | null {
    let rid: unknown;
    try {
      const parsed = JSON.parse(body.toString('utf8')) as { rid?: unknown; request_id?: unknown };
      rid = this.format === 'vllm' ? parsed.request_id : parsed.rid;
    } catch {
      return null;
    }
    if (typeof rid !== 'string') return null;
    const parsed = parseUpstreamRid(rid);
    if (!parsed || parsed.attempt < 1) return null;
    this.continuations++;
    if (!refusesContinuation(this.seed, this.share, parsed.id, parsed.attempt)) return null;
    return { rid, id: parsed.id, attempt: parsed.attempt, at: Date.now() };
  }

  /** Pass the request on as it came; fail toward the router as the worker failed toward us. */
  private forward(req: IncomingMessage, res: ServerResponse, body: Buffer | IncomingMessage): void {
    const headers = withoutHopByHop(req.headers);
    headers.host = this.target.host;
    const up = httpRequest(
      { host: this.target.hostname, port: this.target.port, method: req.method, path: req.url, headers, agent: this.agent },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, withoutHopByHop(upRes.headers));
        upRes.on('data', (c: Buffer) => {
          if (!res.write(c)) {
            upRes.pause();
            res.once('drain', () => upRes.resume());
          }
        });
        upRes.on('end', () => res.end());
        upRes.on('error', () => res.destroy());
        upRes.on('close', () => {
          if (!upRes.complete) res.destroy();
        });
      },
    );
    up.on('error', () => res.destroy());
    // The router went away (a cancel, a stall it gave up on): the worker must see it go too.
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    if (Buffer.isBuffer(body)) up.end(body);
    else body.pipe(up);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
