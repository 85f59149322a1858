// The campaign's client core: sends one request to the router's endpoint for its format, reads the
// answer as that format's client would (a JSON body, or an event stream of `data:` frames ending
// in `data: [DONE]`), hangs up when the traffic says to (a cancel), gives up when the router never
// ends the request, and keeps the bookkeeping the verifier reads: status, answer, error, transport
// failure, tokens received, and every framing fault seen on the way. It never throws: a request's
// fate is data for the verifier.
//
// What differs per format is a small plug-in (ClientFormat): how a unary 200 answer reads, how a
// stream's chunks fold into one answer (sglang-client.ts: SGLang's `/generate`; vllm-client.ts:
// vLLM's `/inference/v1/generate`), and the few checks only one format's client makes.

import { connect } from 'node:net';
import type { Dispatcher } from 'undici';
import { GENERATE_PATH, type WireFormat } from './formats.ts';
import { sglangClient, type PromptLists } from './sglang-client.ts';
import type { RequestSpec } from './traffic.ts';
import { vllmClient } from './vllm-client.ts';

type Json = unknown;
type Obj = Record<string, Json>;

/** What the client ended up holding: the assembled answer as a non-streaming client would see it. */
export interface Answer {
  output_ids: number[];
  meta: Obj;
  output_token_logprobs?: Json[];
  output_top_logprobs?: Json[];
}

/** A vLLM client's answer (unary GenerateResponse, or a stream's chunks folded together). */
export interface VllmAnswer {
  format: 'vllm';
  token_ids: number[];
  finish_reason: unknown;
  /** logprobs.content entries, or null when the choice had none. */
  logprobs: unknown[] | null;
  /** The answer's usage (unary; a stream's final usage chunk), or null when none came. */
  usage: Record<string, unknown> | null;
  /** The finishing choice's weight_versions. */
  weight_versions: unknown;
}

export function isVllmAnswer(a: Answer | VllmAnswer): a is VllmAnswer {
  return (a as VllmAnswer).format === 'vllm';
}

export interface ClientResult {
  spec: RequestSpec;
  startedAt: number;
  endedAt: number;
  /** HTTP status, 0 when no response came. */
  status: number;
  /** A complete answer: unary 200, or a stream that ended with a finished chunk and [DONE]. */
  answer: Answer | VllmAnswer | null;
  /** The router's error, from a JSON error body or an in-band error frame. */
  error: { message: string; type: string | null; inBand: boolean } | null;
  /** The connection failed or broke, or the client gave up waiting. */
  transport: string | null;
  /** The client hung up on purpose (a cancel in the traffic mix). */
  cancelled: boolean;
  /** Output tokens received before the answer ended or failed (stream). */
  partialIds: number[];
  /** Framing faults seen while reading: each is a violation. */
  problems: string[];
  /** The streaming mode the chunks showed (unknown for unary, or too few chunks to tell). */
  mode: 'unknown' | 'cumulative' | 'incremental';
}

/**
 * One wire format's part of the client. The core sends, frames, times and cancels; the plug-in
 * says what the format's answers must look like.
 */
export interface ClientFormat {
  /** The format's name in framing problems. */
  name: string;
  /** The stream's name for its last choice chunk, in the problem when [DONE] came without one. */
  finishingChunk: string;
  /**
   * vLLM's client is strict where SGLang's is not: every frame must start exactly `data: ` (SGLang's
   * client takes `data:` with or without the space), the answer's kind must be the one asked for
   * (an event stream exactly when `stream` was set), and the stream ends at its in-band error frame
   * (serving.py yields the error frame, then `[DONE]`): a second error frame, or a chunk after it,
   * is a problem.
   */
  strict: boolean;
  /** Reads a unary 200 body (parsed JSON) into r.answer and r.partialIds, or records its problem. */
  readAnswer(body: unknown, text: string, spec: RequestSpec, r: ClientResult): void;
  /** A fold for one stream's data chunks; its problems go to `problems`. */
  fold(spec: RequestSpec, inputs: PromptLists, problems: string[]): StreamFold;
}

/** Folds a stream's data chunks (error frames excluded) into one answer, checking each on the way. */
export interface StreamFold {
  /** The output ids so far (the array may be replaced by each chunk). */
  readonly ids: number[];
  /** The finishing chunk came. */
  readonly finished: boolean;
  /** The chunks a client's cancel counts (cancelAfterChunks). */
  readonly counted: number;
  /** The streaming mode the chunks showed, for formats that have more than one. */
  readonly mode?: ClientResult['mode'];
  absorb(chunk: Obj): void;
  /** What the client holds once [DONE] came after the finishing chunk. */
  answer(): Answer | VllmAnswer;
}

const CLIENT_FORMATS: Record<WireFormat, ClientFormat> = { sglang: sglangClient, vllm: vllmClient };

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function newResult(spec: RequestSpec): ClientResult {
  return { spec, startedAt: Date.now(), endedAt: 0, status: 0, answer: null, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'unknown' };
}

export interface SendOptions {
  dispatcher: Dispatcher;
  routerUrl: string;
  /** Hang up after this many data chunks (a client cancel); undefined: read to the end. */
  cancelAfterChunks?: number;
  /** Give up on a request that has not ended after this long: the router failed to end it. */
  timeoutMs: number;
  /** SGLang: the prompt-side lists every chunk must carry unchanged (from the reference). */
  inputs: PromptLists;
}

export async function sendRequest(spec: RequestSpec, o: SendOptions): Promise<ClientResult> {
  const f = CLIENT_FORMATS[spec.format];
  const r = newResult(spec);
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no end after ${o.timeoutMs} ms`)), o.timeoutMs);
  try {
    const res = await o.dispatcher.request({
      origin: o.routerUrl,
      path: GENERATE_PATH[spec.format],
      method: 'POST',
      headers: { 'content-type': 'application/json', ...spec.headers },
      body: JSON.stringify(spec.body),
      signal: ac.signal,
    });
    r.status = res.statusCode;
    const ct = String(res.headers['content-type'] ?? '');
    if (res.statusCode === 200 && ct.includes('text/event-stream')) {
      if (f.strict && !spec.stream) r.problems.push('a unary request got an event stream');
      await readStream(f, res.body, spec, o, r, ac);
    } else {
      const text = await res.body.text();
      if (f.strict && res.statusCode === 200 && spec.stream) r.problems.push('a stream request got a JSON answer');
      readJsonBody(text, res.statusCode, spec, r);
    }
  } catch (err) {
    if (!r.cancelled) r.transport = ac.signal.aborted ? String((ac.signal.reason as Error)?.message ?? 'aborted') : `${(err as { code?: string }).code ?? ''} ${(err as Error).message}`.trim();
  } finally {
    clearTimeout(timer);
    r.endedAt = Date.now();
  }
  return r;
}

/** A JSON body: a unary 200 answer in the request's format, or an error body (`{"error": {"message", ...}}`). */
export function readJsonBody(text: string, status: number, spec: RequestSpec, r: ClientResult): void {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    r.problems.push(`status ${status} with a body that is not JSON: ${text.slice(0, 120)}`);
    return;
  }
  if (status === 200) {
    CLIENT_FORMATS[spec.format].readAnswer(body, text, spec, r);
    return;
  }
  const e = isObj(body) && isObj(body.error) ? body.error : null;
  if (!e || typeof e.message !== 'string' || e.message.length === 0) {
    r.problems.push(`status ${status} without an error message: ${text.slice(0, 120)}`);
    return;
  }
  r.error = { message: e.message, type: typeof e.type === 'string' ? e.type : null, inBand: false };
}

async function readStream(f: ClientFormat, body: AsyncIterable<Buffer>, spec: RequestSpec, o: SendOptions, r: ClientResult, ac: AbortController): Promise<void> {
  const fold = f.fold(spec, o.inputs, r.problems);
  let rest = '';
  let done = false;
  for await (const chunk of body) {
    rest += chunk.toString('utf8');
    let cut: number;
    while ((cut = rest.indexOf('\n\n')) >= 0) {
      const frame = rest.slice(0, cut);
      rest = rest.slice(cut + 2);
      if (!frame.startsWith(f.strict ? 'data: ' : 'data:')) {
        r.problems.push(`a frame that is not ${f.name}'s data framing: ${frame.slice(0, 80)}`);
        continue;
      }
      const payload = frame.slice(frame[5] === ' ' ? 6 : 5);
      if (done) r.problems.push('a frame after [DONE]');
      if (payload === '[DONE]') {
        done = true;
        continue;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(payload);
      } catch {
        r.problems.push(`a data frame that is not JSON: ${payload.slice(0, 80)}`);
        continue;
      }
      if (!isObj(parsed)) {
        r.problems.push('a data frame that is not a JSON object');
        continue;
      }
      if (parsed.error !== undefined) {
        const e = isObj(parsed.error) ? parsed.error : null;
        const message = e && typeof e.message === 'string' ? e.message : typeof parsed.error === 'string' ? parsed.error : '';
        if (!message) r.problems.push('an in-band error frame without a message');
        if (f.strict && r.error !== null) r.problems.push('a second in-band error frame');
        r.error = { message, type: e && typeof e.type === 'string' ? e.type : null, inBand: true };
        continue;
      }
      if (f.strict && r.error !== null) r.problems.push('a chunk after the in-band error frame');
      const before = fold.counted;
      fold.absorb(parsed);
      r.partialIds = fold.ids;
      if (fold.mode !== undefined) r.mode = fold.mode;
      if (o.cancelAfterChunks !== undefined && fold.counted > before && fold.counted >= o.cancelAfterChunks && !fold.finished) {
        r.cancelled = true;
        ac.abort(new Error('client cancel'));
        return;
      }
    }
  }
  if (rest.length > 0) r.problems.push(`the stream ended inside a frame: ${rest.slice(0, 80)}`);
  if (!done) r.problems.push('the stream ended without data: [DONE]');
  if (r.error === null && fold.finished && done) r.answer = fold.answer();
  else if (r.error === null && done) r.problems.push(`the stream ended with [DONE] but no ${f.finishingChunk} and no error`);
}

/**
 * A client that opens a stream and never reads it: the request goes out on a connection of its
 * own, the response head is read (status, and the error body when it is not a 200), then the
 * socket is paused and nothing more is taken from the kernel. The router's writes fill the socket
 * buffers and then block; the router must cut the client after its write timeout. Without reading
 * the client cannot see that cut (a close stays queued behind the unread bytes), so it holds the
 * connection for `holdMs` and then hangs up: the router's own record says when it let go.
 */
export function holdUnread(spec: RequestSpec, routerUrl: string, holdMs: number): Promise<ClientResult> {
  const r = newResult(spec);
  const u = new URL(routerUrl);
  const body = JSON.stringify(spec.body);
  return new Promise((resolve) => {
    const socket = connect(Number(u.port), u.hostname);
    let head = '';
    let rest = Buffer.alloc(0);
    let bodyLength = -1;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      if (r.endedAt === 0) r.endedAt = Date.now();
      resolve(r);
    };
    // Held to the end: the client hangs up on purpose (as a cancel is).
    const timer = setTimeout(() => {
      if (r.status === 200) r.cancelled = true;
      else if (r.status === 0) r.transport = `no response head within ${holdMs} ms`;
      finish();
    }, holdMs);
    // After a 200, an end seen early is the router cutting the client (if the paused socket shows
    // it at all): the stream is over for this client, as a cancel is.
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (r.status === 200) r.cancelled = true;
      else if (r.error === null) r.transport = `${err.code ?? ''} ${err.message}`.trim();
      finish();
    });
    socket.on('close', () => {
      if (r.status === 200) r.cancelled = true;
      else if (r.status === 0 && r.transport === null) r.transport = 'the router closed the connection before a response head';
      finish();
    });
    socket.on('data', (chunk: Buffer) => {
      if (r.status === 0) {
        head += chunk.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        r.status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
        if (r.status === 200) {
          // Stop reading here: what the router writes from now on stays in the socket buffers.
          socket.pause();
          return;
        }
        const len = /\r\ncontent-length:\s*(\d+)/i.exec(head.slice(0, end));
        bodyLength = len ? Number(len[1]) : -1;
        rest = Buffer.from(head.slice(end + 4), 'latin1');
      } else rest = Buffer.concat([rest, chunk]);
      if (bodyLength >= 0 && rest.length >= bodyLength) {
        readJsonBody(rest.subarray(0, bodyLength).toString('utf8'), r.status, spec, r);
        finish();
      }
    });
    socket.on('end', () => {
      if (r.status !== 0 && r.status !== 200 && r.error === null) readJsonBody(rest.toString('utf8'), r.status, spec, r);
    });
    socket.write(`POST ${GENERATE_PATH[spec.format]} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}
