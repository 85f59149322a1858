// A simulated SGLang worker: SGLang's native HTTP API (see ../../shared/docs/sglang-wire.md and
// docs/simulator.md) over the deterministic model in model.ts, with realistic timing, a prefix
// cache, SGLang-named metrics, and faults on command. Runs in-process (tests) or as its own
// process (worker-main.ts, started by cluster.ts).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { resolve } from 'node:path';
import type { Socket } from 'node:net';
import { FaultSchedule, parseFault, type Fault } from './faults.ts';
import { Generation, type Call, type GenerationHost } from './generation.ts';
import { WorkerMetrics } from './metrics.ts';
import type { WeightLabel } from './answer.ts';
import { DEFAULT_MODEL_PATH, DEFAULT_WEIGHT_VERSION, weightsSalt, type ModelConfig } from './model.ts';
import { PrefixCache } from './prefix-cache.ts';
import { BodyError, RequestError, SamplingTypeError, parseGenerate, type RequestSettings } from './request.ts';
import { json, objectError, readBody, startStream } from './responses.ts';
import { Vocabulary, vocabularyFor } from './vocab.ts';

export type { Fault, FaultKind } from './faults.ts';

export interface WorkerOptions {
  host?: string;
  /** 0 (default): a free port. */
  port?: number;
  /** Pause between tokens of one stream, ms; 0 = as fast as possible. Default 0. */
  tokenIntervalMs?: number;
  /** Prefill cost per uncached prompt token, µs. Default 20. */
  prefillUsPerToken?: number;
  /** Like SGLang's --incremental-streaming-output. Default false (cumulative chunks). */
  incremental?: boolean;
  /** Text mode (built-in vocabulary, or `tokenizer`'s). Default false: token-only, like --skip-tokenizer-init. */
  text?: boolean;
  /**
   * A Hugging Face model directory (tokenizer.json, tokenizer_config.json): the model generates ids
   * of that vocabulary (its non-special tokens, ending on its EOS), and text mode tokenizes and
   * decodes with it as SGLang does. Excludes `vocabSize`.
   */
  tokenizer?: string;
  /** The vocabulary size without a tokenizer (ids 3 .. N − 1 ranked, EOS 2; at least 512). Default 32000. */
  vocabSize?: number;
  /** Like SGLang's --preferred-sampling-params; advertised and merged under each request's. */
  preferredSamplingParams?: Record<string, unknown> | null;
  /** EOS ranks first in one context state out of this many (0 = never). Default 64. */
  eosEvery?: number;
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
  /** Like SGLang's --model-path; reported as model_path and served_model_name. Default "baton-sim". */
  modelPath?: string;
  /** Like SGLang's --weight-version. Default "default". Model path and version salt the model. */
  weightVersion?: string;
  /**
   * true (default): a `crash` fault destroys every socket and stops listening, leaving the host
   * process alive. false: the process kills itself with SIGKILL, as a real crash would.
   */
  inProcess?: boolean;
}

export interface SimStats {
  /** Generations started (a batch or n > 1 request counts each sample). */
  requestsStarted: number;
  requestsFinished: number;
  /** Ended by /abort_request or by an `abort` fault. */
  requestsAborted: number;
  /** Ended because the client went away (closed or reset its connection). */
  clientDisconnects: number;
  tokensGenerated: number;
  inFlight: number;
  /** Every rid seen by /generate, oldest first (the last 10 000). */
  rids: string[];
  tokenIntervalMs: number;
  hung: boolean;
  rejecting: boolean;
  crashed: boolean;
  pendingFaults: number;
}

export interface SimWorker {
  url: string;
  port: number;
  fault(f: Fault): void;
  stats(): SimStats;
  close(): Promise<void>;
}

export const MODEL_NAME = DEFAULT_MODEL_PATH;
export const SIM_VERSION = '0.1.0-baton-sim';
const CONTEXT_LENGTH = 32768;
const MAX_TOTAL_TOKENS = 1 << 20;
const MAX_RIDS = 10_000;
const FLUSH_TEXT = 'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';

export async function startWorker(opts: WorkerOptions = {}): Promise<SimWorker> {
  const w = new WorkerServer(opts);
  await w.listen(opts.host ?? '127.0.0.1', opts.port ?? 0);
  return {
    url: w.url,
    port: w.port,
    fault: (f) => w.fault(f),
    stats: () => w.stats(),
    close: () => w.close(),
  };
}

class WorkerServer implements GenerationHost {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly controlSockets = new Set<Socket>();
  private readonly running = new Map<string, Generation>();
  readonly cache: PrefixCache;
  readonly metrics: WorkerMetrics;
  readonly model: ModelConfig;
  readonly settings: RequestSettings;
  readonly incremental: boolean;
  readonly prefillUsPerToken: number;
  readonly pageSize: number;
  readonly legacyErrors: boolean;
  modelPath: string;
  readonly tokenizerPath: string;
  weightVersion: string;
  weights: number;
  readonly weightLabel: WeightLabel;
  /** A weight update waiting for the running requests to drain (update_weights_from_disk). */
  private drained: (() => void)[] = [];
  private readonly baseInterval: number;
  tokenIntervalMs: number;
  private readonly schedule = new FaultSchedule();
  private hung = false;
  private rejecting = false;
  private crashed = false;
  private closing = false;
  /** Work frozen by `hang`, resumed by `clear`. */
  private readonly parked = new Set<() => void>();
  private readonly held: (() => void)[] = [];
  queued = 0;
  private readonly counts = { requestsStarted: 0, requestsFinished: 0, requestsAborted: 0, clientDisconnects: 0, tokensGenerated: 0 };
  private readonly rids: string[] = [];
  private readonly startedAt = Date.now() / 1000;
  url = '';
  port = 0;

  constructor(private readonly opts: WorkerOptions) {
    const vocabulary = vocabularyFor({ tokenizer: opts.tokenizer, vocabSize: opts.vocabSize, eosEvery: opts.eosEvery });
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
    this.cache = new PrefixCache(MAX_TOTAL_TOKENS, this.pageSize);
    this.legacyErrors = opts.legacyErrors ?? false;
    this.modelPath = opts.modelPath ?? DEFAULT_MODEL_PATH;
    this.tokenizerPath = opts.tokenizer !== undefined ? resolve(opts.tokenizer) : this.modelPath;
    this.weightVersion = opts.weightVersion ?? DEFAULT_WEIGHT_VERSION;
    this.weights = weightsSalt(this.modelPath, this.weightVersion);
    this.weightLabel = { versionJson: JSON.stringify(this.weightVersion) };
    this.incremental = opts.incremental ?? false;
    this.prefillUsPerToken = opts.prefillUsPerToken ?? 20;
    this.baseInterval = opts.tokenIntervalMs ?? 0;
    this.tokenIntervalMs = this.baseInterval;
    this.metrics = new WorkerMetrics(this.modelPath, () => ({
      running: this.running.size - this.queued,
      queued: this.queued,
      usedTokens: [...this.running.values()].reduce((n, g) => n + g.contextTokens, 0),
      maxTotalTokens: MAX_TOTAL_TOKENS,
    }));
    this.server = createServer((req, res) => this.onRequest(req, res));
    // uvicorn's keep-alive timeout as SGLang launches it (http_server.py launch_server:
    // `uvicorn.run(..., timeout_keep_alive=5)`), so idle pooled connections close alike.
    this.server.keepAliveTimeout = 5000;
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  listen(host: string, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        const addr = this.server.address();
        this.port = typeof addr === 'object' && addr ? addr.port : port;
        this.url = `http://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
        resolve();
      });
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const g of this.running.values()) g.stop();
    this.parked.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  stats(): SimStats {
    return {
      ...this.counts,
      inFlight: this.running.size,
      rids: [...this.rids],
      tokenIntervalMs: this.tokenIntervalMs,
      hung: this.hung,
      rejecting: this.rejecting,
      crashed: this.crashed,
      pendingFaults: this.schedule.size,
    };
  }

  // ---- faults -------------------------------------------------------------------------------

  fault(f: Fault): void {
    if (f.kind === 'slow' && f.intervalMs === undefined) throw new Error('slow needs intervalMs');
    if ((f.afterTokens ?? 0) > 0) this.schedule.add(f);
    else this.apply(f);
  }

  private apply(f: Fault): void {
    if (this.crashed) return;
    switch (f.kind) {
      case 'crash':
        return this.crash();
      case 'hang':
        this.hung = true;
        return;
      case 'reset':
        return this.reset();
      case 'reject':
        this.rejecting = true;
        return;
      case 'slow':
        this.tokenIntervalMs = f.intervalMs!;
        return;
      case 'abort':
        for (const g of [...this.running.values()]) g.abort({ type: 'abort', message: 'Simulated engine abort.', status_code: 503, err_type: 'ServiceUnavailable' });
        return;
      case 'clear':
        this.hung = false;
        this.rejecting = false;
        this.tokenIntervalMs = this.baseInterval;
        this.schedule.clear();
        for (const resume of [...this.parked]) resume();
        this.parked.clear();
        for (const replay of this.held.splice(0)) replay();
        return;
    }
  }

  private crash(): void {
    if (this.opts.inProcess === false) process.kill(process.pid, 'SIGKILL');
    this.crashed = true;
    for (const g of this.running.values()) g.stop();
    this.parked.clear();
    this.held.length = 0;
    this.server.close();
    for (const s of this.sockets) s.destroy();
  }

  private reset(): void {
    for (const g of [...this.running.values()]) g.stop();
    for (const s of this.sockets) {
      if (!s.destroyed && !this.controlSockets.has(s)) s.resetAndDestroy();
    }
  }

  /**
   * Counts one generated token. Faults that come due are returned as a callback the caller runs
   * once the frame carrying that token has been handed to the kernel, so "crash after N tokens"
   * means the client really received N tokens.
   */
  tokenGenerated(): (() => void) | undefined {
    this.counts.tokensGenerated++;
    if (this.schedule.size === 0) return undefined;
    const due = this.schedule.tick();
    return due.length === 0 ? undefined : () => due.forEach((f) => this.apply(f));
  }

  /** Runs `step` now, or once `clear` lifts a hang. */
  whenAwake(step: () => void): void {
    if (!this.hung) return step();
    const resume = () => {
      this.parked.delete(resume);
      step();
    };
    this.parked.add(resume);
  }

  generationEnded(g: Generation, how: 'finished' | 'aborted' | 'disconnected' | 'killed'): void {
    this.running.delete(g.req.rid);
    if (this.running.size === 0 && this.drained.length > 0) for (const resume of this.drained.splice(0)) resume();
    if (how === 'finished') this.counts.requestsFinished++;
    else if (how === 'aborted') this.counts.requestsAborted++;
    else if (how === 'disconnected') this.counts.clientDisconnects++;
    if (how === 'aborted' || how === 'disconnected') this.metrics.aborted.inc();
  }

  // ---- HTTP ---------------------------------------------------------------------------------

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0]!;
    if (this.crashed) {
      req.socket.destroy();
      return;
    }
    if (path.startsWith('/_sim/')) {
      void this.control(path, req, res);
      return;
    }
    if (this.hung) {
      // A hung process accepts connections but never answers; `clear` serves what waited.
      this.held.push(() => {
        if (!req.socket.destroyed) this.onRequest(req, res);
      });
      return;
    }
    void this.route(path, req, res).catch((err: unknown) => {
      if (!res.headersSent) objectError(res, 500, (err as Error).message ?? String(err));
      else res.destroy();
    });
  }

  private async route(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const allow = (...methods: string[]) => {
      if (methods.includes(method)) return true;
      json(res, 405, { detail: 'Method Not Allowed' });
      return false;
    };
    switch (path) {
      case '/generate':
        if (!allow('POST', 'PUT')) return;
        return this.generate(req, res);
      case '/health':
      case '/health_generate':
        if (!allow('GET')) return;
        res.writeHead(this.rejecting || this.closing ? 503 : 200, { 'content-length': '0' }).end();
        return;
      case '/get_model_info':
      case '/model_info':
        if (!allow('GET')) return;
        return json(res, 200, this.modelInfo());
      case '/get_server_info':
      case '/server_info':
        if (!allow('GET')) return;
        return json(res, 200, this.serverInfo());
      case '/get_weight_version':
      case '/weight_version':
        if (!allow('GET')) return;
        return json(res, 200, { weight_version: this.weightVersion });
      case '/update_weight_version':
        if (!allow('POST')) return;
        return this.updateWeightVersion(req, res);
      case '/update_weights_from_disk':
        if (!allow('POST')) return;
        return this.updateWeightsFromDisk(req, res);
      case '/v1/models':
        if (!allow('GET')) return;
        return json(res, 200, {
          object: 'list',
          data: [{ id: this.modelPath, object: 'model', created: Math.floor(this.startedAt), owned_by: 'sglang', root: this.modelPath, parent: null, max_model_len: CONTEXT_LENGTH }],
        });
      case '/abort_request':
        if (!allow('POST')) return;
        return this.abortRequest(req, res);
      case '/flush_cache': {
        if (!allow('GET', 'POST')) return;
        const busy = this.running.size > 0;
        if (!busy) this.cache.clear();
        // SGLang answers with a bare Response(content=...) (http_server.py flush_cache): no media
        // type, so Starlette sends no Content-Type at all.
        res.writeHead(busy ? 400 : 200, { 'content-length': String(Buffer.byteLength(FLUSH_TEXT)) });
        res.end(FLUSH_TEXT);
        return;
      }
      case '/metrics': {
        if (!allow('GET')) return;
        const text = await this.metrics.text();
        res.writeHead(200, { 'content-type': this.metrics.contentType }).end(text);
        return;
      }
      default:
        return json(res, 404, { detail: 'Not Found' });
    }
  }

  private async control(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Control answers close their connection, so a `reset` or `crash` they trigger cannot catch
    // a pooled control connection unawares.
    res.setHeader('connection', 'close');
    const socket = req.socket;
    if (!this.controlSockets.has(socket)) {
      this.controlSockets.add(socket);
      socket.once('close', () => this.controlSockets.delete(socket));
    }
    if (path === '/_sim/stats' && req.method === 'GET') return json(res, 200, this.stats());
    if (path === '/_sim/fault' && req.method === 'POST') {
      let fault: Fault;
      try {
        fault = parseFault(JSON.parse(await readBody(req)));
      } catch (err) {
        return objectError(res, 400, (err as Error).message);
      }
      // Answer first: a `crash` or `reset` applied now would otherwise eat its own reply.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, fault }), () => this.fault(fault));
      return;
    }
    json(res, 404, { detail: 'Not Found' });
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
      port: this.port,
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
      max_total_num_tokens: MAX_TOTAL_TOKENS,
      max_req_input_len: CONTEXT_LENGTH - 1,
      internal_states: [{ last_gen_throughput: 0, memory_usage: { kvcache: 0 }, token_interval_ms: this.tokenIntervalMs }],
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
    if (this.rejecting || this.closing) return objectError(res, 503, 'The server is not accepting new requests.');
    let raw: unknown;
    try {
      raw = JSON.parse(await readBody(req));
    } catch (err) {
      return objectError(res, 400, err instanceof BodyError ? err.message : `JSON decode error: ${(err as Error).message}`, 'Bad Request');
    }
    let parsed;
    try {
      parsed = parseGenerate(raw, this.settings, (rid) => this.running.has(rid));
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

    const call: Call = { res, stream: parsed.stream, batch: parsed.batch, gens: [], open: parsed.samples.length, done: false };
    for (const sample of parsed.samples) {
      const g = new Generation(this, call, sample);
      call.gens.push(g);
      this.running.set(sample.rid, g);
      this.counts.requestsStarted++;
      this.rids.push(sample.rid);
      if (this.rids.length > MAX_RIDS) this.rids.splice(0, this.rids.length - MAX_RIDS);
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

  /** Writes block when the client reads slowly; generation waits rather than buffering without bound. */
  backpressured(call: Call): boolean {
    return call.stream && call.res.writableNeedDrain;
  }
}
