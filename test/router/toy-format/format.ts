// A toy wire format, written as a folder of router/formats/ would be: it imports the core only,
// and the router learns it from one registry line (registerFormat, in the test). Its wire:
//
//   client → router   POST /toy/generate {"prompt": [ids], "max_tokens": n, "stream": bool}
//   router → worker   POST /toy/generate {"prompt": [ids + replayed], "max_tokens": remaining, "rid"}
//   worker → router   data: {"token": id}  ...  data: {"token": id, "finish": "length"}  data: [DONE]
//   router → client   data: {"id", "index": i, "token": id} ... with "finish" on the last; [DONE]
//                     (unary: {"id", "tokens": [ids], "finish"})
//   probe             GET /toy_info {"toy": true, "model": name}; abort POST /toy/abort {"rid"}
import type { ServerResponse } from 'node:http';
import type { Pool } from 'undici';
import { admit, type AdmissionRules } from '../../../router/core/admission.ts';
import type { ClientSink } from '../../../router/core/client-sink.ts';
import type { Failure } from '../../../router/core/failure.ts';
import { JsonFrameAttempt } from '../../../router/core/frames.ts';
import { getJson, str } from '../../../router/core/probe.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, FormatRequest, FormatSession, JsonObject, WireFormat, WorkerView } from '../../../router/core/types.ts';

export const TOY_PATH = '/toy/generate';

class ToyBodyError extends Error {}

function parseToy(json: unknown): FormatRequest {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ToyBodyError('the body must be a JSON object');
  const body = json as JsonObject;
  const prompt = body.prompt;
  if (!Array.isArray(prompt) || prompt.length === 0 || !prompt.every((x) => Number.isSafeInteger(x))) throw new ToyBodyError('prompt must be a list of token ids');
  const max = body.max_tokens;
  if (max !== undefined && max !== null && !(Number.isSafeInteger(max) && (max as number) >= 0)) throw new ToyBodyError('max_tokens must be a count');
  const ids = prompt as number[];
  return {
    body,
    prompt: { kind: 'input_ids', ids },
    promptLength: ids.length,
    stream: body.stream === true,
    rid: typeof body.id === 'string' ? body.id : null,
    sampling: {},
    maxNewTokens: typeof max === 'number' ? max : max === null ? null : undefined,
    minNewTokens: 0,
    returnLogprob: false,
    unparsed: null,
    samples: 1,
  };
}

/** The toy worker samples nothing: every request may migrate once its budget is known. */
const RULES: AdmissionRules = { budgetKey: 'max_tokens', minKey: 'min_tokens', clampsBudget: false, statefulKeys: [], refusal: () => null };

const DONE = { message: 'stream ended ([DONE]) without a finish', evidence: '[DONE] before a frame with a finish' };

class ToyAttempt extends JsonFrameAttempt {
  constructor(
    private readonly session: ToySession,
    spec: AttemptSpec,
    host: AttemptHost,
    private readonly headers: Record<string, string>,
  ) {
    super(spec, host, DONE);
  }

  get weightVersion(): string | null {
    return null;
  }

  protected onChunk(chunk: JsonObject): void {
    if (chunk.error !== undefined) {
      this.fail({ kind: 'engine_abort', message: String(chunk.error), status: 502, evidence: 'a toy error frame' });
      return;
    }
    if (typeof chunk.token !== 'number') return;
    if (this.frames === 0 && !this.host.accept(null)) {
      this.ended = true;
      return;
    }
    this.ids.push(chunk.token);
    if (this.frames++ === 0) this.host.firstFrame();
    const s = this.session;
    const index = this.spec.replayed.length + this.ids.length - 1;
    if (typeof chunk.finish === 'string') {
      this.finish = chunk.finish;
      this.ended = true;
      s.deliver(this, index, chunk.token, chunk.finish, this.headers);
      this.host.finished();
      return;
    }
    if (s.sink.streaming) this.host.write(s.frame({ id: s.info.id, index, token: chunk.token }));
  }
}

class ToySession implements FormatSession {
  ids: number[] = [];

  constructor(
    readonly info: { id: string; budget: number | null; startedAt: number },
    readonly sink: ClientSink,
  ) {}

  get cachedTokens(): null {
    return null;
  }

  get sawText(): boolean {
    return false;
  }

  get budget(): number | null {
    return this.info.budget;
  }

  get canFinishLocally(): boolean {
    return true;
  }

  frame(o: JsonObject): string {
    return `data: ${JSON.stringify(o)}\n\n`;
  }

  attempt(spec: AttemptSpec, _worker: WorkerView, host: AttemptHost, _forwardRaw: boolean, headers: Record<string, string>): ToyAttempt {
    return new ToyAttempt(this, spec, host, headers);
  }

  commit(a: FormatAttempt): void {
    for (const id of (a as ToyAttempt).ids) this.ids.push(id);
  }

  /** The last token with its finish, and the end of the answer. */
  deliver(a: ToyAttempt, index: number, token: number, finish: string, headers: Record<string, string>): void {
    if (this.sink.streaming) {
      this.sink.writeRaw(this.frame({ id: this.info.id, index, token, finish }));
      this.sink.endStream();
    } else this.sink.json(200, JSON.stringify({ id: this.info.id, tokens: this.ids.concat(a.ids), finish }), headers);
  }

  private end(finish: string, headers: Record<string, string>): void {
    if (this.sink.streaming) {
      this.sink.writeRaw(this.frame({ id: this.info.id, finish }));
      this.sink.endStream();
    } else this.sink.json(200, JSON.stringify({ id: this.info.id, tokens: this.ids, finish }), headers);
  }

  finishLocally(headers: Record<string, string>): void {
    this.end('length', headers);
  }

  finishAborted(headers: Record<string, string>): void {
    this.end('abort', headers);
  }

  passThrough(_a: FormatAttempt, failure: Failure): void {
    this.sink.fail(failure.status, failure.message, 'toy_error');
  }
}

function writeToyError(res: ServerResponse, _stream: boolean, status: number, message: string, headers: Record<string, string> = {}): void {
  const text = JSON.stringify({ error: message, status });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

async function probeToy(pool: Pool, timeoutMs: number) {
  const info = await getJson(pool, '/toy_info', timeoutMs);
  if (info?.toy !== true) return null;
  return { tokenOnly: true, incremental: true, preferred: null, defaultMaxNewTokens: null, modelPath: str(info.model), weightVersion: null, contextLength: null, maxTotalTokens: null };
}

export const TOY: WireFormat<'toy'> = {
  name: 'toy',
  workers: 'toy',
  generatePath: TOY_PATH,
  parse: (json) => parseToy(json),
  admit: (req, ctx) => admit(req, ctx, RULES),
  attemptBody: (req, promptIds, spec) => JSON.stringify({ prompt: promptIds.concat(spec.replayed), max_tokens: spec.remaining ?? req.maxNewTokens ?? null, rid: spec.rid }),
  abortRequest: (rid) => ({ path: '/toy/abort', body: JSON.stringify({ rid }) }),
  session: (_req, info, sink) => new ToySession(info, sink),
  errors: { body: (status, message) => ({ error: message, status }), frame: (status, message) => ({ error: message, status }) },
  writeRequestError: writeToyError,
  probe: probeToy,
};
