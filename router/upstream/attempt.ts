// One upstream call to one worker: the single-attempt layer under the migration loop. It owns
// the connection-level facts (status, bytes, framing, aborts, stalls) and hands whole SSE frames
// to its owner; it knows nothing of rebasing or budgets. It ends exactly once, with a result.
// What went wrong on the wire it reports as a fact (TransportFact); which failure that is, and
// whether it migrates, is the loop's table (core/failure.ts classifyTransportFact).
import type { Failure, TransportFact } from '../core/failure.ts';
import { SseSplitter, type FrameSink } from '../core/sse.ts';
import type { StallWatch, Watched } from './stall-watch.ts';
import type { H1Exchange, H1Handler } from './h1.ts';
import type { Worker } from '../pool/worker.ts';

export type { TransportFact } from '../core/failure.ts';

export type AttemptResult =
  | { kind: 'finished' }
  /** A failure the owner found in the stream (formats/<name>/failure.ts), or a fact the loop classified. */
  | { kind: 'failed'; failure: Failure }
  | { kind: 'transport'; fact: TransportFact }
  | { kind: 'cancelled' };

/** Every attempt's request header lines (h1.ts adds host, content-length and connection). */
const UPSTREAM_HEADERS = 'content-type: application/json\r\naccept: text/event-stream\r\n';

/** Extra header lines (the trace context), each `name: value` CRLF; names and values as telemetry made them. */
function headerLines(extra: Record<string, string>): string {
  let out = UPSTREAM_HEADERS;
  for (const k in extra) {
    const v = extra[k]!;
    // A header line can't hold CR or LF; telemetry's values never do, and this keeps it so.
    if (/[\r\n]/.test(k) || /[\r\n]/.test(v)) continue;
    out += `${k}: ${v}\r\n`;
  }
  return out;
}

/** Cap on an error body kept to pass a worker's 4xx answer through. */
const ERROR_BODY_CAP = 64 * 1024;

export class UpstreamCall implements Watched, H1Handler {
  chunks = 0;
  paused = false;
  seenChunks = 0;
  lastMovedAt = 0;
  /** Tokens per frame at most (stall-watch.ts frameSpacing): the stall deadline's multiplier. */
  spacing = 1;

  status = 0;
  /** A 200 with a body that is not SSE: the worker answered unary despite stream=true. */
  unaryBody: Buffer[] | null = null;
  private errorBody: Buffer[] | null = null;
  private errorBytes = 0;
  /** The worker's Content-Type (the client's head carries it: ClientSink.offerContentType). */
  contentType = '';
  private exchange: H1Exchange | null = null;
  private readonly splitter = new SseSplitter();
  private done = false;
  /** The owner holds this call's frames (P/D, hold()): its end waits for release(). */
  private holding = false;
  private heldEnd: (() => void) | null = null;
  readonly result: Promise<AttemptResult>;
  private resolve!: (r: AttemptResult) => void;

  constructor(
    readonly worker: Worker,
    /** The worker's generate path (the format's). */
    private readonly path: string,
    private readonly body: string | Buffer,
    private readonly onFrame: FrameSink,
    private readonly stalls: StallWatch,
  ) {
    this.result = new Promise((r) => (this.resolve = r));
  }

  /**
   * Send the request. A continuation goes out one request per connection, closed after its
   * answer, so that it is written at once: on a spare when one is ready (pool/spares.ts), else on
   * an idle keep-alive connection, else on a new one (h1.ts).
   */
  start(continuation = false, extraHeaders: Record<string, string> | null = null): void {
    if (this.done) return;
    this.stalls.add(this);
    const oneShot = continuation && this.worker.spares !== null;
    this.exchange = this.worker.h1.request('POST', this.path, extraHeaders ? headerLines(extraHeaders) : UPSTREAM_HEADERS, this.body, this, oneShot);
  }

  /** End the attempt now with `result` (finished, or a failure found in the stream). */
  end(result: AttemptResult): void {
    if (this.done) return;
    this.done = true;
    this.stalls.delete(this);
    this.resolve(result);
  }

  /** Stop the upstream call: a client cancel, a stall, or a failure found in a frame. */
  abort(result: AttemptResult): void {
    if (this.done) return;
    this.end(result);
    this.exchange?.abort();
  }

  get ended(): boolean {
    return this.done;
  }

  pause(): void {
    if (this.done || this.paused) return;
    this.paused = true;
    this.exchange?.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.exchange?.resume();
  }

  /**
   * The owner keeps the frames it is given for later (a P/D attempt waiting on its prefill leg's
   * answer): the response's end or error is kept too, and replayed by release() after them.
   */
  hold(): void {
    this.holding = true;
  }

  release(): void {
    if (!this.holding) return;
    this.holding = false;
    const end = this.heldEnd;
    this.heldEnd = null;
    end?.();
  }

  onStall(idleMs: number, firstToken: boolean): void {
    this.abort({ kind: 'transport', fact: { kind: 'stall', idleMs, firstToken, reads: this.chunks, spacing: this.spacing, deadlineMs: this.stalls.interTokenMs(this.spacing) } });
  }

  // --- h1.ts handler -----------------------------------------------------------------------

  onResponseStart(statusCode: number, contentType: string): void {
    this.status = statusCode;
    this.contentType = contentType;
    if (statusCode !== 200) this.errorBody = [];
    else if (!this.contentType.includes('text/event-stream')) this.unaryBody = [];
  }

  onResponseData(chunk: Buffer): void {
    this.chunks++;
    if (this.done) return;
    if (this.errorBody) {
      if (this.errorBytes < ERROR_BODY_CAP) {
        this.errorBody.push(chunk);
        this.errorBytes += chunk.length;
      }
      return;
    }
    if (this.unaryBody) {
      this.unaryBody.push(chunk);
      return;
    }
    this.splitter.push(chunk, this.onFrame);
  }

  onResponseEnd(): void {
    if (this.done) return;
    if (this.holding) {
      this.heldEnd = () => this.onResponseEnd();
      return;
    }
    if (this.errorBody) {
      this.end({ kind: 'transport', fact: { kind: 'status', status: this.status, body: Buffer.concat(this.errorBody), contentType: this.contentType } });
      return;
    }
    if (this.unaryBody) {
      // Hand the whole body to the owner as one frame-like payload; it decides.
      const payload = Buffer.concat([Buffer.from('data: '), ...this.unaryBody, Buffer.from('\n\n')]);
      this.unaryBody = null;
      this.onFrame(payload, 0, payload.length);
      if (!this.done) this.end({ kind: 'transport', fact: { kind: 'ended', reads: this.chunks, unary: true } });
      return;
    }
    // The stream ended (with or without [DONE]) before a chunk with finish_reason arrived; a
    // frame cut by the end stays in the splitter and is dropped.
    this.end({ kind: 'transport', fact: { kind: 'ended', reads: this.chunks, unary: false } });
  }

  onResponseError(err: Error): void {
    if (this.done) return;
    if (this.holding) {
      this.heldEnd = () => this.onResponseError(err);
      return;
    }
    this.end({ kind: 'transport', fact: { kind: 'error', err, responseStarted: this.status !== 0 } });
  }
}
