// SGLang's side of one logical request: reading an attempt's frames, forwarding them to the
// client (untouched bytes where nothing needs rebasing), and rendering the one answer the
// client sees (stitch.ts). The migration loop drives it through the format seam (../../core/types.ts).
//
// The per-token path lives here, so it does as little as it can:
// - `classifyFrame` decides running / finished / error / [DONE] by scanning bytes;
// - attempt 0 on a cumulative worker keeps only a reference to the last frame (parsed once, when
//   the attempt ends) and forwards each frame's bytes with only meta_info.id swapped, in place
//   (`clientFrame`: no new buffer per frame);
// - attempt 0 on an incremental worker without logprobs or text reads each frame's new ids with
//   a byte scan (`scanOutputIds`);
// - continuations parse every frame: their counters and lists must be rebased.
import type { Failure } from '../../core/failure.ts';
import type { ClientSink } from '../../core/client-sink.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, FormatSession, JsonObject, WorkerView } from '../../core/types.ts';
import { classifyAbort, classifyInBandError } from './failure.ts';
import type { GenerateRequest } from './request.ts';
import { FrameKind, classifyFrame, frameBytes, framePayload, lastScan, matchAt, runningAt, scanCompletionTokens, scanOutputIds } from './sse.ts';
import { AttemptOutput, LogicalOutput, finishReasonOf, mergePrefillInput, metaOf, type TextRendering } from './stitch.ts';
import { SglangDetokenizer } from './detokenize.ts';
import { IncrementalDecoder } from '../../tokenizer/index.ts';
import { VALUE_ERROR_TYPE } from './errors.ts';
import { isObject } from '../../core/json.ts';
import { protocol, unhandledFrame } from '../../core/frames.ts';


export class SglangAttempt implements FormatAttempt {
  readonly output: AttemptOutput;
  frames = 0;
  /** Cumulative worker, attempt 0: frames are not parsed until needed; the last is kept raw. */
  private lastRaw: Buffer | null = null;
  lastChunk: JsonObject | null = null;
  /** A failure found in-band, with the raw frame to pass through when it is the client's. */
  passThroughFrame: Buffer | null = null;
  /** The parsed chunk of that frame (an abort finish), to rebase on a continuation. */
  passThroughChunk: JsonObject | null = null;
  /**
   * Incremental worker, frames forwarded untouched: running frames after the first need only their
   * new ids, read by a byte scan (sse.ts scanOutputIds). Off once a frame carries anything else
   * the attempt must keep (text, logprob lists).
   */
  private scanIds: boolean;
  private readonly lazy: boolean;
  private ended = false;
  /** `"<upstream rid>"` as the worker writes it in meta_info.id (rid.ts: plain ASCII). */
  private readonly ridJson: Buffer;
  /** How far from its end the last running frame had its rid (0: not known): see handleFrame. */
  private tail = 0;
  /**
   * P/D: the attempt prefills the original prompt on a prefill leg and the client asked for
   * logprobs: its frames wait for that leg's answer (the loop holds them) and get its input
   * logprobs in front of the decode's (`mergePrefillInput`). Such frames are rewritten, never
   * forwarded as the worker wrote them.
   */
  readonly awaitsPrefill: boolean;
  private prefillMeta: JsonObject | null = null;

  constructor(
    private readonly session: SglangSession,
    readonly spec: AttemptSpec,
    private readonly host: AttemptHost,
    /** Frames may be sent to a streaming client as the worker wrote them. */
    private forwardRaw: boolean,
    private readonly headers: Record<string, string>,
    worker: WorkerView,
  ) {
    this.output = new AttemptOutput(worker.incremental, spec.replayed.length);
    // A continuation's input logprobs are replaced by the committed ones (stitch.ts render): it
    // needs no prefill answer.
    this.awaitsPrefill = spec.prefillLeg === true && spec.replayed.length === 0 && session.req.returnLogprob;
    if (this.awaitsPrefill) this.forwardRaw = false;
    this.lazy = spec.index === 0 && worker.incremental === false && !session.textAlways && !this.awaitsPrefill;
    this.scanIds = this.forwardRaw && worker.incremental === true && !session.req.returnLogprob;
    this.ridJson = Buffer.from(JSON.stringify(spec.rid));
  }

  get tokens(): number {
    return this.output.ids.length;
  }

  prefillAnswered(meta: JsonObject | null): void {
    this.prefillMeta = meta;
  }

  get sawFrame(): boolean {
    return this.frames > 0;
  }

  get cachedTokens(): number | null {
    const meta = this.lastChunk?.meta_info;
    return isObject(meta) && typeof meta.cached_tokens === 'number' ? meta.cached_tokens : this.output.cachedTokens;
  }

  get weightVersion(): string | null {
    return this.output.weightVersion;
  }

  get sawText(): boolean {
    return this.output.sawText;
  }

  finishReason(): string | null {
    if (!this.lastChunk) return null;
    const f = finishReasonOf(this.lastChunk);
    return f && typeof f.type === 'string' ? f.type : null;
  }

  progressTokens(): number {
    // A scanned attempt's counter is stale until its last frame; its ids are not.
    let tokens = Math.max(this.output.completionTokens, this.scanIds ? this.output.ids.length : 0);
    if (this.lazy && this.lastRaw) tokens = Math.max(tokens, scanCompletionTokens(this.lastRaw, 0, this.lastRaw.length));
    return tokens;
  }

  /** Bring `output` up to date with the last raw frame (lazy mode). */
  settle(): void {
    if (this.lastRaw === null) return;
    const raw = this.lastRaw;
    this.lastRaw = null;
    try {
      const chunk = JSON.parse(framePayload(raw, 0, raw.length)) as JsonObject;
      this.output.absorb(chunk);
      this.lastChunk = chunk;
    } catch {
      // A whole frame that is not JSON: its tokens were never forwarded as understood.
    }
  }

  /**
   * A frame as the worker wrote it, with the upstream rid in meta_info.id replaced by the client's
   * id: the one rewrite an untouched frame needs. A copy, for the paths that run once a request
   * (a unary answer, a refusal); the per-frame path uses `clientFrame`.
   */
  swapId(frame: Buffer): Buffer {
    const k = frame.indexOf(this.ridJson);
    if (k < 0) return frame;
    return Buffer.concat([frame.subarray(0, k), this.session.idJson, frame.subarray(k + this.ridJson.length)]);
  }

  /**
   * The frame at [start, end) of `buf` with meta_info.id swapped to the client's id, rewritten in
   * place: the bytes before the rid move right by the difference in length (the upstream rid is
   * the escaped id plus 20 characters, so the client's id almost always fits) and the id is
   * written where the rid ended, so the frame ends where it did and is forwarded as one view of
   * the read it came in, with no new buffer. `buf` is the router's own (a socket read, or the
   * splitter's join of a frame that spanned reads); nothing reads the bytes before `start + d`
   * again. The rid's bytes are unique (a 16-hex nonce), and SGLang writes meta_info.id right
   * before finish_reason, where classifyFrame stopped (`lastScan`); elsewhere it is searched for.
   * An id whose JSON is longer than the rid's is spliced into a new buffer.
   */
  clientFrame(buf: Buffer, start: number, end: number): Buffer {
    const rid = this.ridJson;
    // `"id":"<rid>","finish_reason":` — the comma, then the rid's closing quote.
    const f = lastScan.finishAt;
    let k = f - 1 - rid.length;
    if (!(k >= start && f < end && buf[f - 1] === 0x2c && matchAt(buf, k, rid))) {
      k = buf.indexOf(rid, start);
      if (k < 0 || k + rid.length > end) return frameBytes(buf, start, end);
    }
    return this.spliceAt(buf, start, end, k);
  }

  /** clientFrame for a frame whose rid is known to sit at `k`. */
  private spliceAt(buf: Buffer, start: number, end: number, k: number): Buffer {
    const rid = this.ridJson;
    const id = this.session.idJson;
    const d = rid.length - id.length;
    if (d < 0) return Buffer.concat([buf.subarray(start, k), id, buf.subarray(k + rid.length, end)], end - start - d);
    if (d > 0) buf.copyWithin(start + d, start, k);
    buf.set(id, k + d);
    return buf.subarray(start + d, end);
  }

  /** Forward a frame as the worker wrote it but for meta_info.id; returns the bytes sent. */
  private forward(buf: Buffer, start: number, end: number): Buffer {
    const frame = this.clientFrame(buf, start, end);
    this.host.write(frame);
    return frame;
  }

  private fail(failure: Failure): void {
    this.ended = true;
    this.host.failed(failure);
  }

  onFrame(buf: Buffer, start: number, end: number): void {
    if (this.ended) return;
    try {
      this.handleFrame(buf, start, end);
    } catch (err) {
      this.fail(unhandledFrame(err));
    }
  }

  private handleFrame(buf: Buffer, start: number, end: number): void {
    // The running frames of one attempt end alike: `"<rid>","finish_reason":null,` then counters
    // that keep their width for many tokens. A frame that ends as the last one did has its rid
    // and finish_reason at the same distance from its end: checked there, not searched for.
    let kind: FrameKind;
    const k = end - this.tail;
    if (this.tail > 0 && k > start && runningAt(buf, start, k, this.ridJson)) {
      if (this.lazy && this.frames > 0) {
        // Attempt 0 after its first frame: forwarded with the client's id, kept as the last frame.
        this.frames++;
        if (this.forwardRaw) {
          const frame = this.spliceAt(buf, start, end, k);
          this.lastRaw = frame;
          this.host.write(frame);
        } else this.lastRaw = frameBytes(buf, start, end);
        return;
      }
      kind = FrameKind.Running;
      lastScan.finishAt = k + this.ridJson.length + 1;
    } else {
      kind = classifyFrame(buf, start, end);
      // Where this frame's rid would start, if SGLang wrote it right before finish_reason.
      if (kind === FrameKind.Running && lastScan.finishAt > start) this.tail = end - (lastScan.finishAt - 1 - this.ridJson.length);
    }
    if (kind === FrameKind.Ignored) return;
    if (kind === FrameKind.Done) {
      this.fail({ kind: 'stream_broken', message: 'stream ended ([DONE]) without a finished chunk', status: 502, evidence: '[DONE] before a chunk with a finish_reason' });
      return;
    }
    if (kind === FrameKind.Running && this.lazy) {
      if (this.frames === 0 && !this.host.accept(null)) {
        this.ended = true;
        return;
      }
      if (this.frames++ === 0) this.host.firstFrame();
      // One view of the frame serves both: forwarded, and kept as the last raw frame (with the
      // client's id once forwarded: parsed when the attempt ends, its id is not read).
      this.lastRaw = this.forwardRaw ? this.forward(buf, start, end) : frameBytes(buf, start, end);
      return;
    }
    if (kind === FrameKind.Running && this.scanIds && this.frames > 0 && scanOutputIds(buf, start, end, this.output.ids)) {
      this.frames++;
      this.forward(buf, start, end);
      return;
    }
    this.onParsedFrame(buf, start, end);
  }

  private onParsedFrame(buf: Buffer, start: number, end: number): void {
    let chunk: unknown;
    try {
      chunk = JSON.parse(framePayload(buf, start, end));
    } catch {
      this.fail(protocol('worker sent a frame that is not JSON'));
      return;
    }
    if (!isObject(chunk)) {
      this.fail(protocol('worker sent a frame that is not a JSON object'));
      return;
    }
    if (chunk.error !== undefined) {
      this.passThroughFrame = buf.subarray(start, end);
      this.fail(classifyInBandError(chunk.error));
      return;
    }
    const finish = finishReasonOf(chunk);
    if (finish && finish.type === 'abort') {
      const failure = classifyAbort(finish);
      // A deliberate abort at the worker (no status) ends the answer as SGLang wrote it: it
      // falls through to the finish path below, like any other finish reason.
      if (failure.kind !== 'worker_abort') {
        this.passThroughFrame = buf.subarray(start, end);
        this.passThroughChunk = chunk;
        this.fail(failure);
        return;
      }
    }
    if (this.frames === 0) {
      const wv = metaOf(chunk).weight_version;
      if (!this.host.accept(typeof wv === 'string' ? wv : null)) {
        this.ended = true;
        return;
      }
    }
    if (this.prefillMeta !== null) mergePrefillInput(this.prefillMeta, chunk);
    // Everything before this frame is superseded (cumulative) or already absorbed (incremental).
    this.lastRaw = null;
    this.output.absorb(chunk);
    this.lastChunk = chunk;
    if (this.scanIds && (this.output.sawText || Object.keys(this.output.lists).length > 0)) this.scanIds = false;
    if (this.frames++ === 0) this.host.firstFrame();
    const session = this.session;
    if (finish) {
      this.ended = true;
      session.deliverFinal(this, chunk, buf, start, end, this.forwardRaw, this.headers);
      this.host.finished();
      return;
    }
    if (!session.sink.streaming) return;
    if (this.forwardRaw) this.forward(buf, start, end);
    else this.host.write(sseFrameOf(session.out.render(chunk, this.output, false)));
  }
}

function sseFrameOf(chunk: JsonObject): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

export class SglangSession implements FormatSession {
  readonly out: LogicalOutput;
  /** `"<logical id>"`: what the client must see in meta_info.id. */
  readonly idJson: Buffer;
  /** The last chunk any attempt sent: the shape of an answer the router finishes itself. */
  private template: JsonObject | null = null;

  constructor(
    readonly req: GenerateRequest,
    info: { id: string; budget: number | null; startedAt: number },
    readonly sink: ClientSink,
  ) {
    this.idJson = Buffer.from(JSON.stringify(info.id));
    const tok = req.tokenizer ?? null;
    const sp = req.sampling;
    const text: TextRendering | null = tok === null || req.prompt.kind !== 'input_ids' ? null : {
      detokenizer: new SglangDetokenizer(tok, req.prompt.ids, { skipSpecialTokens: sp.skip_special_tokens !== false, spacesBetweenSpecialTokens: sp.spaces_between_special_tokens !== false }),
      always: req.textPrompt === true,
      noStopTrim: sp.no_stop_trim === true,
    };
    this.out = new LogicalOutput({ id: info.id, promptTokens: req.promptLength, budget: info.budget, startedAt: info.startedAt, clientIncremental: false }, text);
  }

  get rendersOwnText(): boolean {
    return this.out.text !== null;
  }

  /** Every chunk's text is Baton's: no frame goes to the client as the worker wrote it. */
  get textAlways(): boolean {
    return this.out.text?.always === true;
  }

  get ids(): readonly number[] {
    return this.out.ids;
  }

  get cachedTokens(): number | null {
    return this.out.cachedTokens;
  }

  /** With the tokenizer: the text each output token added, for the dashboard. */
  tokenTexts(): string[] | null {
    const tok = this.req.tokenizer;
    if (!tok) return null;
    const sp = this.req.sampling;
    const d = new IncrementalDecoder(tok, { skipSpecialTokens: sp.skip_special_tokens !== false, cleanUpTokenizationSpaces: false });
    const out = this.out.ids.map((id) => d.push([id]));
    if (out.length > 0) out[out.length - 1] += d.flush();
    return out;
  }

  /** Text that blocks a migration: only without the tokenizer (with it, Baton renders the text). */
  get sawText(): boolean {
    return this.out.sawText && this.out.text === null;
  }

  get budget(): number | null {
    return this.out.info.budget;
  }

  get canFinishLocally(): boolean {
    return this.template !== null;
  }

  attempt(spec: AttemptSpec, worker: WorkerView, host: AttemptHost, forwardRaw: boolean, headers: Record<string, string>): SglangAttempt {
    // The client gets the streaming mode of attempt 0's worker (learnt from its chunks if unknown).
    if (spec.index === 0) this.out.info.clientIncremental = worker.incremental === true;
    return new SglangAttempt(this, spec, host, forwardRaw && !this.textAlways, headers, worker);
  }

  commit(fa: FormatAttempt): void {
    const a = fa as SglangAttempt;
    if (a.spec.index === 0 && a.output.incremental !== null) this.out.info.clientIncremental = a.output.incremental;
    this.out.commit(a.output);
    if (a.lastChunk !== null) this.template = a.lastChunk;
  }

  /** The finishing chunk to a streaming client, or the whole answer to a unary one. */
  deliverFinal(a: SglangAttempt, chunk: JsonObject, buf: Buffer, start: number, end: number, forwardRaw: boolean, headers: Record<string, string>): void {
    const sink = this.sink;
    if (sink.streaming) {
      if (forwardRaw) sink.writeRaw(a.clientFrame(buf, start, end));
      else sink.writeChunk(this.out.render(chunk, a.output, false));
      sink.endStream();
      return;
    }
    // Unary: attempt 0 on a cumulative worker wrote the whole answer in its last chunk.
    if (a.spec.index === 0 && a.output.incremental === false && !this.textAlways && !a.awaitsPrefill) {
      const raw = frameBytes(buf, start, end);
      const p = raw.indexOf('{');
      sink.json(200, a.swapId(raw.subarray(p, raw.length - 2)), headers);
    } else {
      sink.json(200, JSON.stringify(this.out.render(chunk, a.output, true)), headers);
    }
  }

  finishLocally(headers: Record<string, string>): void {
    this.finishWith(this.out.renderLocalFinish(!this.sink.streaming, this.template), headers);
  }

  finishAborted(headers: Record<string, string>): void {
    this.finishWith(this.out.renderAbort(!this.sink.streaming), headers);
  }

  private finishWith(chunk: JsonObject, headers: Record<string, string>): void {
    if (this.sink.streaming) {
      this.sink.writeChunk(chunk);
      this.sink.endStream();
    } else {
      this.sink.json(200, JSON.stringify(chunk), headers);
    }
  }

  /**
   * A failure that belongs to the client: forwarded as the worker wrote it. On a continuation a
   * frame with meta_info is rebased like every other frame (the logical id, the original prompt
   * length, the whole output so far), so the client cannot tell which attempt refused. Called
   * after the attempt was committed.
   */
  passThrough(fa: FormatAttempt, failure: Failure): void {
    const a = fa as SglangAttempt;
    const sink = this.sink;
    const rebased = () => this.out.render(a.passThroughChunk!, new AttemptOutput(a.output.incremental, this.out.ids.length), false);
    if (sink.streaming && sink.started) {
      // The stream started on an earlier attempt: an HTTP status can no longer be sent, so the
      // refusal ends the stream in band, as SGLang ends a stream that fails after its headers.
      if (a.passThroughChunk && a.spec.index > 0) sink.writeChunk(rebased());
      else if (a.passThroughFrame) sink.writeRaw(a.swapId(a.passThroughFrame));
      else {
        sink.endStreamWithError({ error: { message: failure.message, type: VALUE_ERROR_TYPE, code: failure.status, retryable: false } });
        return;
      }
      sink.endStream();
      return;
    }
    if (failure.body) {
      sink.json(failure.status, a.swapId(failure.body), failure.contentType ? { 'content-type': failure.contentType } : {});
      return;
    }
    if (sink.streaming && a.passThroughFrame) {
      if (a.passThroughChunk && a.spec.index > 0) sink.writeChunk(rebased());
      else sink.writeRaw(a.swapId(a.passThroughFrame));
      sink.endStream();
      return;
    }
    // A unary request's refusal, in SGLang's unary shape: its status and {"error": {"message"}}.
    sink.json(failure.status, JSON.stringify({ error: { message: failure.message } }));
  }
}
