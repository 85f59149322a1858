// A simulated SGLang worker: SGLang's native HTTP API (see ../../shared/docs/sglang-wire.md and
// docs/simulator.md) over the deterministic model in model.ts, with realistic timing, a prefix
// cache, SGLang-named metrics, and faults on command. This file is the SGLang format plug-in of
// the worker core (core.ts: server, faults, control, pacing): it parses /generate, renders
// answers and frames, and serves SGLang's other endpoints. Runs in-process (tests) or as its own
// process (worker-main.ts, started by cluster.ts).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { resolve } from 'node:path';
import { allow, startSimWorker, notFound, WorkerCore, type CoreOptions, type SimWorker, type WireFormat } from './core.ts';
import { FAULT_KINDS, type FaultKind } from './faults.ts';
import { Generation, type Call, type GenerationHost, type PdSample } from './generation.ts';
import { WorkerMetrics } from './metrics.ts';
import type { WeightLabel } from './answer.ts';
import { DEFAULT_MODEL_PATH, DEFAULT_WEIGHT_VERSION, weightsSalt, type ModelConfig } from './model.ts';
import { BootstrapServer, bootstrapOf, FAKE_BOOTSTRAP_HOST, quoteRooms, RoomBook, SGLANG_BOOTSTRAP_PORT, SGLANG_PD_TIMEOUT_MS, type Bootstrap, type DisaggregationMode, type RoomStats } from './pd.ts';
import type { PrefixCache } from './prefix-cache.ts';
import { BodyError, RequestError, SamplingTypeError, parseGenerate, type RequestSettings } from './request.ts';
import { json, objectError, readBody, startStream } from './responses.ts';
import type { Ending } from './scheduling.ts';
import { Vocabulary, vocabularyFor } from './vocab.ts';

export type { Fault, FaultKind } from './faults.ts';
export type { SimStats, SimWorker } from './core.ts';

/** The SGLang worker's options: the core's, and SGLang's own (a `tokenizer` also serves text mode). */
export interface WorkerOptions extends CoreOptions {
  /** Like SGLang's --incremental-streaming-output. Default false (cumulative chunks). */
  incremental?: boolean;
  /** Text mode (built-in vocabulary, or `tokenizer`'s). Default false: token-only, like --skip-tokenizer-init. */
  text?: boolean;
  /** Like SGLang's --preferred-sampling-params; advertised and merged under each request's. */
  preferredSamplingParams?: Record<string, unknown> | null;
  /**
   * Older SGLang's in-band stream error: `{"error":{"message"}}` only. Default false: current
   * SGLang's `{"error":{"message","type":"invalid_request_error","code":400,"retryable":false}}`.
   */
  legacyErrors?: boolean;
  /** SGLang 2025's SamplingParams: `stop_regex` and `sampling_seed` are a TypeError (sim/request.ts). */
  legacySampling?: boolean;
  /** Like SGLang's --enable-custom-logit-processor: accept custom_logit_processor (ignored). */
  enableCustomLogitProcessor?: boolean;
  /** Like SGLang's --enable-return-hidden-states: accept return_hidden_states (no hidden_states are returned). */
  enableReturnHiddenStates?: boolean;
  /** Like SGLang's --page-size: the prefix cache matches whole pages. Default 1. */
  pageSize?: number;
  /** Like SGLang's --disaggregation-mode: a P/D prefill or decode worker (sim/pd.ts). Default "null". */
  disaggregationMode?: DisaggregationMode;
  /** Like SGLang's --disaggregation-bootstrap-port: a prefill's bootstrap server port. Default 0: a free port. */
  disaggregationBootstrapPort?: number;
  /** A prefill request's wait for its decode to connect, ms (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT). Default 300 000. */
  disaggregationBootstrapTimeoutMs?: number;
  /** A decode request's wait for its KV, ms (SGLANG_DISAGGREGATION_WAITING_TIMEOUT). Default 300 000. */
  disaggregationWaitingTimeoutMs?: number;
}

export const MODEL_NAME = DEFAULT_MODEL_PATH;
export const SIM_VERSION = '0.1.0-baton-sim';
const CONTEXT_LENGTH = 32768;
const FLUSH_TEXT = 'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';

export function startWorker(opts: WorkerOptions = {}): Promise<SimWorker> {
  return startSimWorker(opts, opts.pageSize ?? 1, (core) => new SglangWorker(core, opts));
}

class SglangWorker implements WireFormat, GenerationHost {
  readonly faultKinds = FAULT_KINDS;
  /** Running samples by rid (unique among running ones: parseGenerate refuses a duplicate). */
  private readonly running = new Map<string, Generation>();
  readonly cache: PrefixCache;
  readonly metrics: WorkerMetrics;
  readonly model: ModelConfig;
  readonly settings: RequestSettings;
  readonly incremental: boolean;
  readonly pageSize: number;
  readonly legacyErrors: boolean;
  modelPath: string;
  readonly tokenizerPath: string;
  weightVersion: string;
  weights: number;
  readonly weightLabel: WeightLabel;
  readonly pdMode: DisaggregationMode;
  /** The rooms this worker has seen (P/D modes). */
  private readonly book = new RoomBook();
  /** A prefill's bootstrap server. */
  private readonly bootstrap: BootstrapServer | null;
  /** A weight update waiting for the running requests to drain (update_weights_from_disk). */
  private drained: (() => void)[] = [];
  private readonly startedAt = Date.now() / 1000;

  constructor(
    private readonly core: WorkerCore,
    private readonly opts: WorkerOptions,
  ) {
    const vocabulary = vocabularyFor({ tokenizer: opts.tokenizer, vocabSize: opts.vocabSize, eosEvery: opts.eosEvery, script: opts.script });
    this.model = vocabulary.model;
    this.settings = {
      text: opts.text ?? false,
      vocab: vocabulary.tokenizer ?? new Vocabulary(this.model),
      vocabSize: this.model.vocabSize,
      contextLength: CONTEXT_LENGTH,
      preferred: opts.preferredSamplingParams ?? null,
      legacySampling: opts.legacySampling ?? false,
      enableCustomLogitProcessor: opts.enableCustomLogitProcessor ?? false,
      enableReturnHiddenStates: opts.enableReturnHiddenStates ?? false,
    };
    this.pageSize = opts.pageSize ?? 1;
    this.cache = core.cache;
    this.legacyErrors = opts.legacyErrors ?? false;
    this.modelPath = opts.modelPath ?? DEFAULT_MODEL_PATH;
    this.tokenizerPath = opts.tokenizer !== undefined ? resolve(opts.tokenizer) : this.modelPath;
    this.weightVersion = opts.weightVersion ?? DEFAULT_WEIGHT_VERSION;
    this.weights = weightsSalt(this.modelPath, this.weightVersion);
    this.weightLabel = { versionJson: JSON.stringify(this.weightVersion) };
    this.incremental = opts.incremental ?? false;
    this.pdMode = opts.disaggregationMode ?? 'null';
    if (!['null', 'prefill', 'decode'].includes(this.pdMode)) throw new Error(`disaggregation mode must be null, prefill or decode, got ${String(this.pdMode)}`);
    this.bootstrap = this.pdMode === 'prefill' ? new BootstrapServer(opts.host ?? '127.0.0.1', { rankPort: () => core.port, pageSize: this.pageSize }) : null;
    this.metrics = new WorkerMetrics(this.modelPath, () => ({
      running: this.running.size - core.queued,
      queued: core.queued,
      usedTokens: [...this.running.values()].reduce((n, g) => n + g.contextTokens, 0),
      maxTotalTokens: core.maxTotalTokens,
    }));
  }

  /** The `abort` fault: the scheduler aborts every request with a 503 (a unary one answers with it). */
  engineFault(kind: FaultKind): void {
    if (kind !== 'abort') return;
    for (const g of [...this.running.values()]) g.abort({ type: 'abort', message: 'Simulated engine abort.', status_code: 503, err_type: 'ServiceUnavailable' });
  }

  ended(g: Generation, how: Ending): void {
    this.running.delete(g.req.rid);
    if (this.running.size === 0 && this.drained.length > 0) for (const resume of this.drained.splice(0)) resume();
    if (how === 'aborted' || how === 'disconnected') this.metrics.aborted.inc();
  }

  async listen(): Promise<void> {
    await this.bootstrap?.listen(this.opts.disaggregationBootstrapPort ?? 0);
  }

  async close(): Promise<void> {
    await this.bootstrap?.close();
  }

  crashed(): void {
    this.bootstrap?.destroy();
  }

  extraStats(): { pd?: RoomStats } {
    if (this.pdMode === 'null') return {};
    return { pd: { mode: this.pdMode, bootstrapPort: this.bootstrapPort, roomsSeen: this.book.seenCount, roomsActive: this.book.activeCount, duplicateRooms: [...this.book.duplicates] } };
  }

  rooms(since: number): { total: number; rooms: string[] } | null {
    return this.pdMode === 'null' ? null : this.book.since(since);
  }

  /** The bootstrap port /server_info advertises: the prefill's server, else SGLang's default. */
  private get bootstrapPort(): number {
    return this.bootstrap?.port ?? this.opts.disaggregationBootstrapPort ?? SGLANG_BOOTSTRAP_PORT;
  }

  internalError(res: ServerResponse, message: string): void {
    objectError(res, 500, message);
  }

  controlError(res: ServerResponse, message: string): void {
    objectError(res, 400, message);
  }

  // ---- HTTP ---------------------------------------------------------------------------------

  async route(path: string, method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const allowed = (...methods: string[]) => allow(res, method, ...methods);
    switch (path) {
      case '/generate':
        if (!allowed('POST', 'PUT')) return;
        return this.generate(req, res);
      case '/health':
      case '/health_generate':
        if (!allowed('GET')) return;
        res.writeHead(this.core.healthy ? 200 : 503, { 'content-length': '0' }).end();
        return;
      case '/get_model_info':
      case '/model_info':
        if (!allowed('GET')) return;
        return json(res, 200, this.modelInfo());
      case '/get_server_info':
      case '/server_info':
        if (!allowed('GET')) return;
        return json(res, 200, this.serverInfo());
      case '/get_weight_version':
      case '/weight_version':
        if (!allowed('GET')) return;
        return json(res, 200, { weight_version: this.weightVersion });
      case '/update_weight_version':
        if (!allowed('POST')) return;
        return this.updateWeightVersion(req, res);
      case '/update_weights_from_disk':
        if (!allowed('POST')) return;
        return this.updateWeightsFromDisk(req, res);
      case '/v1/models':
        if (!allowed('GET')) return;
        return json(res, 200, {
          object: 'list',
          data: [{ id: this.modelPath, object: 'model', created: Math.floor(this.startedAt), owned_by: 'sglang', root: this.modelPath, parent: null, max_model_len: CONTEXT_LENGTH }],
        });
      case '/abort_request':
        if (!allowed('POST')) return;
        return this.abortRequest(req, res);
      case '/get_load': {
        // http_server.py get_load (the legacy shim over /v1/loads): one entry per DP rank.
        if (!allowed('GET')) return;
        const queued = this.core.queued;
        let tokens = 0;
        for (const g of this.running.values()) tokens += g.contextTokens;
        return json(res, 200, [{ dp_rank: 0, num_reqs: this.running.size, num_waiting_reqs: queued, num_tokens: tokens, num_pending_tokens: this.core.maxTotalTokens - tokens, ts_tic: performance.now() / 1000 }]);
      }
      case '/flush_cache': {
        if (!allowed('GET', 'POST')) return;
        const busy = this.core.running.size > 0;
        if (!busy) this.cache.clear();
        // SGLang answers with a bare Response(content=...) (http_server.py flush_cache): no media
        // type, so Starlette sends no Content-Type at all.
        res.writeHead(busy ? 400 : 200, { 'content-length': String(Buffer.byteLength(FLUSH_TEXT)) });
        res.end(FLUSH_TEXT);
        return;
      }
      case '/metrics': {
        if (!allowed('GET')) return;
        const text = await this.metrics.text();
        res.writeHead(200, { 'content-type': this.metrics.contentType }).end(text);
        return;
      }
      default:
        return notFound(res);
    }
  }

  /** http_server.py model_info (served at /model_info and the deprecated /get_model_info). */
  private modelInfo() {
    return {
      model_path: this.modelPath,
      served_model_name: this.modelPath,
      tokenizer_path: this.tokenizerPath,
      is_generation: true,
      // An object since SGLang parsed the server argument (Dec 2025); older servers sent the JSON string.
      preferred_sampling_params: this.settings.preferred,
      weight_version: this.weightVersion,
      load_format: 'auto',
      reasoning_parser: null,
      tool_call_parser: null,
      has_image_understanding: false,
      has_audio_understanding: false,
      model_type: 'llama',
      architectures: ['LlamaForCausalLM'],
    };
  }

  private serverInfo() {
    return {
      model_path: this.modelPath,
      tokenizer_path: this.tokenizerPath,
      served_model_name: this.modelPath,
      host: this.opts.host ?? '127.0.0.1',
      port: this.core.port,
      skip_tokenizer_init: !this.settings.text,
      incremental_streaming_output: this.incremental,
      preferred_sampling_params: this.settings.preferred,
      context_length: CONTEXT_LENGTH,
      is_embedding: false,
      dp_size: 1,
      tp_size: 1,
      page_size: this.pageSize,
      stream_interval: 1,
      disable_radix_cache: false,
      enable_metrics: true,
      enable_custom_logit_processor: this.settings.enableCustomLogitProcessor,
      enable_return_hidden_states: this.settings.enableReturnHiddenStates,
      weight_version: this.weightVersion,
      disaggregation_mode: this.pdMode,
      disaggregation_bootstrap_port: this.bootstrapPort,
      max_total_num_tokens: this.core.maxTotalTokens,
      max_req_input_len: CONTEXT_LENGTH - 1,
      internal_states: [{ last_gen_throughput: 0, memory_usage: { kvcache: 0 }, token_interval_ms: this.core.tokenIntervalMs }],
      version: SIM_VERSION,
    };
  }

  private async jsonBody(req: IncomingMessage, res: ServerResponse): Promise<Record<string, unknown> | null> {
    try {
      const parsed: unknown = JSON.parse(await readBody(req));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('Input should be a valid dictionary');
      return parsed as Record<string, unknown>;
    } catch (err) {
      objectError(res, 400, (err as Error).message, 'Bad Request');
      return null;
    }
  }

  /**
   * SGLang's tokenizer manager forwards an abort only for a rid it has in flight (or abort_all);
   * the scheduler then aborts every request whose rid starts with it: queued ones answer with the
   * queued-abort shape, running ones end at their next step with the default FINISH_ABORT.
   */
  private abortMatching(rid: string | null): void {
    for (const g of [...this.running.values()]) if (rid === null || g.req.rid.startsWith(rid)) g.abortByRequest();
  }

  private async abortRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await this.jsonBody(req, res);
    if (!body) return;
    if (body.abort_all === true) this.abortMatching(null);
    else if (typeof body.rid === 'string' && body.rid !== '' && this.running.has(body.rid)) this.abortMatching(body.rid);
    res.writeHead(200, { 'content-length': '0' }).end();
  }

  /** A new model path and/or weight version: new weights for every running and future request. */
  private setWeights(modelPath: string, weightVersion: string): void {
    this.modelPath = modelPath;
    this.weightVersion = weightVersion;
    this.weights = weightsSalt(modelPath, weightVersion);
    this.weightLabel.versionJson = JSON.stringify(weightVersion);
    for (const g of this.running.values()) g.setWeights(this.weights);
  }

  /** POST /update_weight_version {"new_version", "abort_all_requests" = true} (http_server.py). */
  private async updateWeightVersion(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await this.jsonBody(req, res);
    if (!body) return;
    if (typeof body.new_version !== 'string') {
      return objectError(res, 400, `1 validation error for UpdateWeightVersionReqInput\nnew_version\n  Input should be a valid string [input_value=${JSON.stringify(body.new_version ?? null)}]`, 'Bad Request');
    }
    if (body.abort_all_requests !== false) this.abortMatching(null);
    this.setWeights(this.modelPath, body.new_version);
    json(res, 200, { success: true, message: `Weight version updated to ${body.new_version}`, new_version: body.new_version });
  }

  /**
   * POST /update_weights_from_disk {"model_path", "weight_version"?, "abort_all_requests" = false}:
   * like SGLang's, it waits for the running requests to finish (its model-update lock), swaps the
   * weights, flushes the prefix cache and answers {"success","message","num_paused_requests"}.
   */
  private async updateWeightsFromDisk(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await this.jsonBody(req, res);
    if (!body) return;
    if (typeof body.model_path !== 'string') {
      return objectError(res, 400, `1 validation error for UpdateWeightFromDiskReqInput\nmodel_path\n  Input should be a valid string [input_value=${JSON.stringify(body.model_path ?? null)}]`, 'Bad Request');
    }
    const version = typeof body.weight_version === 'string' ? body.weight_version : null;
    if (body.abort_all_requests === true) this.abortMatching(null);
    if (this.running.size > 0) await new Promise<void>((resolve) => this.drained.push(resolve));
    this.setWeights(body.model_path, version ?? this.weightVersion);
    this.cache.clear();
    let message = 'Succeeded to update model weights.';
    if (version !== null) message += ` Weight version updated to ${version}.`;
    json(res, 200, { success: true, message, num_paused_requests: 0 });
  }

  private async generate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.core.healthy) return objectError(res, 503, 'The server is not accepting new requests.');
    let raw: unknown;
    try {
      const text = await readBody(req);
      raw = JSON.parse(this.pdMode === 'null' ? text : quoteRooms(text));
    } catch (err) {
      return objectError(res, 400, err instanceof BodyError ? err.message : `JSON decode error: ${(err as Error).message}`, 'Bad Request');
    }
    let parsed;
    let bootstraps: Bootstrap[] | null = null;
    try {
      parsed = parseGenerate(raw, this.settings, (rid) => this.running.has(rid));
      if (this.pdMode !== 'null') bootstraps = parsed.samples.map((s) => bootstrapOf(raw as Record<string, unknown>, s.item, this.opts.host ?? '127.0.0.1'));
    } catch (err) {
      if (err instanceof BodyError) return objectError(res, 400, err.message, 'Bad Request');
      const stream = typeof raw === 'object' && raw !== null && (raw as Record<string, unknown>).stream === true;
      if (err instanceof SamplingTypeError) return this.unhandled(res, stream);
      if (!(err instanceof RequestError)) throw err;
      // Unary: _create_error_response, {"error":{"message"}} in every version.
      if (!stream) return json(res, 400, { error: { message: err.message } });
      // Stream: the ValueError becomes one in-band frame (http_server.py generate_request).
      const error = this.legacyErrors ? { message: err.message } : { message: err.message, type: 'invalid_request_error', code: 400, retryable: false };
      startStream(res);
      res.end(`data: ${JSON.stringify({ error })}\n\ndata: [DONE]\n\n`);
      return;
    }
    // The client may have given up while its body was read (or while the worker hung).
    if (res.destroyed || req.socket.destroyed) return;
    // The scheduler refuses a logprob window past the prompt: a unary call fails with 400.
    const startError = parsed.samples.find((s) => s.startError)?.startError;
    if (startError && !parsed.stream) return json(res, 400, { error: { message: startError } });

    const legs = bootstraps === null ? null : this.enterRooms(bootstraps);
    if (legs === false) return;
    const call: Call = { res, stream: parsed.stream, batch: parsed.batch, gens: [], open: parsed.samples.length, done: false };
    for (const [i, sample] of parsed.samples.entries()) {
      const g = new Generation(this.core, this, call, sample, legs?.[i] ?? null);
      call.gens.push(g);
      this.running.set(sample.rid, g);
      this.core.started(g);
      this.core.noteRid(sample.rid);
      this.core.noteConstraint(sample.rid, sample.constraint);
    }
    res.on('close', () => {
      if (call.done) return;
      call.done = true;
      for (const g of call.gens) g.disconnect();
    });
    if (call.stream) startStream(res);
    for (const g of call.gens) g.start();
  }

  /**
   * Each sample's P/D leg, its room entered in the book; false if a room is active already: the
   * duplicate crashes SGLang's schedulers (sglang#40125: the prefill's KeyError in
   * MooncakeKVSender.poll, the decode's ValueError), so this worker crashes as they do.
   */
  private enterRooms(bootstraps: Bootstrap[]): PdSample[] | false {
    const entered: string[] = [];
    for (const b of bootstraps) {
      if (!this.book.enter(b.room)) {
        for (const room of entered) this.book.leave(room);
        console.error(`baton sim (${this.pdMode}): duplicate bootstrap_room ${b.room} while it is active: the scheduler crashes (sglang#40125)`);
        this.core.fault({ kind: 'crash' });
        return false;
      }
      entered.push(b.room);
    }
    return bootstraps.map((b): PdSample => {
      const fake = b.host === FAKE_BOOTSTRAP_HOST;
      const leave = () => this.book.leave(b.room);
      if (this.pdMode === 'prefill') {
        const leg = this.bootstrap!.leg(b.room);
        return { role: 'prefill', leg, fake, bootstrapTimeoutMs: this.opts.disaggregationBootstrapTimeoutMs ?? SGLANG_PD_TIMEOUT_MS, release: () => (leg.release(), leave()) };
      }
      return { role: 'decode', bootstrap: b, fake, waitingTimeoutMs: this.opts.disaggregationWaitingTimeoutMs ?? SGLANG_PD_TIMEOUT_MS, release: leave };
    });
  }

  /**
   * An exception other than ValueError out of SGLang's generate handler (http_server.py
   * `generate_request` catches only ValueError): a unary request gets Starlette's
   * ServerErrorMiddleware answer, 500 `Internal Server Error` as plain text; a stream has sent its
   * 200 headers already (StreamingResponse starts the response before it iterates), and uvicorn,
   * on an exception after the response started, closes the connection (h11_impl.py / httptools_impl.py
   * `run_asgi`: `self.transport.close()`): no frame, no [DONE], no last chunk.
   */
  private unhandled(res: ServerResponse, stream: boolean): void {
    if (!stream) {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'content-length': '21' }).end('Internal Server Error');
      return;
    }
    startStream(res);
    res.socket?.destroySoon();
  }

  /** A generation of `call` produced a chunk or its final answer; `flushed` runs once it is on the wire. */
  emit(call: Call, g: Generation, body: string, final: boolean, flushed?: () => void): void {
    if (call.done) return flushed?.();
    if (call.stream) {
      call.res.write(`data: ${body}\n\n`, flushed);
      if (final && --call.open === 0) {
        call.done = true;
        call.res.end('data: [DONE]\n\n');
      }
      return;
    }
    g.finalBody = body;
    if (final && --call.open === 0) {
      call.done = true;
      const engineAbort = call.gens.map((x) => x.engineAbort).find((a) => a !== null);
      // SGLang turns a 5xx scheduler abort of a unary request into an HTTP error.
      if (engineAbort) objectError(call.res, engineAbort.status_code ?? 500, engineAbort.message, String(engineAbort.status_code));
      else {
        const text = call.batch ? `[${call.gens.map((x) => x.finalBody).join(',')}]` : body;
        call.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
      }
    }
    flushed?.();
  }
}
