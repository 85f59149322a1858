// The one request path every front shares: admit (the router's concurrency limit), read the body,
// guard and parse it with the front (its parse and its error shapes), register it while in flight
// (duplicate rids, aborts), then run the migration loop or pass it through to one worker. A front
// (router/fronts/index.ts) brings only a `Front`; nothing here names a format.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteHandler } from '../api.ts';
import type { InboundTrace, Telemetry } from '../telemetry.ts';
import type { FormatRequest, WireFormat } from '../core/types.ts';
import { ClientSink } from '../core/client-sink.ts';
import { LogicalRequest, type LoopContext } from '../migration/logical-request.ts';
import { PassThroughRequest } from '../migration/pass-through.ts';
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
  private readonly telemetry: Telemetry;

  constructor(
    private readonly settings: PathSettings,
    private readonly loop: LoopContext,
  ) {
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
   * Batches, n > 1 and unparsed requests: served whole by one worker, never migrated
   * (migration/pass-through.ts: its worker, its P/D refusal, its rows). The edge writes the
   * answers that are the front's or the format's.
   */
  private async serveUnstitchable(front: Front, parsed: FormatRequest, bodyText: string, id: string, res: ServerResponse, headers: Record<string, string>, entry: InFlight, format: WireFormat, trace: InboundTrace | null, path: string): Promise<void> {
    const whole = new PassThroughRequest(this.loop, format, parsed, id, trace);
    const { worker, refusal } = whole.place();
    if (refusal !== null) return format.writeRequestError(res, parsed.stream, 400, refusal, headers);
    entry.worker = worker;
    whole.admit(path);
    if (!worker) {
      // Still one request row, as for a stitchable request that found no worker.
      front.noWorker!(res, headers);
      whole.noWorker();
      return;
    }
    await whole.serve(worker, bodyText, res, headers, this.settings.clientWriteTimeoutMs);
  }
}

/** The x-request-id header a request's answer carries. */
export function requestIdHeaders(id: string): Record<string, string> {
  // The id goes out as a header only if it can: a rid with CR/LF or non-Latin-1 characters is
  // valid for SGLang, and it still comes back in meta_info.id.
  return isHeaderSafe(id) && id.length <= 1024 ? { 'x-request-id': id } : {};
}
