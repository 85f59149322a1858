// What an SGLang client sees on the wire, read the way SGLang's own tests read it
// (`requests.post(...).json()`, and for streams `iter_lines()` keeping `data: ` lines but [DONE]),
// plus the raw bytes so the suite can check the framing itself.

export type Json = Record<string, unknown>;
export type Meta = Json & { finish_reason: Json | null };
/** A logprob entry: [logprob, token_id, text_or_null]. */
export type LpEntry = [number | null, number, string | null];

export const meta = (x: unknown): Meta => (x as { meta_info: Meta }).meta_info;
export const outputIds = (x: unknown): number[] => (x as { output_ids: number[] }).output_ids;

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  body: unknown;
}

export async function request(url: string, init: RequestInit = {}): Promise<Reply> {
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown = undefined;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: callers look at `text`
  }
  return { status: res.status, headers: res.headers, text, body };
}

export function post(url: string, body: unknown): Promise<Reply> {
  return request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

/** A unary /generate: status and parsed JSON. */
export async function generate(base: string, body: Json): Promise<Reply> {
  return post(base + '/generate', { ...body, stream: false });
}

export interface StreamReply {
  status: number;
  contentType: string;
  raw: string;
  /** Every `data: ` payload in order, [DONE] included. */
  data: string[];
  /** Events (blank-line separated blocks) that are not a single `data: ` line. */
  strayLines: string[];
  /** Parsed JSON of every frame but [DONE]. */
  chunks: Json[];
  /** The stream's last payload was [DONE]. */
  done: boolean;
  /** For a non-SSE answer (e.g. a 400), its parsed JSON body. */
  body: unknown;
}

/** A streaming /generate, read to the end. */
export async function stream(base: string, body: Json, signal?: AbortSignal): Promise<StreamReply> {
  const res = await fetch(base + '/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  const raw = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  if (!contentType.includes('text/event-stream')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, contentType, raw, data: [], strayLines: [], chunks: [], done: false, body: parsed };
  }
  const data: string[] = [];
  const strayLines: string[] = [];
  for (const block of raw.split('\n\n')) {
    if (block === '') continue;
    if (block.startsWith('data: ') && !block.includes('\n')) data.push(block.slice(6));
    else strayLines.push(block);
  }
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Json);
  return { status: res.status, contentType, raw, data, strayLines, chunks, done: data.at(-1) === '[DONE]', body: undefined };
}

const OUTPUT_LISTS = ['output_token_logprobs', 'output_top_logprobs', 'output_token_ids_logprobs'] as const;

/**
 * The answer a stream adds up to, per the server's mode: cumulative chunks each carry everything
 * so far (the last one is the answer; each must extend the one before), incremental chunks carry
 * deltas of output_ids, text and the output-side logprob lists. Throws if a cumulative chunk does
 * not extend its predecessor.
 */
export function fold(chunks: Json[], incremental: boolean): Json {
  if (chunks.length === 0) throw new Error('no chunks to fold');
  if (!incremental) {
    for (let i = 1; i < chunks.length; i++) {
      const a = outputIds(chunks[i - 1]);
      const b = outputIds(chunks[i]);
      if (b.length < a.length || a.some((t, j) => b[j] !== t)) throw new Error(`cumulative chunk ${i} does not extend chunk ${i - 1}`);
    }
    return chunks.at(-1)!;
  }
  const ids: number[] = [];
  let text: string | undefined;
  const lists: Record<string, unknown[]> = {};
  for (const c of chunks) {
    ids.push(...outputIds(c));
    if (typeof c.text === 'string') text = (text ?? '') + c.text;
    const m = meta(c);
    for (const k of OUTPUT_LISTS) if (Array.isArray(m[k])) (lists[k] ??= []).push(...(m[k] as unknown[]));
  }
  const last = chunks.at(-1)!;
  const out: Json = { ...last, output_ids: ids, meta_info: { ...meta(last), ...lists } };
  if (text !== undefined) out.text = text;
  return out;
}

/** Splits a batch / n > 1 stream by its `index` key. */
export function byIndex(chunks: Json[]): Map<number, Json[]> {
  const m = new Map<number, Json[]>();
  for (const c of chunks) {
    const i = c.index as number;
    if (!m.has(i)) m.set(i, []);
    m.get(i)!.push(c);
  }
  return m;
}

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A rid unique to this run. */
let ridCounter = 0;
export const freshRid = (tag: string) => `conf-${tag}-${process.pid}-${Date.now().toString(36)}-${ridCounter++}`;

/** A prompt of `n` token ids in [3, 32000) that no other request of this run shares a prefix with. */
let promptCounter = 0;
export function uniquePrompt(n: number): number[] {
  const seed = (process.pid * 7919 + promptCounter++ * 104729 + Date.now()) >>> 0;
  const out: number[] = [];
  let x = seed || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push(3 + (x % 31990));
  }
  return out;
}

export interface OpenStream {
  status: number;
  /** Resolves with the first JSON chunk (rejects if the stream ends before one). */
  first: Promise<Json>;
  /** Resolves with the whole stream once it ends. */
  done: Promise<StreamReply>;
  /** Disconnects (the client goes away). */
  cancel(): void;
}

/** A streaming /generate read as it arrives, so a test can act while the request runs. */
export async function openStream(base: string, body: Json): Promise<OpenStream> {
  const ac = new AbortController();
  const res = await fetch(base + '/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal: ac.signal,
  });
  let gotFirst!: (c: Json) => void;
  let noFirst!: (e: Error) => void;
  const first = new Promise<Json>((ok, fail) => ((gotFirst = ok), (noFirst = fail)));
  first.catch(() => undefined);
  const contentType = res.headers.get('content-type') ?? '';
  const done = (async (): Promise<StreamReply> => {
    let raw = '';
    const decoder = new TextDecoder();
    let firstSeen = false;
    try {
      for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
        raw += decoder.decode(piece, { stream: true });
        if (!firstSeen) {
          const m = /(^|\n\n)data: (\{[^\n]*)\n\n/.exec(raw);
          if (m) {
            firstSeen = true;
            gotFirst(JSON.parse(m[2]!) as Json);
          }
        }
      }
    } catch {
      // cancelled or reset: return what arrived
    }
    if (!firstSeen) noFirst(new Error(`stream ended without a chunk: ${raw.slice(0, 300)}`));
    const data: string[] = [];
    const strayLines: string[] = [];
    for (const block of raw.split('\n\n')) {
      if (block === '') continue;
      if (block.startsWith('data: ') && !block.includes('\n')) data.push(block.slice(6));
      else strayLines.push(block);
    }
    const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Json);
    return { status: res.status, contentType, raw, data, strayLines, chunks, done: data.at(-1) === '[DONE]', body: undefined };
  })();
  return { status: res.status, first, done, cancel: () => ac.abort() };
}
