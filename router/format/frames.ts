// Reading one whole SSE frame as a JSON object, for the attempts that parse every frame (vLLM's,
// the OpenAI front's): the frame, nothing to read (a comment, a blank), or why the attempt fails
// with it ([DONE] before a finish, bytes that are not a JSON object).
import type { Failure } from '../migration/failure.ts';
import { FrameKind, classifyFrame, framePayload } from './sglang/sse.ts';
import { isObject } from './json.ts';
import type { JsonObject } from './types.ts';

export type ReadFrame = { chunk: JsonObject } | { failure: Failure } | null;

/** `done`: what a [DONE] before any finish means for this format (its message and evidence). */
export function readJsonFrame(buf: Buffer, start: number, end: number, done: { message: string; evidence: string }): ReadFrame {
  const kind = classifyFrame(buf, start, end);
  if (kind === FrameKind.Ignored) return null;
  if (kind === FrameKind.Done) return { failure: { kind: 'stream_broken', message: done.message, status: 502, evidence: done.evidence } };
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
