// A simulated vLLM worker: vLLM's native token-in/token-out generate API
// (`vllm serve --tokens-only`: POST /inference/v1/generate, /inference/v1/abort_requests,
// /abort_requests, /health, /v1/models, /load, ...) over the same deterministic model as the
// SGLang worker, with the same timing options and faults. docs/simulator.md ("Simulated vLLM workers") cites vLLM's source for each
// behaviour. This file is the vLLM format plug-in of the worker core (../core.ts: server, faults,
// control, pacing): it parses generate calls, renders answers and frames, and serves vLLM's other
// endpoints. Runs in-process (tests) or as its own process (worker-main.ts --format vllm).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { allow, startSimWorker, json, notFound, WorkerCore, type CoreOptions, type SimWorker, type WireFormat } from '../core.ts';
import { VLLM_FAULT_KINDS, type FaultKind } from '../faults.ts';
import { DEFAULT_MODEL_PATH, DEFAULT_WEIGHT_VERSION, weightsSalt, type ModelConfig } from '../model.ts';
import { vocabularyFor } from '../vocab.ts';
import type { PrefixCache } from '../prefix-cache.ts';
import { BodyError } from '../request.ts';
import { readBody } from '../responses.ts';
import type { Ending } from '../scheduling.ts';
import { ResponseShape, errorBody, streamErrorFrame, type UsageNumbers } from './answer.ts';
import { VllmGeneration, type VllmCall, type VllmGenerationHost } from './generation.ts';
import { EngineError, ServingError, ValidationFailure, parseVllmGenerate, type VllmSettings } from './request.ts';

/**
 * The vLLM worker's options: the core's (a `tokenizer` gives only its vocabulary size, non-special
 * ids and EOS: the API stays token-only; the model path is the served model name, `id` in
 * /v1/models), and vLLM's own.
 */
export interface VllmWorkerOptions extends CoreOptions {
  /** --max-model-len. Default 32768. */
  maxModelLen?: number;
  /** Prefix-cache block size (vLLM's --block-size). Default 16. */
  pageSize?: number;
  /** --max-logprobs. Default 20. */
  maxLogprobs?: number;
  /** Older logprobs shape: ChatCompletionLogProbs with `token: "token_id:N"`. Default false. */
  legacyLogprobs?: boolean;
  /**
   * The older serve/disagg generate: no output_mode, weight_versions or prompt_token_ids, and a
   * stream skips every output without new tokens (so an abort with none ends with [DONE] and no
   * finish_reason). Default false.
   */
  legacyGenerate?: boolean;
  /**
   * The older abort API: vLLM before PR #58588 (2026-10) serves no `/inference/v1/abort_requests`,
   * only `/abort_requests` on a `--tokens-only` server (token_in_token_out/api_router.py and
   * serve/disagg/api_router.py `attach_router`). Implied by `legacyGenerate`. Default false.
   */
  legacyAbort?: boolean;
  /**
   * Serve as `vllm serve --enable-scale-out` (no `--tokens-only`): no `/abort_requests`, which
   * vLLM registers only with `--tokens-only`. With `legacyAbort`: no abort endpoint at all, and
   * only closing the connection aborts a request. Nothing else changes. Default false.
   */
  enableScaleOut?: boolean;
  /**
   * --enable-prompt-tokens-details: usage.prompt_tokens_details.cached_tokens (the stream's final
   * usage chunk, and the unary answer). The older serve/disagg generate sends it only when non-zero
   * (`if enable_prompt_tokens_details and num_cached_tokens:`). Default false.
   */
  enablePromptTokensDetails?: boolean;
  /** --scheduling-policy. Default "fcfs" (non-zero priority is refused). */
  schedulingPolicy?: 'fcfs' | 'priority';
}

export const VLLM_SIM_VERSION = '0.1.0-baton-sim-vllm';
const ENGINE_DEAD_MESSAGE = 'EngineCore encountered an issue. See stack trace (above) for the root cause.';

export function startVllmWorker(opts: VllmWorkerOptions = {}): Promise<SimWorker> {
  return startSimWorker(opts, opts.pageSize ?? 16, (core) => new VllmWorker(core, opts));
}

class VllmWorker implements WireFormat, VllmGenerationHost {
  readonly faultKinds = VLLM_FAULT_KINDS;
  /** Running choices by the engine's external request id (duplicates allowed, as in vLLM). */
  private readonly running = new Map<string, Set<VllmGeneration>>();
  readonly model: ModelConfig;
  readonly settings: VllmSettings;
  readonly maxModelLen: number;
  readonly legacyLogprobs: boolean;
  private readonly legacyGenerate: boolean;
  private readonly promptDetails: boolean;
  /** The abort paths served (vLLM's attach_router: by version and flags). */
  private readonly abortPaths: ReadonlySet<string>;
  readonly modelPath: string;
  weightVersion: string;
  weights: number;
  /** @load_aware_call's server_load_metrics: generate calls not yet answered. */
  private load = 0;
  /** vllm:prompt_tokens_total and vllm:request_success_total (generation tokens are the core's count). */
  private readonly promptTokens = { total: 0, success: 0 };
  private readonly startedAt = Math.floor(Date.now() / 1000);

  constructor(
    private readonly core: WorkerCore,
    opts: VllmWorkerOptions,
  ) {
    this.model = vocabularyFor({ tokenizer: opts.tokenizer, vocabSize: opts.vocabSize, eosEvery: opts.eosEvery, script: opts.script }).model;
    this.modelPath = opts.modelPath ?? DEFAULT_MODEL_PATH;
    this.maxModelLen = opts.maxModelLen ?? 32768;
    this.settings = {
      modelName: this.modelPath,
      vocabSize: this.model.vocabSize,
      eosTokenId: this.model.eosTokenId,
      maxModelLen: this.maxModelLen,
      maxLogprobs: opts.maxLogprobs ?? 20,
      schedulingPolicy: opts.schedulingPolicy ?? 'fcfs',
      maxNumSeqs: 256,
    };
    this.legacyLogprobs = opts.legacyLogprobs ?? false;
    this.legacyGenerate = opts.legacyGenerate ?? false;
    this.promptDetails = opts.enablePromptTokensDetails ?? false;
    const abortPaths = new Set<string>();
    if (!(opts.legacyAbort || this.legacyGenerate)) abortPaths.add('/inference/v1/abort_requests');
    if (!opts.enableScaleOut) abortPaths.add('/abort_requests');
    this.abortPaths = abortPaths;
    this.weightVersion = opts.weightVersion ?? DEFAULT_WEIGHT_VERSION;
    this.weights = weightsSalt(this.modelPath, this.weightVersion);
  }

  cacheFor(salt: string | null): PrefixCache {
    return this.core.cacheFor(salt);
  }

  engineFault(kind: FaultKind): void {
    const running = [...(this.core.running as Set<VllmGeneration>)];
    // The engine aborts everything it runs (as /pause?mode=abort does): finish_reason "abort".
    if (kind === 'abort') for (const g of running) g.abort();
    // A retryable request-level internal error (e.g. a KV load failure): finish_reason "error".
    else if (kind === 'error') for (const g of running) g.fail();
  }

  ended(g: VllmGeneration, how: Ending): void {
    const set = this.running.get(g.call.req.requestId);
    if (set) {
      set.delete(g);
      if (set.size === 0) this.running.delete(g.call.req.requestId);
    }
    if (how === 'finished') this.promptTokens.success++;
  }

  internalError(res: ServerResponse, message: string): void {
    json(res, 500, errorBody(message, 'InternalServerError', 500, null));
  }

  controlError(res: ServerResponse, message: string): void {
    json(res, 400, JSON.stringify({ object: 'error', message, type: '400', param: null, code: 400 }));
  }

  // ---- HTTP ---------------------------------------------------------------------------------

  async route(path: string, method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const allowed = (...methods: string[]) => allow(res, method, ...methods);
    switch (path) {
      case '/inference/v1/generate':
        if (!allowed('POST')) return;
        return this.generate(req, res);
      case '/inference/v1/abort_requests':
      case '/abort_requests':
        if (!this.abortPaths.has(path)) return notFound(res);
        if (!allowed('POST')) return;
        return this.abortRequests(req, res);
      case '/health':
        if (!allowed('GET')) return;
        res.writeHead(this.core.healthy ? 200 : 503, { 'content-length': '0' }).end();
        return;
      case '/ping':
        if (!allowed('GET', 'POST')) return;
        res.writeHead(this.core.healthy ? 200 : 503, { 'content-length': '0' }).end();
        return;
      case '/load':
        if (!allowed('GET')) return;
        return json(res, 200, JSON.stringify({ server_load: this.load }));
      case '/version':
        if (!allowed('GET')) return;
        return json(res, 200, JSON.stringify({ version: VLLM_SIM_VERSION }));
      case '/v1/models':
        if (!allowed('GET')) return;
        return json(res, 200, JSON.stringify(this.models()));
      case '/weight_info':
        if (!allowed('GET')) return;
        return json(res, 200, JSON.stringify({ weight_version: this.weightVersion }));
      case '/update_weight_version':
        if (!allowed('POST')) return;
        return this.updateWeightVersion(req, res, 'new_version', true);
      case '/finish_weight_update':
        if (!allowed('POST')) return;
        return this.updateWeightVersion(req, res, 'weight_version', false);
      case '/metrics':
        if (!allowed('GET')) return;
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(this.metricsText());
        return;
      default:
        return notFound(res);
    }
  }

  /** GET /v1/models: ModelList of one ModelCard (serve/engine/protocol.py). */
  private models() {
    return {
      object: 'list',
      data: [
        {
          id: this.modelPath,
          object: 'model',
          created: this.startedAt,
          owned_by: 'vllm',
          root: this.modelPath,
          parent: null,
          max_model_len: this.maxModelLen,
          permission: [
            {
              id: `modelperm-${this.startedAt.toString(16)}${this.core.port}`,
              object: 'model_permission',
              created: this.startedAt,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: '*',
              group: null,
              is_blocking: false,
            },
          ],
        },
      ],
    };
  }

  private metricsText(): string {
    const running = this.core.running.size - this.core.queued;
    const label = `{model_name=${JSON.stringify(this.modelPath)}}`;
    return (
      `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running${label} ${running}\n` +
      `# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting${label} ${this.core.queued}\n` +
      `# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total${label} ${this.promptTokens.total}\n` +
      `# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total${label} ${this.core.counts.tokensGenerated}\n` +
      `# TYPE vllm:request_success_total counter\nvllm:request_success_total${label} ${this.promptTokens.success}\n`
    );
  }

  /** A FastAPI HTTPException through vLLM's http_exception_handler. */
  private httpError(res: ServerResponse, status: number, detail: string): void {
    json(res, status, errorBody(detail, status === 400 ? 'Bad Request' : status === 422 ? 'Unprocessable Entity' : String(status), status, null));
  }

  /**
   * POST /inference/v1/abort_requests (and /abort_requests on a --tokens-only server):
   * {"request_ids": [...]} with the engine's ids (`generate-tokens-<id>`); an empty 200 at once,
   * the aborts follow in the background (api_router.py abort_requests).
   */
  private async abortRequests(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch (err) {
      return this.httpError(res, 400, `JSON decode error: ${(err as Error).message}`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return json(res, 500, errorBody(`'${Array.isArray(body) ? 'list' : typeof body === 'string' ? 'str' : body === null ? 'NoneType' : typeof body === 'number' ? (Number.isInteger(body) ? 'int' : 'float') : 'bool'}' object has no attribute 'get'`, 'InternalServerError', 500, null));
    }
    const ids = (body as Record<string, unknown>).request_ids;
    if (ids === undefined || ids === null) return this.httpError(res, 400, "Missing 'request_ids' in request body");
    const list = typeof ids === 'string' ? [ids] : Array.isArray(ids) ? ids : [];
    res.writeHead(200, { 'content-length': '0' }).end();
    setImmediate(() => {
      for (const id of list) {
        if (typeof id !== 'string') continue;
        for (const g of [...(this.running.get(id) ?? [])]) g.abort();
      }
    });
  }

  /**
   * POST /update_weight_version {"new_version"} ({"success": true, "new_version"}) and
   * POST /finish_weight_update {"weight_version"?} ({"message": "Weight update finished"}):
   * vLLM's RLHF dev endpoints. Running requests keep running; their next tokens carry the new
   * label (and, in the simulator, come from the new weights).
   */
  private async updateWeightVersion(req: IncomingMessage, res: ServerResponse, key: string, required: boolean): Promise<void> {
    let body: unknown;
    try {
      const text = await readBody(req);
      body = text === '' ? {} : JSON.parse(text);
    } catch {
      body = undefined;
    }
    const v = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[key] : undefined;
    if (v !== undefined && v !== null && typeof v !== 'string') {
      return json(res, 400, errorBody(`1 validation error:\n  {'type': 'string_type', 'loc': ('body', '${key}'), 'msg': 'Input should be a valid string'}`, 'Bad Request', 400, `body.${key}`));
    }
    if (typeof v !== 'string') {
      if (required) return json(res, 400, errorBody(`1 validation error:\n  {'type': 'missing', 'loc': ('body', '${key}'), 'msg': 'Field required'}`, 'Bad Request', 400, `body.${key}`));
      return json(res, 200, JSON.stringify({ message: 'Weight update finished' }));
    }
    this.weightVersion = v;
    this.weights = weightsSalt(this.modelPath, v);
    for (const g of this.core.running as Set<VllmGeneration>) g.setWeights(this.weights);
    if (required) return json(res, 200, JSON.stringify({ success: true, new_version: v }));
    json(res, 200, JSON.stringify({ message: 'Weight update finished' }));
  }

  private async generate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // validate_json_request
    const media = String(req.headers['content-type'] ?? '').toLowerCase().split(';')[0]!.trim();
    if (media !== 'application/json') {
      const f = new ValidationFailure([{ type: 'media', msg: '', raw: "Unsupported Media Type: Only 'application/json' is allowed" }]);
      return json(res, 400, errorBody(f.message, 'Bad Request', 400, null));
    }
    let raw: unknown;
    try {
      raw = JSON.parse(await readBody(req));
    } catch (err) {
      if (err instanceof BodyError) return json(res, 413, errorBody(err.message, 'Request Entity Too Large', 413, null));
      const f = new ValidationFailure([{ type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error', input: {} }]);
      return json(res, 400, errorBody(f.message, 'Bad Request', 400, f.param));
    }
    let parsed;
    try {
      parsed = parseVllmGenerate(raw, req.headers, this.settings);
    } catch (err) {
      if (err instanceof ValidationFailure) return json(res, 400, errorBody(err.message, 'Bad Request', 400, err.param));
      if (err instanceof ServingError) return json(res, err.status, errorBody(err.message, err.type, err.status, err.param));
      throw err;
    }
    // _preflight: a dead engine (the `reject` fault) raises EngineDeadError: 500 before any stream.
    if (!this.core.healthy) return json(res, 500, errorBody(ENGINE_DEAD_MESSAGE, 'InternalServerError', 500, null));
    if (res.destroyed || req.socket.destroyed) return;
    this.load++;
    res.once('close', () => this.load--);
    const call: VllmCall = {
      res,
      req: parsed,
      shape: new ResponseShape(parsed.requestId, this.legacyGenerate),
      gens: [],
      open: parsed.sampling.n,
      done: false,
      cached: 0,
      promptIdsPending: parsed.returnTokenIds && !this.legacyGenerate,
      created: Math.floor(Date.now() / 1000),
      promptLogprobs: null,
    };
    if (parsed.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      res.flushHeaders();
    }
    this.core.noteConstraint(parsed.requestId, parsed.structuredOutputs === null ? null : { structured_outputs: parsed.structuredOutputs });
    // The input processor runs when the response generator first iterates: in band for a stream.
    if (parsed.engineError) return this.engineRefusal(call, parsed.engineError);
    this.core.noteRid(parsed.requestId);
    this.promptTokens.total += parsed.promptIds.length;
    let set = this.running.get(parsed.requestId);
    if (!set) this.running.set(parsed.requestId, (set = new Set()));
    for (let i = 0; i < parsed.sampling.n; i++) {
      const g = new VllmGeneration(this.core, this, call, i);
      call.gens.push(g);
      set.add(g);
      this.core.started(g);
    }
    res.on('close', () => {
      if (call.done) return;
      call.done = true;
      for (const g of call.gens) g.disconnect();
    });
    for (const g of call.gens) g.start();
  }

  private engineRefusal(call: VllmCall, e: EngineError): void {
    call.done = true;
    if (call.req.stream) {
      call.res.end(`data: ${streamErrorFrame(e.message, 'BadRequestError', 400, e.param)}\n\ndata: [DONE]\n\n`);
      return;
    }
    json(call.res, 400, errorBody(e.message, 'BadRequestError', 400, e.param));
  }

  private usage(call: VllmCall, completion: number): UsageNumbers {
    // serving.py: `enable_prompt_tokens_details and num_cached_tokens is not None`; the older
    // serve/disagg serving.py tests `num_cached_tokens` itself, so 0 sends no details.
    const details = this.promptDetails && !(this.legacyGenerate && call.cached === 0);
    return { prompt: call.req.promptIds.length, completion, cached: details ? call.cached : null };
  }

  emit(call: VllmCall, g: VllmGeneration, final: boolean, flushed?: () => void): void {
    if (call.done) return flushed?.();
    const r = call.req;
    if (r.stream) {
      if (final && g.finish === 'error') {
        // _raise_if_error: GenerationError -> one in-band error frame, then [DONE]; the other
        // choices end with the generator.
        call.done = true;
        for (const other of call.gens) if (other !== g) other.cancel();
        call.res.end(`data: ${streamErrorFrame('Internal server error', 'InternalServerError', 500, null)}\n\ndata: [DONE]\n\n`, flushed);
        return;
      }
      let wrote = false;
      // A chunk for every output with new tokens, and (current vLLM) for the terminal output.
      if (g.answer.hasDelta || (final && !this.legacyGenerate)) {
        const usage = r.continuousUsage ? `{"prompt_tokens":${r.promptIds.length},"total_tokens":${r.promptIds.length + g.answer.count},"completion_tokens":${g.answer.count},"prompt_tokens_details":null,"completion_tokens_details":null}` : null;
        const prompt = call.promptIdsPending ? r.promptIds : null;
        call.promptIdsPending = false;
        const body = call.shape.chunk(g.answer.streamChoice(final ? g.finish : null, this.legacyGenerate), usage, prompt);
        call.res.write(`data: ${body}\n\n`, flushed);
        wrote = true;
      }
      if (final && --call.open === 0) {
        call.done = true;
        let tail = '';
        if (r.includeUsage) tail += `data: ${call.shape.usageChunk(this.usage(call, call.gens.reduce((n, x) => n + x.answer.count, 0)))}\n\n`;
        call.res.end(tail + 'data: [DONE]\n\n', wrote ? undefined : flushed);
        return;
      }
      if (!wrote) flushed?.();
      return;
    }
    if (final && g.finish === 'error') {
      // The unary path raises GenerationError: 500 through generation_error_handler.
      call.done = true;
      for (const other of call.gens) if (other !== g) other.cancel();
      json(call.res, 500, errorBody('Internal server error', 'InternalServerError', 500, null));
      return flushed?.();
    }
    if (final && --call.open === 0) {
      call.done = true;
      const completion = call.gens.reduce((n, x) => n + x.answer.count, 0);
      const text = call.shape.unary(
        this.modelPath,
        call.created,
        this.usage(call, completion),
        call.gens.map((x) => x.answer.unaryChoice(x.finish, this.legacyGenerate)),
        call.promptLogprobs,
        r.returnTokenIds ? r.promptIds : null,
      );
      json(call.res, 200, text);
    }
    flushed?.();
  }
}
