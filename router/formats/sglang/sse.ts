// SGLang's SSE frames on the per-token path: `data: <json>\n\n` frames and a final
// `data: [DONE]\n\n`, classified and scanned in place (the framing itself and the bytes every SSE format shares: core/sse.ts).

import { matchAt, payloadStart } from '../../core/sse.ts';

export { SseSplitter, framePayload, matchAt, payloadStart, type FrameSink } from '../../core/sse.ts';

export const enum FrameKind {
  /** A chunk with finish_reason null: more follows. */
  Running,
  /** A chunk whose finish_reason is set (may be an abort: parse to know). */
  Finished,
  /** `{"error": ...}` in-band error. */
  Error,
  /** `data: [DONE]`. */
  Done,
  /** Not a data frame (comment, event line): ignored. */
  Ignored,
  /** A data frame without a finish_reason key: parse it to decide. */
  Unknown,
}

const FINISH_KEY = Buffer.from('"finish_reason":');
const ERROR_KEY = Buffer.from('"error"');
const DONE = Buffer.from('[DONE]');

function skipSpaces(buf: Buffer, i: number, end: number): number {
  while (i < end && (buf[i] === 0x20 || buf[i] === 0x09 || buf[i] === 0x0a || buf[i] === 0x0d)) i++;
  return i;
}

/**
 * Where the last `classifyFrame` call found `"finish_reason":` (-1: not found). SGLang writes
 * meta_info.id right before it, so the id swap of a forwarded frame (session.ts) checks there
 * first instead of searching the frame again. A field of a module object rather than a second
 * return value, so that the per-frame path allocates nothing; a reader verifies the bytes it
 * expects there, so a stale value costs only the search it would have made anyway.
 */
export const lastScan = { finishAt: -1 };

/**
 * Classify a frame by scanning bytes, without JSON.parse. SGLang writes `output_ids` (short
 * numbers) and then `meta_info`, whose second key is `finish_reason`, before the long logprob
 * lists; a forward search finds it after a few hundred bytes. The raw sequence
 * `"finish_reason":` cannot occur inside a JSON string (its quotes would be escaped).
 */
export function classifyFrame(buf: Buffer, start: number, end: number): FrameKind {
  lastScan.finishAt = -1;
  const p = payloadStart(buf, start);
  if (p < 0) return FrameKind.Ignored;
  if (buf[p] === 0x5b /* [ */) {
    return matchAt(buf, p, DONE) ? FrameKind.Done : FrameKind.Unknown;
  }
  const first = skipSpaces(buf, p + 1, end);
  if (matchAt(buf, first, ERROR_KEY)) return FrameKind.Error;
  const k = buf.indexOf(FINISH_KEY, p);
  if (k < 0 || k >= end) return FrameKind.Unknown;
  lastScan.finishAt = k;
  const v = skipSpaces(buf, k + FINISH_KEY.length, end);
  return buf[v] === 0x6e /* n(ull) */ ? FrameKind.Running : FrameKind.Finished;
}

const RUNNING_AFTER_ID = Buffer.from(',"finish_reason":null');

/**
 * Whether the frame at [start, ...) is a running chunk whose meta_info.id, `rid` (its JSON), sits
 * at `k` and is followed by `"finish_reason":null`: the classification of classifyFrame without
 * its search, for a frame whose end looks like the last one's (session.ts). A data frame of a JSON
 * object that is not an in-band error, as classifyFrame checks.
 */
export function runningAt(buf: Buffer, start: number, k: number, rid: Buffer): boolean {
  const p = payloadStart(buf, start);
  if (p < 0 || p >= k || buf[p] !== 0x7b /* { */) return false;
  if (matchAt(buf, skipSpaces(buf, p + 1, k), ERROR_KEY)) return false;
  return matchAt(buf, k, rid) && matchAt(buf, k + rid.length, RUNNING_AFTER_ID);
}

/**
 * The bytes of one frame as a Buffer: the read itself when the frame is all of it (the common
 * case when tokens come one per read), so that forwarding allocates nothing.
 */
export function frameBytes(buf: Buffer, start: number, end: number): Buffer {
  return start === 0 && end === buf.length ? buf : buf.subarray(start, end);
}

/** The index just past the run of ASCII digits that starts at `i` (`i` itself when none). */
function digitsEnd(buf: Buffer, i: number, end: number): number {
  while (i < end && buf[i]! >= 0x30 && buf[i]! <= 0x39) i++;
  return i;
}

/** The value of the ASCII digits in [from, to). */
function digitsValue(buf: Buffer, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) n = n * 10 + (buf[i]! - 0x30);
  return n;
}

/** Cheap read of meta_info.completion_tokens for progress events (scan, no parse); -1 if absent. */
const COMPLETION_KEY = Buffer.from('"completion_tokens":');
export function scanCompletionTokens(buf: Buffer, start: number, end: number): number {
  const k = buf.lastIndexOf(COMPLETION_KEY, end - 1);
  if (k < start) return -1;
  const i = skipSpaces(buf, k + COMPLETION_KEY.length, end);
  const j = digitsEnd(buf, i, end);
  return j > i ? digitsValue(buf, i, j) : -1;
}

const IDS_KEY = Buffer.from('"output_ids":');

/**
 * Append the token ids of a frame's `output_ids` to `out`, by scanning bytes (an incremental
 * frame carries only its new ids, and a JSON.parse of every frame was ~7% of a many-streams
 * router's CPU). True when the list was read; false, with `out` unchanged, when the frame has no
 * such list or it is anything but non-negative integers: the caller parses the frame instead.
 */
export function scanOutputIds(buf: Buffer, start: number, end: number, out: number[]): boolean {
  const k = buf.indexOf(IDS_KEY, start);
  if (k < 0 || k >= end) return false;
  let i = skipSpaces(buf, k + IDS_KEY.length, end);
  if (buf[i] !== 0x5b /* [ */) return false;
  i = skipSpaces(buf, i + 1, end);
  if (buf[i] === 0x5d /* ] */) return true;
  const mark = out.length;
  for (;;) {
    const j = digitsEnd(buf, i, end);
    const digits = j - i;
    // No digits, a leading zero, or more than a safe integer holds: not a plain token id.
    if (digits === 0 || digits > 15 || (digits > 1 && buf[i] === 0x30)) break;
    out.push(digitsValue(buf, i, j));
    i = skipSpaces(buf, j, end);
    if (buf[i] === 0x2c /* , */) {
      i = skipSpaces(buf, i + 1, end);
      continue;
    }
    if (buf[i] === 0x5d /* ] */) return true;
    break;
  }
  out.length = mark;
  return false;
}

export { SSE_DONE, sseFrame } from '../../core/client-sink.ts';
