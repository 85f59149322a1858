// The format seam: what a wire format provides so that the migration loop (router/migration/)
// can serve, stitch and continue its requests without knowing its field names or frames. After
// Dynamo's migration operator, which works over neutral PreprocessedRequest / BackendOutput types:
// here the neutral request is `FormatRequest`, and the per-frame work stays inside the format
// (`FormatAttempt`), because only the format knows which bytes may go to the client untouched.
import type { Pool } from 'undici';
import type { ServerResponse } from 'node:http';
import type { Failure } from './failure.ts';
import type { ChatView } from './chat-view.ts';
import type { ClientSink, ErrorShapes } from './client-sink.ts';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/**
 * The name of a wire format workers speak. The core knows no format: formats/registry.ts lists
 * them and exports the precise union of the names it ships (its `FormatName`).
 */
export type FormatName = string;

/** A client's generate request as every format reads it: what migration needs, and the rest. */
export interface FormatRequest {
  /** The body as the client sent it; opaque fields pass through untouched. */
  body: JsonObject;
  /** What the prompt is: token ids of one sequence (migratable), or something that is not. */
  prompt: { kind: 'input_ids'; ids: number[] } | { kind: 'text' } | { kind: 'input_embeds' } | { kind: 'batch' };
  /** Number of prompt tokens when known (token ids), else null. */
  promptLength: number | null;
  stream: boolean;
  /** The client's own request id from the body (SGLang `rid`, vLLM `request_id`), if any. */
  rid: string | null;
  /** The sampling object as sent ({} when absent); read by admission, passed through. */
  sampling: JsonObject;
  /** undefined: absent (the worker's default applies); null: explicitly unbounded; else the number. */
  maxNewTokens: number | null | undefined;
  minNewTokens: number;
  returnLogprob: boolean;
  /** Why the router could not read a value it needs: served as written by one worker, never migrated. */
  unparsed: string | null;
  /** More samples than one (SGLang `n`, vLLM `n`): passed through, never migrated. */
  samples: number;
  /** The model the request names (OpenAI's `model`): attempt 0 goes only to workers serving it. */
  model?: string | null;
  /**
   * A refusal the router writes itself, as the worker's request error, before any worker sees the
   * request (SGLang: a sampling key its SamplingParams does not take).
   */
  refusal?: string | null;
  /** What spaces the worker's frames, as the request asks: the stall deadline's scale (stall-watch.ts). */
  framing?: { streamInterval: number | null; heldTokens: number };
}

/** Migration settings and the workers' advertised facts that admission reads. */
export interface AdmissionContext {
  migrationLimit: number;
  migrationMaxSeqLen: number | null;
  /** Sampling defaults every probed worker advertises alike. */
  workerDefaults: Readonly<Record<string, unknown>>;
  /** Defaults the workers disagree on (unresolved). */
  disputedDefaults: ReadonlySet<string>;
  /** The worker's bound on prompt + output (min over workers); null when unknown. */
  maxReqLen: number | null;
}

export type Admission =
  | { admitted: true; reason: null; budget: number; budgetFromDefault: boolean; minNewTokens: number }
  | { admitted: false; reason: string; budget: number | null; budgetFromDefault: boolean; minNewTokens: number };

/** What one attempt asks of its worker. */
export interface AttemptSpec {
  index: number;
  /** The upstream request id of this attempt (router/migration/rid.ts). */
  rid: string;
  /** Output tokens of earlier attempts: appended to the prompt of a continuation. */
  replayed: readonly number[];
  /** The remaining budget to ask for explicitly; null: send the client's budget fields as they are. */
  remaining: number | null;
  /** min new tokens for this attempt (already reduced by the replayed tokens). */
  minTokens: number;
  /**
   * P/D (docs/pd.md): the attempt's prompt is prefilled by a separate prefill leg, whose answer
   * the format may need (`FormatAttempt.awaitsPrefill`).
   */
  prefillLeg?: boolean;
}

/** The worker facts a format's attempt needs. */
export interface WorkerView {
  readonly url: string;
  /** Streaming mode of an SGLang worker (null: unknown, learnt from the chunks). */
  readonly incremental: boolean | null;
  readonly modelPath: string | null;
}

/** What a format's attempt asks of the migration loop while it reads frames. */
export interface AttemptHost {
  /** Bytes for a streaming client; the loop pauses the upstream when the client is slow. */
  write(data: Buffer | string): void;
  /**
   * The attempt's first whole frame arrived, naming the weights it runs on (null: not read).
   * False: the loop refused it (other weights than the request started on) and failed the
   * attempt; nothing of the frame may reach the client.
   */
  accept(weightVersion: string | null): boolean;
  /** The attempt's first frame was taken (time to first token). */
  firstFrame(): void;
  /** The attempt finished; the format has delivered the final answer to the client. */
  finished(): void;
  /**
   * The router ended the answer itself while the worker still generates (a stop string Baton
   * owns matched): the final answer was delivered; the upstream call is cut and the worker told
   * to abort.
   */
  stopped(): void;
  /** The attempt failed in band (an error frame, an abort, a frame that cannot be read). */
  failed(failure: Failure): void;
}

/** One attempt's reading of its worker's frames, owned by the format. */
export interface FormatAttempt {
  /** One whole SSE frame (bytes [start, end) of buf). */
  onFrame(buf: Buffer, start: number, end: number): void;
  /** The upstream call ended: bring the attempt's output up to date (a lazily kept last frame). */
  settle(): void;
  /** Output tokens of this attempt so far (settled). */
  readonly tokens: number;
  /** For progress events: tokens produced so far, cheaply (may read a kept frame). */
  progressTokens(): number;
  /** Whether any whole frame arrived (the format knows the shape of an answer). */
  readonly sawFrame: boolean;
  /** Prompt tokens the worker reported cached, or null. */
  readonly cachedTokens: number | null;
  /** The weights the worker reported running on, or null. */
  readonly weightVersion: string | null;
  /** The finish reason's type of a finished attempt, or null. */
  finishReason(): string | null;
  /**
   * The upstream call ended (the connection's end, a stall, a transport error) while the attempt
   * held a finished answer for the frame its worker sends after the finish (vLLM's usage chunk):
   * the answer is delivered now, and true says the attempt finished. Formats without such a
   * trailer leave it out.
   */
  finishHeld?(): boolean;
  /** The answer contains text that cannot be stitched token-exactly. */
  readonly sawText: boolean;
  /**
   * P/D: the attempt's frames need its prefill leg's answer (SGLang's input logprobs), so the loop
   * holds them until that leg answered and then hands them over after `prefillAnswered`.
   */
  readonly awaitsPrefill?: boolean;
  /** P/D: the prefill leg's answer (its meta_info; null: none readable), before any frame. */
  prefillAnswered?(meta: JsonObject | null): void;
}

/** The client-facing side of one logical request: its stitched output and its answer's shape. */
export interface FormatSession {
  /** Output tokens committed (the attempts that ended): the replay of the next attempt. */
  readonly ids: readonly number[];
  /** Prompt tokens cached at the worker that prefilled the original prompt, or null. */
  readonly cachedTokens: number | null;
  /** Text was returned by some attempt: tokens can no longer be continued exactly. */
  readonly sawText: boolean;
  /** The budget the client's answer names in a `length` finish. */
  readonly budget: number | null;
  /**
   * Attempt k. `forwardRaw`: frames may go to a streaming client as the worker wrote them.
   * `headers` go with a unary answer (attempt and migration counts).
   */
  attempt(spec: AttemptSpec, worker: WorkerView, host: AttemptHost, forwardRaw: boolean, headers: Record<string, string>): FormatAttempt;
  /** An attempt ended: its tokens become part of the logical output. */
  commit(a: FormatAttempt): void;
  /** A frame of any attempt was seen: the router knows an answer's shape and can finish one. */
  readonly canFinishLocally: boolean;
  /** The budget was spent at a failure: finish without another worker call. */
  finishLocally(headers: Record<string, string>): void;
  /** The client aborted the request and no attempt said so itself: the format's abort answer. */
  finishAborted(headers: Record<string, string>): void;
  /** The request's own refusal (a 4xx, an in-band refusal): to the client as the worker wrote it. */
  passThrough(a: FormatAttempt, failure: Failure): void;
  /**
   * The session writes the answer's text itself from token ids (the router has the tokenizer), so
   * a worker that returns text is as good a continuation target as a token-only one.
   */
  readonly rendersOwnText?: boolean;
  /** The text each output token added, where the router has the tokenizer (the dashboard). */
  tokenTexts?(): string[] | null;
  /** A chat request's messages, tools and answer, bounded (the dashboard's request view). */
  chatView?(): ChatView | null;
}

/** What a worker told about itself when probed in this format. */
export interface ProbeResult {
  tokenOnly: boolean | null;
  incremental: boolean | null;
  preferred: Record<string, unknown> | null;
  defaultMaxNewTokens: number | null;
  modelPath: string | null;
  weightVersion: string | null;
  contextLength: number | null;
  maxTotalTokens: number | null;
  /** Tokens per KV-cache page: the granularity of its prefix cache (SGLang's page_size); null: unknown, taken as 1. */
  pageSize?: number | null;
  /**
   * The abort endpoint the worker serves, where the format's servers differ in it (vLLM): the
   * path, null when it serves none, undefined when not probed (the format's own path is used).
   */
  abortPath?: string | null;
  /** Tokens per streamed frame when a request names none (SGLang: preferred sampling params, else --stream-interval). */
  streamInterval?: number | null;
  /**
   * SGLang's `--disaggregation-mode` as `/server_info` reports it (ServerArgs.disaggregation_mode:
   * "null", "prefill" or "decode"); null: neither role (or not said).
   */
  disaggregationMode?: 'prefill' | 'decode' | null;
  /** ServerArgs.disaggregation_bootstrap_port: where a prefill server's bootstrap server listens. */
  bootstrapPort?: number | null;
}

/**
 * A wire format, client side and worker side. `N`: the name of its workers' format (a literal
 * for a format of formats/, from which formats/registry.ts makes the union of the names).
 */
export interface WireFormat<N extends FormatName = FormatName> {
  /**
   * What a client spoke (trace rows, metrics, the dashboard's badge): the worker format's name
   * for a native format, another for a front over one (the OpenAI front's `openai`).
   */
  readonly name: string;
  /**
   * The format of the workers that serve it (the pool picks among these; discovery's `format`
   * and the workers' `format` say it).
   */
  readonly workers: N;
  /** The client-facing and worker-facing generate path. */
  readonly generatePath: string;
  /** Read a parsed JSON body; throws the format's MalformedBody for what its server refuses outright. */
  parse(json: unknown, opts: { lossyNumbers: boolean; headers: Record<string, string | string[] | undefined> }): FormatRequest;
  /** The format's admission decision (its stateful fields), over the shared rules. */
  admit(req: FormatRequest, ctx: AdmissionContext): Admission;
  /**
   * Attempt k's body, as the worker must receive it (always streaming). `spec.remaining` null:
   * the client's own budget fields. `minNewTokens`: the request's effective minimum (client's or
   * advertised), which a continuation must send reduced even where the client sent none.
   */
  attemptBody(req: FormatRequest, promptIds: readonly number[], spec: AttemptSpec, minNewTokens: number): string | Buffer;
  /**
   * The worker's abort call for one upstream rid. `served`: the abort path the worker was probed
   * to serve (ProbeResult.abortPath): undefined, the format's own; null, none, and the answer is
   * null: closing the attempt's connection is the worker's only abort.
   */
  abortRequest(rid: string, served?: string | null): { path: string; body: string } | null;
  /** The stitching and rendering of one logical request, answering through `sink`. */
  session(req: FormatRequest, info: { id: string; budget: number | null; startedAt: number }, sink: ClientSink): FormatSession;
  /** The shapes of the errors the router writes itself. */
  readonly errors: ErrorShapes;
  /** A refusal the router writes itself for a reason the worker would raise as a request error. */
  writeRequestError(res: ServerResponse, stream: boolean, status: number, message: string, headers?: Record<string, string>): void;
  /** Ask a worker whether it speaks this format, and what it serves. */
  probe(pool: Pool, timeoutMs: number): Promise<ProbeResult | null>;
  /** The worker side read as plain tokens, for the OpenAI front (worker formats only). */
  readonly tokens?: TokenWorker;
  /**
   * What bounds prompt + output on this format's workers, for a front that checks a request
   * against it (fronts/openai/workers.ts): `context_length`, the smallest probed context length
   * itself (vLLM's max_model_len); `max_req_len` or absent, the scheduler's bound
   * (WorkerPool.maxReqLen: SGLang's context_len − 1).
   */
  readonly requestBound?: 'context_length' | 'max_req_len';
  /**
   * Its streamed attempts can carry the prompt's logprobs (SGLang's input_token_logprobs, in the
   * first chunk): the OpenAI front serves `echo` with logprobs and `prompt_logprobs` only over
   * such a format.
   */
  readonly streamsPromptLogprobs?: boolean;
  /** Where and how its workers report their own load (worker formats only; pool/load.ts). */
  readonly load?: LoadReport;
  /** Its workers may be P/D prefill servers, a pair's first leg (docs/pd.md; worker formats only). */
  readonly prefillServers?: boolean;
}

// --- The token-only side of a worker format, read neutrally -----------------------------------
// The OpenAI-compatible front (fronts/openai/) tokenizes, renders and stops on text itself, and
// needs from a worker format only this: a native request for given token ids and sampling
// values (admitted and continued by the format's own rules), and its frames as plain tokens.

/** Sampling values the OpenAI front sends explicitly, in neutral names (each format renames). */
export interface TokenSampling {
  temperature: number;
  top_p: number;
  /** null: no top-k. */
  top_k: number | null;
  seed: number | null;
  stop_token_ids: number[];
  ignore_eos: boolean;
  frequency_penalty: number;
  presence_penalty: number;
  repetition_penalty: number | null;
  /** token id (as a string) → bias. */
  logit_bias: Record<string, number> | null;
}

/**
 * A decoding constraint, neutrally (fronts/openai/constraints.ts reads the client's fields; each
 * worker format writes its own: SGLang's json_schema / regex / ebnf / structural_tag, vLLM's
 * structured_outputs). `options`: vLLM's StructuredOutputsParams options, as the client sent them.
 */
export type TokenConstraint = (
  | { kind: 'json'; schema: JsonObject | boolean }
  | { kind: 'json_object' }
  | { kind: 'regex'; pattern: string }
  | { kind: 'choice'; choices: string[] }
  | { kind: 'grammar'; grammar: string }
  | { kind: 'structural_tag'; tag: string }
) & { options?: JsonObject };

/** A token-only generate request, as the front hands it to a worker format. */
export interface TokenRequest {
  /** A decoding constraint for the worker's grammar backend (none: undefined or null). */
  constraint?: TokenConstraint | null;
  promptIds: number[];
  /** The explicit budget (null: none, the worker's default applies). */
  maxTokens: number | null;
  minTokens: number;
  stream: boolean;
  sampling: TokenSampling;
  /** Alternatives per output token (0: only the chosen token's logprob), null: no logprobs. */
  logprobs: number | null;
  /** Alternatives per prompt position, asked of the first attempt only; null or absent: none. */
  promptLogprobs?: number | null;
  model: string;
}

export interface TokenLogprob {
  logprob: number;
  /** The top alternatives, best first (empty when none were asked for). */
  top: { id: number; logprob: number }[];
}

/** How a worker ended an attempt, neutrally. `matched`: the stop token id, when one matched. */
export interface TokenFinish {
  reason: 'stop' | 'length' | 'abort';
  matched: number | null;
}

/** One frame of a token-only attempt. */
export type TokenFrame =
  | { kind: 'tokens'; ids: readonly number[]; logprobs: readonly TokenLogprob[] | null; finish: TokenFinish | null; weightVersion: string | null; cachedTokens: number | null; prompt?: readonly (TokenLogprob | null)[] }
  | { kind: 'failed'; failure: Failure }
  /** A usage-only frame (vLLM's, after the finish), with the prompt tokens it reports cached. */
  | { kind: 'usage'; cachedTokens: number | null }
  | { kind: 'skip' };

export interface TokenReader {
  /** Read one parsed frame of the attempt. */
  read(chunk: JsonObject): TokenFrame;
  /**
   * The worker sends one more frame after the finish (vLLM: the usage chunk of `include_usage`,
   * the only one that carries `cached_tokens`): the attempt reads it before it ends.
   */
  readonly trailer?: boolean;
  /** P/D: the prefill leg's answer (its meta_info), before any frame (FormatAttempt.prefillAnswered). */
  prefillAnswered?(meta: JsonObject | null): void;
}

export interface TokenWorker {
  /** The native request (admitted, and continued, by the worker format's own rules). */
  request(t: TokenRequest): FormatRequest;
  /** A reader for one attempt's frames. */
  reader(worker: WorkerView): TokenReader;
}

/**
 * The load a worker reports itself, for the policies that balance on it (cache_aware,
 * power_of_two): it counts every router's requests, where the router's own in-flight count sees
 * only its own.
 */
export interface LoadReport {
  /** `GET` this path on the worker. */
  readonly path: string;
  /** Requests running + waiting, from the answer's body; null: not a shape the format reads. */
  read(text: string): number | null;
}
