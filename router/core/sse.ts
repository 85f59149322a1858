// SSE framing, shared by every wire format and front (SGLang's /generate, vLLM's
// /inference/v1/generate, the OpenAI front's workers): `data: <json>\n\n` frames. The splitter
// hands out byte ranges of whole frames, so that frames which need no rebasing are forwarded as
// the worker wrote them, without decoding or re-encoding. A frame cut by a failure stays in
// `rest` and is dropped with the attempt: tokens count only once their frame is whole.

const LF = 0x0a;

export type FrameSink = (buf: Buffer, start: number, end: number) => void;

export class SseSplitter {
  /**
   * The start of a frame that the reads so far have not finished, as the reads' own views:
   * joined once, when the frame's end arrives. (Joining the rest with every read copied a
   * frame longer than a read over and over: W2's ~90 KB frames came in 64 KiB reads.)
   */
  private parts: Buffer[] | null = null;
  private partsLength = 0;

  /** Calls `sink(buf, start, end)` for every complete frame; `end` is past the blank line. */
  push(chunk: Buffer, sink: FrameSink): void {
    if (chunk.length === 0) return; // an empty part would hide a blank line split around it
    let start = 0;
    if (this.parts !== null) {
      // The frame in progress ends at the first blank line, which may begin in the last part.
      const last = this.parts[this.parts.length - 1]!;
      let end = -1;
      if (last[last.length - 1] === LF && chunk[0] === LF) end = 1;
      else {
        const i = delimiterAt(chunk, 0);
        if (i >= 0) end = i + 2;
      }
      if (end < 0) {
        this.parts.push(chunk);
        this.partsLength += chunk.length;
        return;
      }
      this.parts.push(chunk.subarray(0, end));
      const frame = Buffer.concat(this.parts, this.partsLength + end);
      this.parts = null;
      this.partsLength = 0;
      sink(frame, 0, frame.length);
      start = end;
    }
    for (;;) {
      const i = delimiterAt(chunk, start);
      if (i < 0) break;
      sink(chunk, start, i + 2);
      start = i + 2;
    }
    if (start < chunk.length) {
      this.parts = [start === 0 ? chunk : chunk.subarray(start)];
      this.partsLength = chunk.length - start;
    }
  }

  get pendingBytes(): number {
    return this.partsLength;
  }
}

/** Where the first `\n\n` at or after `from` starts in `buf`, or -1 (a final `\n` waits for the next read). */
function delimiterAt(buf: Buffer, from: number): number {
  for (let i = buf.indexOf(LF, from); i >= 0 && i + 1 < buf.length; i = buf.indexOf(LF, i + 1)) {
    if (buf[i + 1] === LF) return i;
  }
  return -1;
}

// The bytes of a data frame, shared by every format's frame reading (SGLang's per-token scan:
// formats/sglang/sse.ts).
const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');

/**
 * `pattern` occurs in `buf` at `i`. A byte loop rather than Buffer.compare, whose argument
 * checks cost more than comparing these few bytes (it runs three times per token), and which
 * throws when the range runs past the buffer (a short frame at the end of a read).
 */
export function matchAt(buf: Buffer, i: number, pattern: Buffer): boolean {
  if (i < 0 || i + pattern.length > buf.length) return false;
  for (let j = 0; j < pattern.length; j++) if (buf[i + j] !== pattern[j]) return false;
  return true;
}

/** Offset of the payload of a `data:` frame, or -1. */
export function payloadStart(buf: Buffer, start: number): number {
  if (!matchAt(buf, start, DATA)) return -1;
  return buf[start + 5] === 0x20 ? start + 6 : start + 5;
}

/** The JSON text of a data frame (without `data: ` and the blank line). */
export function framePayload(buf: Buffer, start: number, end: number): string {
  const p = payloadStart(buf, start);
  return buf.toString('utf8', p < 0 ? start : p, end - 2);
}

/** A frame's data as SSE readers see it: -1 not a data frame (a comment, an event line), 0 `data: [DONE]`, 1 a payload to read. */
export function dataFrame(buf: Buffer, start: number): -1 | 0 | 1 {
  const p = payloadStart(buf, start);
  if (p < 0) return -1;
  return matchAt(buf, p, DONE) ? 0 : 1;
}
