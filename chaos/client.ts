// The campaign's client: sends one request to the router and reads the answer as an SGLang client
// would, checking the framing on the way (every stream chunk must be consistent with one streaming
// mode, carry the logical id, and never show a continuation's prompt window). It never throws: a
// request's fate is data for the verifier. vLLM requests go to vllm-client.ts.

import { connect } from 'node:net';
import type { Dispatcher } from 'undici';
import { GENERATE_PATH } from './formats.ts';
import type { RequestSpec } from './traffic.ts';
import { sendVllmRequest } from './vllm-client.ts';

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

const OUTPUT_LISTS = ['output_token_logprobs', 'output_top_logprobs'] as const;
const INPUT_LISTS = ['input_token_logprobs', 'input_top_logprobs'] as const;

/** The prompt-side lists a stream may carry, as JSON text: one, or one per set of weights. */
export type PromptLists = Partial<Record<(typeof INPUT_LISTS)[number], string | readonly string[]>>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Folds stream chunks into one answer, cumulative or incremental, whichever the chunks show. */
export class StreamAssembler {
  mode: 'unknown' | 'cumulative' | 'incremental' = 'unknown';
  ids: number[] = [];
  lists: Partial<Record<(typeof OUTPUT_LISTS)[number], Json[]>> = {};
  meta: Obj | null = null;
  finished = false;
  chunks = 0;

  /** The prompt-side list each key showed first: every later chunk must show the same. */
  private readonly inputSeen: Partial<Record<(typeof INPUT_LISTS)[number], string>> = {};

  constructor(
    private readonly id: string,
    /**
     * JSON text of the prompt-side lists the client may see in chunks that carry them: one text,
     * or one per set of weights the answer may come from (the first chunk decides which).
     */
    private readonly inputs: PromptLists,
    private readonly problems: string[],
  ) {}

  absorb(chunk: Obj): void {
    const n = ++this.chunks;
    const ids = chunk.output_ids;
    const meta = chunk.meta_info;
    if (!Array.isArray(ids) || !isObj(meta) || typeof meta.completion_tokens !== 'number') {
      this.problems.push(`chunk ${n} lacks output_ids or meta_info.completion_tokens`);
      return;
    }
    if (this.finished) this.problems.push(`chunk ${n} came after the finished chunk`);
    if (meta.id !== this.id) this.problems.push(`chunk ${n} has meta_info.id ${JSON.stringify(meta.id)}, not the logical id`);
    const c = meta.completion_tokens;
    const cumulative = ids.length === c && this.ids.every((t, i) => ids[i] === t);
    const incremental = this.ids.length + ids.length === c;
    if (this.mode === 'unknown') {
      if (cumulative && !incremental) this.mode = 'cumulative';
      else if (incremental && !cumulative) this.mode = 'incremental';
    }
    const append = this.mode === 'incremental' || (this.mode === 'unknown' && incremental);
    if ((this.mode === 'cumulative' && !cumulative) || (this.mode === 'incremental' && !incremental) || (!cumulative && !incremental)) {
      this.problems.push(`chunk ${n} (${ids.length} ids, completion_tokens ${c}) breaks ${this.mode} streaming after ${this.ids.length} tokens`);
    }
    if (append) this.ids.push(...(ids as number[]));
    else this.ids = ids as number[];
    for (const key of OUTPUT_LISTS) {
      const v = meta[key];
      if (v === undefined) continue;
      if (!Array.isArray(v)) {
        this.problems.push(`chunk ${n}: ${key} is not a list`);
        continue;
      }
      if (append) (this.lists[key] ??= []).push(...v);
      else this.lists[key] = v;
    }
    for (const key of INPUT_LISTS) {
      if (meta[key] === undefined) continue;
      const want = this.inputs[key];
      if (want === undefined) continue;
      const got = JSON.stringify(meta[key]);
      const allowed = this.inputSeen[key] !== undefined ? [this.inputSeen[key]] : typeof want === 'string' ? [want] : want;
      if (!allowed.includes(got)) {
        this.problems.push(`chunk ${n}: ${key} differs from the original prompt's (a continuation's prompt window leaked?)`);
      } else this.inputSeen[key] = got;
    }
    this.meta = meta;
    if (meta.finish_reason !== null && meta.finish_reason !== undefined) this.finished = true;
  }

  answer(): Answer {
    return { output_ids: this.ids, meta: this.meta ?? {}, ...this.lists };
  }
}

export interface SendOptions {
  dispatcher: Dispatcher;
  routerUrl: string;
  /** Hang up after this many data chunks (a client cancel); undefined: read to the end. */
  cancelAfterChunks?: number;
  /** Give up on a request that has not ended after this long: the router failed to end it. */
  timeoutMs: number;
  /** The prompt-side lists every chunk must carry unchanged (from the reference). */
  inputs: PromptLists;
}

export async function sendRequest(spec: RequestSpec, o: SendOptions): Promise<ClientResult> {
  if (spec.format === 'vllm') return sendVllmRequest(spec, o);
  const r: ClientResult = {
    spec,
    startedAt: Date.now(),
    endedAt: 0,
    status: 0,
    answer: null,
    error: null,
    transport: null,
    cancelled: false,
    partialIds: [],
    problems: [],
    mode: 'unknown',
  };
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no end after ${o.timeoutMs} ms`)), o.timeoutMs);
  try {
    const res = await o.dispatcher.request({
      origin: o.routerUrl,
      path: '/generate',
      method: 'POST',
      headers: { 'content-type': 'application/json', ...spec.headers },
      body: JSON.stringify(spec.body),
      signal: ac.signal,
    });
    r.status = res.statusCode;
    const ct = String(res.headers['content-type'] ?? '');
    if (res.statusCode === 200 && ct.includes('text/event-stream')) {
      await readStream(res.body, spec, o, r, ac);
    } else {
      const text = await res.body.text();
      readJsonAnswer(text, res.statusCode, r);
    }
  } catch (err) {
    if (!r.cancelled) r.transport = ac.signal.aborted ? String((ac.signal.reason as Error)?.message ?? 'aborted') : `${(err as { code?: string }).code ?? ''} ${(err as Error).message}`.trim();
  } finally {
    clearTimeout(timer);
    r.endedAt = Date.now();
  }
  return r;
}

function readJsonAnswer(text: string, status: number, r: ClientResult): void {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    r.problems.push(`status ${status} with a body that is not JSON: ${text.slice(0, 120)}`);
    return;
  }
  if (status === 200) {
    if (!isObj(body) || !Array.isArray(body.output_ids) || !isObj(body.meta_info)) {
      r.problems.push('unary 200 answer without output_ids / meta_info');
      return;
    }
    const meta = body.meta_info;
    r.answer = { output_ids: body.output_ids as number[], meta };
    for (const key of OUTPUT_LISTS) if (meta[key] !== undefined) r.answer[key] = meta[key] as Json[];
    r.partialIds = r.answer.output_ids;
    return;
  }
  const e = isObj(body) && isObj(body.error) ? body.error : null;
  if (!e || typeof e.message !== 'string' || e.message.length === 0) {
    r.problems.push(`status ${status} without an error message: ${text.slice(0, 120)}`);
    return;
  }
  r.error = { message: e.message, type: typeof e.type === 'string' ? e.type : null, inBand: false };
}

async function readStream(body: AsyncIterable<Buffer>, spec: RequestSpec, o: SendOptions, r: ClientResult, ac: AbortController): Promise<void> {
  const asm = new StreamAssembler(spec.id, o.inputs, r.problems);
  let rest = '';
  let done = false;
  let dataFrames = 0;
  for await (const chunk of body) {
    rest += chunk.toString('utf8');
    let cut: number;
    while ((cut = rest.indexOf('\n\n')) >= 0) {
      const frame = rest.slice(0, cut);
      rest = rest.slice(cut + 2);
      if (!frame.startsWith('data:')) {
        r.problems.push(`a frame that is not SGLang's data framing: ${frame.slice(0, 80)}`);
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
        r.error = { message, type: e && typeof e.type === 'string' ? e.type : null, inBand: true };
        continue;
      }
      asm.absorb(parsed);
      r.partialIds = asm.ids;
      r.mode = asm.mode;
      if (o.cancelAfterChunks !== undefined && ++dataFrames >= o.cancelAfterChunks && !asm.finished) {
        r.cancelled = true;
        ac.abort(new Error('client cancel'));
        return;
      }
    }
  }
  if (rest.length > 0) r.problems.push(`the stream ended inside a frame: ${rest.slice(0, 80)}`);
  if (!done) r.problems.push('the stream ended without data: [DONE]');
  if (r.error === null && asm.finished && done) r.answer = asm.answer();
  else if (r.error === null && done) r.problems.push('the stream ended with [DONE] but no finished chunk and no error');
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
  const r: ClientResult = { spec, startedAt: Date.now(), endedAt: 0, status: 0, answer: null, error: null, transport: null, cancelled: false, partialIds: [], problems: [], mode: 'unknown' };
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
        readJsonAnswer(rest.subarray(0, bodyLength).toString('utf8'), r.status, r);
        finish();
      }
    });
    socket.on('end', () => {
      if (r.status !== 0 && r.status !== 200 && r.error === null) readJsonAnswer(rest.toString('utf8'), r.status, r);
    });
    socket.write(`POST ${GENERATE_PATH[spec.format]} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}
