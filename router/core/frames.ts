// Reading one whole SSE frame as a JSON object, for the attempts that parse every frame (vLLM's,
// the OpenAI front's): the frame, nothing to read (a comment, a blank), or why the attempt fails
// with it ([DONE] before a finish, bytes that are not a JSON object).
import type { Failure } from './failure.ts';
import { dataFrame, framePayload } from './sse.ts';
import { isObject } from './json.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, JsonObject } from './types.ts';

export type ReadFrame = { chunk: JsonObject } | { failure: Failure } | null;

/** `done`: what a [DONE] before any finish means for this format (its message and evidence). */
export function readJsonFrame(buf: Buffer, start: number, end: number, done: { message: string; evidence: string }): ReadFrame {
  const kind = dataFrame(buf, start);
  if (kind === -1) return null;
  if (kind === 0) return { failure: { kind: 'stream_broken', message: done.message, status: 502, evidence: done.evidence } };
  let chunk: unknown;
  try {
    chunk = JSON.parse(framePayload(buf, start, end));
  } catch {
    return { failure: protocol('worker sent a frame that is not JSON') };
  }
  if (!isObject(chunk)) return { failure: protocol('worker sent a frame that is not a JSON object') };
  return { chunk };
}

/** A frame that breaks the protocol; what the attempt row shows as its evidence is the same words. */
export function protocol(message: string): Failure {
  return { kind: 'protocol', message, status: 502, evidence: message };
}

/** A frame the router could not handle (a bug must neither crash the process nor hang the request). */
export function unhandledFrame(err: unknown): Failure {
  return protocol(`router could not handle a frame: ${(err as Error).message}`);
}

/**
 * What the attempts that parse every frame as JSON (vLLM's, the OpenAI front's) share: their
 * tokens, frame count, cache hits and finish, and one frame's way from bytes to `onChunk`. A
 * frame that is not JSON, a [DONE] before a finish (`done` says what that means for the format)
 * and a frame the format's code throws on all fail the attempt, never the process.
 */
export abstract class JsonFrameAttempt implements FormatAttempt {
  ids: number[] = [];
  frames = 0;
  cached: number | null = null;
  finish: string | null = null;
  protected ended = false;
  /**
   * A finished answer held for the frame its worker sends after the finish (vLLM's usage chunk,
   * the only frame with `cached_tokens`): the next frame, whatever it is, or the call's end
   * (finishHeld) delivers it through `release`.
   */
  protected holding = false;

  constructor(
    readonly spec: AttemptSpec,
    protected readonly host: AttemptHost,
    private readonly done: { message: string; evidence: string },
  ) {}

  abstract get weightVersion(): string | null;

  /** One parsed frame of the attempt (bytes [start, end) of buf, for a format that keeps them). */
  protected abstract onChunk(chunk: JsonObject, buf: Buffer, start: number, end: number): void;

  get tokens(): number {
    return this.ids.length;
  }

  get sawFrame(): boolean {
    return this.frames > 0;
  }

  get cachedTokens(): number | null {
    return this.cached;
  }

  get sawText(): boolean {
    return false;
  }

  finishReason(): string | null {
    return this.finish;
  }

  progressTokens(): number {
    return this.ids.length;
  }

  settle(): void {}

  protected fail(f: Failure): void {
    if (this.holding) {
      // [DONE], an error or a broken frame after the finish: the answer is whole without the trailer.
      this.release();
      return;
    }
    this.ended = true;
    this.host.failed(f);
  }

  /** Deliver the held answer (the format's final frames) and end the attempt as finished. */
  protected release(): void {
    this.holding = false;
    this.ended = true;
    this.deliverHeld();
    this.host.finished();
  }

  /** The format's part of `release`: the final answer, with what the trailer brought. */
  protected deliverHeld(): void {}

  finishHeld(): boolean {
    if (!this.holding) return false;
    this.release();
    return true;
  }

  onFrame(buf: Buffer, start: number, end: number): void {
    if (this.ended) return;
    try {
      const r = readJsonFrame(buf, start, end, this.done);
      if (r === null) return;
      if ('failure' in r) this.fail(r.failure);
      else this.onChunk(r.chunk, buf, start, end);
    } catch (err) {
      this.fail(unhandledFrame(err));
    }
  }
}
