// A fault-injecting proxy in front of one simulated worker, for the law tests. Faults are keyed
// by the logical request (the rid up to the router's `~m<k>` continuation suffix) and by the
// attempt's arrival order, so a test states "attempt 0 breaks after 7 frames, attempt 1 is
// refused" without knowing which worker the router will pick. It also records every upstream
// request body, so the tests can check what each continuation asked for.
import { createServer, type Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault =
  | { kind: 'refuse'; status: number } // a 5xx answer before any body
  | { kind: 'reset'; afterFrames: number } // socket destroyed after k whole frames
  | { kind: 'cut'; afterFrames: number } // k whole frames, half of the next, then destroyed
  | { kind: 'abort'; afterFrames: number } // SGLang's in-band abort chunk (status_code 500), then [DONE]
  | { kind: 'error'; afterFrames: number } // an in-band {"error"} frame the engine marks as its own (code 500, retryable)
  | { kind: 'end'; afterFrames: number } // a clean [DONE] without a finished chunk
  // The request's own refusal, in band, in current SGLang's shape or the pre-2026-06 one
  // (`{"message"}` only): never migrated, passed to the client, the worker not blamed.
  | { kind: 'refusal'; afterFrames: number; legacy: boolean }
  | { kind: 'status4xx'; status: number } // a 4xx answer before any body (a proxy's 429, 413, 401, ...)
  | { kind: 'lose_final' }; // the finishing frame arrives with finish_reason null, then a reset

export interface Call {
  proxy: string;
  body: Record<string, unknown>;
  fault: Fault | null;
  framesSent: number;
  /** The finishing frame went through: later frames (vLLM's usage chunk) are past the answer. */
  pastFinal?: boolean;
}

/** The generate paths of the formats the proxy stands in front of (SGLang, vLLM). */
const GENERATE_PATHS = new Set(['/generate', '/inference/v1/generate']);

type Chunk = Record<string, unknown> & { meta_info?: Record<string, unknown>; choices?: Record<string, unknown>[] };

/** A chunk's finish reason in either format: SGLang's meta_info.finish_reason, vLLM's choices[0].finish_reason (undefined: a chunk without one, such as vLLM's usage-only chunk). */
function finishOf(c: Chunk): unknown {
  if (c.meta_info) return c.meta_info.finish_reason;
  return Array.isArray(c.choices) && c.choices.length > 0 ? c.choices[0]!.finish_reason : undefined;
}

function setFinish(c: Chunk, v: unknown): void {
  if (c.meta_info) c.meta_info.finish_reason = v as never;
  else if (Array.isArray(c.choices) && c.choices.length > 0) c.choices[0]!.finish_reason = v;
}

function caseIdOf(rid: unknown): string {
  return typeof rid === 'string' ? rid.split('~')[0]! : '';
}

/** Schedules and calls, shared by the proxies of one cluster: attempt k is the k-th call anywhere. */
export class FaultBook {
  readonly schedules = new Map<string, (Fault | null)[]>();
  readonly calls = new Map<string, Call[]>();
}

export class FaultProxy {
  private server!: Server;
  url = '';

  constructor(
    private readonly upstream: string,
    readonly book = new FaultBook(),
  ) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  callsFor(caseId: string): Call[] {
    return this.book.calls.get(caseId) ?? [];
  }

  private async readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await this.readBody(req);
    const path = req.url ?? '/';
    if (!GENERATE_PATHS.has(path)) {
      const up = await fetch(this.upstream + req.url, { method: req.method, body: req.method === 'GET' ? undefined : new Uint8Array(body) });
      res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
      res.end(Buffer.from(await up.arrayBuffer()));
      return;
    }
    const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    const caseId = caseIdOf(parsed.rid ?? parsed.request_id);
    const list = this.book.calls.get(caseId) ?? [];
    this.book.calls.set(caseId, list);
    const fault = this.book.schedules.get(caseId)?.[list.length] ?? null;
    const call: Call = { proxy: this.url, body: parsed, fault, framesSent: 0 };
    list.push(call);

    if (fault?.kind === 'refuse') {
      res.writeHead(fault.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'error', message: 'injected refusal', type: 'ServiceUnavailable', param: null, code: fault.status }));
      return;
    }
    if (fault?.kind === 'status4xx') {
      res.writeHead(fault.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `injected ${fault.status} from a proxy`, type: 'ProxyError', code: fault.status } }));
      return;
    }
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    let up: Response;
    try {
      up = await fetch(this.upstream + path, { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': 'application/json' }, signal: ac.signal });
    } catch {
      res.destroy();
      return;
    }
    res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'text/event-stream' });
    // The head goes out now, before any frame, as a worker's does: SGLang's stream branch returns
    // a StreamingResponse (http_server.py, generate_request), whose http.response.start uvicorn
    // writes before the first chunk. So a fault after 0 frames is a stream that broke after its
    // head, not a connection closed unanswered (which h1.ts sends again once on a fresh
    // connection when it was a reused one: the worker's keep-alive close crossing the request).
    res.flushHeaders();
    if (!up.body) return void res.end();
    let pending = '';
    let faulted = false;
    const decoder = new TextDecoder();
    try {
      outer: for await (const chunk of up.body as unknown as AsyncIterable<Uint8Array>) {
        pending += decoder.decode(chunk as Uint8Array, { stream: true });
        let i: number;
        while ((i = pending.indexOf('\n\n')) >= 0) {
          const frame = pending.slice(0, i + 2);
          pending = pending.slice(i + 2);
          if (this.onFrame(frame, call, res)) {
            faulted = true;
            break outer;
          }
        }
      }
    } catch (err) {
      if (faulted) return;
      // upstream went away: pass the break on
      if (process.env.PROXY_DEBUG) console.error('proxy', err);
      res.destroy();
      return;
    }
    if (faulted) {
      // Stop the worker's generation as a vanished client would (the fault owns `res`).
      setImmediate(() => ac.abort());
      return;
    }
    res.end(pending);
  }

  /** Whether a frame is vLLM's (choices) rather than SGLang's (meta_info). */
  private vllm(frame: string): boolean {
    return frame.includes('"choices"');
  }

  /** Forward one frame or apply the fault; true when the response was ended by a fault. */
  private onFrame(frame: string, call: Call, res: ServerResponse): boolean {
    const f = call.fault;
    // Frames after the finishing one (vLLM's usage-only chunk) carry no tokens: a fault there
    // would only race the finishing frame's delivery, so they pass untouched.
    const isDone = frame.startsWith('data: [DONE]') || call.pastFinal === true;
    if (f && f.kind !== 'refuse' && f.kind !== 'status4xx' && f.kind !== 'lose_final' && !isDone && call.framesSent === f.afterFrames) {
      switch (f.kind) {
        case 'reset':
          res.destroy();
          return true;
        case 'cut':
          res.write(frame.slice(0, Math.max(1, Math.floor(frame.length / 2))));
          setTimeout(() => res.destroy(), 5);
          return true;
        case 'abort': {
          const chunk = JSON.parse(frame.slice(6)) as Chunk;
          // SGLang: a scheduler abort with a 5xx status; vLLM: an abort finish nobody asked for.
          setFinish(chunk, chunk.meta_info ? { type: 'abort', message: 'injected engine abort', status_code: 500, err_type: null } : 'abort');
          res.end(`data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`);
          return true;
        }
        case 'error':
          res.end(this.vllm(frame)
            ? 'data: {"error":{"message":"CUDA error: an illegal memory access was encountered","type":"InternalServerError","param":null,"code":500}}\n\ndata: [DONE]\n\n'
            : 'data: {"error":{"message":"CUDA error: an illegal memory access was encountered","type":"InternalServerError","code":500,"retryable":true}}\n\ndata: [DONE]\n\n');
          return true;
        case 'refusal': {
          // Worded so that no word list could take it for a refusal: only the shape says so.
          const error = this.vllm(frame)
            ? { message: 'injected refusal: token 99999 out of range', type: 'BadRequestError', param: null, code: 400 }
            : f.legacy ? { message: 'injected refusal: token 99999 out of range' } : { message: 'injected refusal: token 99999 out of range', type: 'BadRequestError', code: 400, retryable: false };
          res.end(`data: ${JSON.stringify({ error })}\n\ndata: [DONE]\n\n`);
          return true;
        }
        case 'end':
          res.end('data: [DONE]\n\n');
          return true;
      }
    }
    if (f?.kind === 'lose_final' && !isDone) {
      const chunk = JSON.parse(frame.slice(6)) as Chunk;
      const finish = finishOf(chunk);
      if (finish !== null && finish !== undefined) {
        setFinish(chunk, null);
        if (chunk.meta_info) delete chunk.meta_info.e2e_latency;
        // Reset only once the frame has reached the kernel: a destroy() right after write()
        // can drop it on a loaded machine, and then the law would test a different fault.
        res.write(`data: ${JSON.stringify(chunk)}\n\n`, () => setTimeout(() => res.destroy(), 5));
        call.framesSent++;
        return true;
      }
    }
    res.write(frame);
    if (!isDone && frame.startsWith('data: {')) {
      const fin = finishOf(JSON.parse(frame.slice(6)) as Chunk);
      if (fin !== null && fin !== undefined) call.pastFinal = true;
    }
    if (!isDone) call.framesSent++;
    return false;
  }
}
