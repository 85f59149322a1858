// The one request path every front shares: admit (the router's concurrency limit), read the body,
// guard and parse it with the front (its parse and its error shapes), register it while in flight
// (duplicate rids, aborts), then run the migration loop or pass it through to one worker. A front
// (router/fronts/index.ts) brings only a `Front`; nothing here names a format.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteHandler } from '../api.ts';
import type { InboundTrace, Telemetry } from '../telemetry.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { FormatRequest, WireFormat } from '../core/types.ts';
import { ClientSink } from '../core/client-sink.ts';
import { LogicalRequest, type LoopContext } from '../migration/logical-request.ts';
import { classifyTransportError } from '../core/failure.ts';
import { passThrough } from '../upstream/passthrough.ts';
import { BodyError, readBody } from './body.ts';
import { isHeaderSafe } from './guards.ts';
import { RequestRegistry, type InFlight } from './in-flight.ts';

/** A parsed request, ready to serve: what a front's parse hands the path. */
export interface Parsed {
  /** The wire format its workers speak (the OpenAI front's: over SGLang's or vLLM's). */
  format: WireFormat;
  parsed: FormatRequest;
  /** The body as the client wrote it (forwarded as is when passed through). */
  text: string;
  /** The logical id: meta_info.id, x-request-id, the trace rows' request_id. */
  id: string;
  idHeaders: Record<string, string>;
  /** Served by one worker as written (batches, n > 1, unparsed), never migrated. */
  passthrough: boolean;
  /** The rids it claims while in flight (in-flight.ts). */
  rids: string[];
  /**
   * Served as several logical requests whose answers one client sink joins (the OpenAI front's
   * n > 1 and prompt lists: fronts/openai/fanout.ts); `format`/`parsed` are then the first's.
   */
  fanout?: FanOut;
}

/** Several logical requests behind one answer: each with its own sink, made over the client's. */
export interface FanOut {
  children: { format: WireFormat; parsed: FormatRequest; id: string }[];
  /** The children's sinks, over the client's one (index k: children[k]'s). */
  sinks(client: ClientSink, res: ServerResponse): ClientSink[];
  /** The children's logical requests, once made (a failing one cancels the others). */
  attach(lrs: LogicalRequest[]): void;
}

/** What a front brings to the path: its parse and its error shapes. */
/** The path a request came on, without its query: what the dashboard badges as its front. */
function frontPath(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export interface Front {
  /** The router is at its limit of `limit` concurrent requests (a 503 with retry-after). */
  busy(res: ServerResponse, limit: number): void;
  /** The body could not be read (too large, too slow, cut off): the connection closes after. */
  bodyError(res: ServerResponse, status: number, message: string): void;
  /**
   * Guard and parse the body; null when it wrote the refusal itself. A throw is a 500. A promise
   * when parsing has to wait (the Responses front fetching a stored response from another replica).
   */
  parse(raw: Buffer, req: IncomingMessage, res: ServerResponse): Parsed | null | Promise<Parsed | null>;
  /** A rid the request claims is in flight (only fronts whose requests claim rids meet it). */
  duplicate?(res: ServerResponse, stream: boolean, message: string, headers: Record<string, string>): void;
  /** A passed-through request found no worker (only fronts that pass requests through). */
  noWorker?(res: ServerResponse, headers: Record<string, string>): void;
}

export interface PathSettings {
  maxConcurrentRequests: number;
  maxBodyBytes: number;
  bodyTimeoutMs: number;
  clientWriteTimeoutMs: number;
}

/** A request in flight, as the registry holds it (a class: no closure made per request, see request.ts). */
class Entry implements InFlight {
  worker: InFlight['worker'] = null;
  lr: LogicalRequest | null = null;
  /** A fanned-out request's logical requests (Parsed.fanout). */
  lrs: LogicalRequest[] = [];
  constructor(
    readonly id: string,
    readonly kind: InFlight['kind'],
    readonly rids: readonly string[],
  ) {}

  abort(): void {
    this.lr?.abort();
    for (const lr of this.lrs) lr.abort();
  }
}

export class RequestPath {
  /** Requests admitted and not yet answered, of every front (the --max-concurrent-requests limit). */
  inFlight = 0;
  /** Logical requests in flight, by logical id: duplicate rids and aborts (in-flight.ts). */
  readonly registry = new RequestRegistry();
  private readonly pool: WorkerPool;
  private readonly telemetry: Telemetry;

  constructor(
    private readonly settings: PathSettings,
    private readonly loop: LoopContext,
  ) {
    this.pool = loop.pool;
    this.telemetry = loop.telemetry;
  }

  /** The route handler of a front's generate endpoint (made once per route, not per request). */
  route(front: Front): RouteHandler {
    return async (req, res) => {
      const limit = this.settings.maxConcurrentRequests;
      if (this.inFlight >= limit) {
        front.busy(res, limit);
        req.resume();
        return;
      }
      this.inFlight++;
      try {
        let raw: Buffer;
        try {
          raw = await readBody(req, this.settings.maxBodyBytes, this.settings.bodyTimeoutMs);
        } catch (err) {
          const e = err as BodyError;
          return front.bodyError(res, e.status ?? 400, e.message);
        }
        let r = front.parse(raw, req, res);
        if (r instanceof Promise) r = await r;
        if (r === null) return;
        // A fanned-out request is as many requests as it has children, against the same limit.
        const extra = r.fanout ? r.fanout.children.length - 1 : 0;
        if (extra > 0 && this.inFlight + extra > limit) return front.busy(res, limit);
        this.inFlight += extra;
        try {
          await this.serve(front, req, res, r);
        } finally {
          this.inFlight -= extra;
        }
      } finally {
        this.inFlight--;
      }
    };
  }

  /**
   * A parsed request: registered while in flight (duplicate rids, aborts), then served by one
   * worker as written (batches, n > 1, unparsed) or by the migration loop.
   */
  private async serve(front: Front, req: IncomingMessage, res: ServerResponse, r: Parsed): Promise<void> {
    const { parsed, id, idHeaders, format } = r;
    let lr: LogicalRequest | null = null;
    const entry = new Entry(id, r.passthrough ? 'passthrough' : 'logical', r.rids);
    const duplicate = this.registry.add(entry);
    if (duplicate !== null) {
      req.resume();
      return front.duplicate!(res, parsed.stream, `Duplicate request ID detected: ${duplicate}`, idHeaders);
    }
    try {
      // A request every worker would fail alike (formats/sglang/request.ts unknownSamplingKey):
      // refused here, after the rid checks as SGLang orders them, as the worker's request error.
      if (parsed.refusal) return format.writeRequestError(res, parsed.stream, 400, parsed.refusal, idHeaders);
      const trace = this.telemetry.inboundTrace(req, format.generatePath);
      if (r.passthrough) {
        await this.serveUnstitchable(front, parsed, r.text, id, res, idHeaders, entry, format, trace, frontPath(req));
        return;
      }
      // The OpenAI front's answer is Baton's own; a native one carries its worker's content type.
      const sink = new ClientSink(res, parsed.stream, idHeaders, () => lr?.cancel(), format.errors, this.settings.clientWriteTimeoutMs, format.name !== 'openai');
      if (r.fanout) {
        const sinks = r.fanout.sinks(sink, res);
        entry.lrs = r.fanout.children.map((c, k) => new LogicalRequest(this.loop, c.format, c.parsed, c.id, sinks[k]!, trace));
        for (const l of entry.lrs) l.front = frontPath(req);
        r.fanout.attach(entry.lrs);
        await Promise.all(entry.lrs.map((l) => l.run()));
        return;
      }
      lr = new LogicalRequest(this.loop, format, parsed, id, sink, trace);
      lr.front = frontPath(req);
      entry.lr = lr;
      await lr.run();
    } finally {
      this.registry.delete(entry);
    }
  }

  /**
   * Batches, n > 1 and unparsed requests: one attempt, the body forwarded as the client wrote it,
   * the answer passed back as the worker wrote it; traced, never migrated, never blamed on the
   * worker (its refusal of a bad value is the request's fault).
   */
  private async serveUnstitchable(front: Front, parsed: FormatRequest, bodyText: string, id: string, res: ServerResponse, headers: Record<string, string>, entry: InFlight, format: WireFormat, trace: InboundTrace | null, path: string): Promise<void> {
    const { pool, telemetry } = this;
    const reason = parsed.prompt.kind === 'batch' ? 'batch' : typeof parsed.sampling.n === 'number' && parsed.sampling.n > 1 ? 'n_gt_1' : 'unparsed_field';
    // P/D (docs/pd.md): a decode server serves only a request with its bootstrap room, which
    // Baton gives to the single requests it pairs; these go to an aggregated worker or nowhere.
    const decodes = new Set(pool.list().filter((w) => w.pdRole === 'decode').map((w) => w.id));
    const worker = pool.pick(decodes, null, format.workers);
    if (worker === null && decodes.size > 0) {
      const what = reason === 'batch' ? 'a batch' : reason === 'n_gt_1' ? 'n > 1' : 'a body Baton cannot parse';
      return format.writeRequestError(res, parsed.stream, 400, `${what} is not served in P/D mode without an aggregated worker: a decode server needs one bootstrap room per request, which Baton gives only to the single requests it pairs with a prefill server (add --worker URL to serve it)`, headers);
    }
    entry.worker = worker;
    const started = Date.now();
    const src = { id, trace, attemptIndex: () => 0, progress: () => ({ tokens: 0, completion: 0 }) };
    telemetry.requestAdmitted(src, {
      request_id: id, admitted: false, reason, stream: parsed.stream, prompt_tokens: parsed.promptLength ?? 0, max_new_tokens: typeof parsed.maxNewTokens === 'number' ? parsed.maxNewTokens : null,
      format: format.name, front: path,
    });
    if (!worker) {
      // Still one request row, as for a stitchable request that found no worker.
      front.noWorker!(res, headers);
      const ended = Date.now();
      telemetry.requestFinished(src, { kind: 'request', format: format.name, request_id: id, attempts: 0, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: parsed.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome: 'failed', duration_ms: ended - started, started_at: started, ended_at: ended, stream: parsed.stream, max_new_tokens: null, error: null, client_error: 'no_worker: no healthy worker available', client_status: 503 }, null, false);
      return;
    }
    const upstreamHeaders = telemetry.attemptStarted({ request_id: id, attempt: 0, rid: id, worker: worker.url, replayed_tokens: 0, budget_before: null });
    const ac = new AbortController();
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    worker.inFlight++;
    const failure = await passThrough(worker, bodyText, res, headers, ac.signal, classifyTransportError, format.generatePath, upstreamHeaders, this.settings.clientWriteTimeoutMs);
    worker.inFlight--;
    const ended = Date.now();
    const outcome = failure === null ? 'finished' : failure.kind === 'client_cancel' ? 'cancelled' : 'failed';
    telemetry.attemptEnded({ kind: 'attempt', format: format.name, request_id: id, attempt: 0, rid: id, worker: worker.url, started_at: started, ended_at: ended, ttft_ms: null, prompt_tokens_sent: parsed.promptLength ?? 0, replayed_tokens: 0, tokens: 0, budget_before: null, budget_after: null, cached_tokens: null, placement_prefix: null, placement_reason: null, outcome, error_kind: failure?.kind ?? null, error: failure?.message ?? null, error_evidence: failure?.evidence ?? null, finish_reason: null });
    telemetry.requestFinished(src, { kind: 'request', format: format.name, request_id: id, attempts: 1, migrations: 0, admitted: false, admission_reason: reason, prompt_tokens: parsed.promptLength ?? 0, completion_tokens: 0, cached_tokens: null, finish_reason: null, outcome, duration_ms: ended - started, started_at: started, ended_at: ended, stream: parsed.stream, max_new_tokens: null, error: failure?.message ?? null, client_error: outcome === 'failed' && failure ? `${failure.kind}: ${failure.message}` : null, client_status: outcome === 'failed' && failure ? failure.status : null }, null, false);
  }
}

/** The x-request-id header a request's answer carries. */
export function requestIdHeaders(id: string): Record<string, string> {
  // The id goes out as a header only if it can: a rid with CR/LF or non-Latin-1 characters is
  // valid for SGLang, and it still comes back in meta_info.id.
  return isHeaderSafe(id) && id.length <= 1024 ? { 'x-request-id': id } : {};
}
