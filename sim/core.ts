// The simulated worker's core, shared by every wire format: the HTTP server and its keep-alive,
// the `/_sim/*` control endpoints, faults (crash, hang, reset, reject, slow, clear, and the
// format's engine-level ones), the running generations and their bookkeeping, the prefix cache
// and the token pacing a generation asks for. A format plug-in (worker.ts for SGLang,
// vllm/worker.ts for vLLM) brings its request parsing, its answer and frame rendering, its error
// shapes and its endpoints; it knows nothing of sockets or faults.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { FaultSchedule, parseFault, type Fault, type FaultKind } from './faults.ts';
import { PrefixCache } from './prefix-cache.ts';
import type { RoomStats } from './pd.ts';
import { readBody } from './responses.ts';
import type { Ending, ScheduledGeneration, SchedulingHost } from './scheduling.ts';

export interface SimStats {
  /** Generations started (a batch or n > 1 request counts each sample). */
  requestsStarted: number;
  requestsFinished: number;
  /** Ended by an abort endpoint or by an `abort` fault. */
  requestsAborted: number;
  /** Ended because the client went away (closed or reset its connection). */
  clientDisconnects: number;
  tokensGenerated: number;
  inFlight: number;
  /** Every request id seen by the generate endpoint, oldest first (the last 10 000). */
  rids: string[];
  /**
   * The decoding constraints generate requests carried (SGLang's grammar fields, vLLM's
   * structured_outputs), by request id, the last 1 000: the simulator records them but cannot
   * enforce a grammar.
   */
  constraints: { rid: string; fields: Record<string, unknown> }[];
  tokenIntervalMs: number;
  hung: boolean;
  rejecting: boolean;
  crashed: boolean;
  pendingFaults: number;
  /** A P/D worker's role and rooms (SGLang workers started with --disaggregation-mode). */
  pd?: RoomStats;
}

export interface SimWorker {
  url: string;
  port: number;
  fault(f: Fault): void;
  stats(): SimStats;
  close(): Promise<void>;
}

/** The options every format's worker takes. */
export interface CoreOptions {
  host?: string;
  /** 0 (default): a free port. */
  port?: number;
  /** Pause between tokens of one stream, ms; 0 = as fast as possible. Default 0. */
  tokenIntervalMs?: number;
  /** Prefill cost per uncached prompt token, µs. Default 20. */
  prefillUsPerToken?: number;
  /**
   * SGLang's --max-total-tokens: the KV pool, and so the prefix cache's capacity in tokens
   * (advertised as max_total_num_tokens). Default 1 << 20.
   */
  maxTotalTokens?: number;
  /**
   * Prefills run one after another, as SGLang's scheduler runs one prefill batch at a time, so a
   * worker's time to first token grows with the uncached tokens queued before it. Default false:
   * prefills overlap (each waits only its own cost).
   */
  serialPrefill?: boolean;
  /** EOS ranks first in one context state out of this many (0 = never). Default 64. */
  eosEvery?: number;
  /**
   * A Hugging Face model directory (tokenizer.json, tokenizer_config.json): the model generates ids
   * of that vocabulary (its non-special tokens, ending on its EOS). Excludes `vocabSize`.
   */
  tokenizer?: string;
  /** The vocabulary size without a tokenizer (ids 3 .. N − 1 ranked, EOS 2; at least 512). Default 32000. */
  vocabSize?: number;
  /** A script file (sim/script.ts): prompts its rules match get the rules' texts. */
  script?: string;
  /** The model path; also the served model name. Default "baton-sim". */
  modelPath?: string;
  /** The weight-version label. Default "default". Model path and version salt the model. */
  weightVersion?: string;
  /**
   * true (default): a `crash` fault destroys every socket and stops listening, leaving the host
   * process alive. false: the process kills itself with SIGKILL, as a real crash would.
   */
  inProcess?: boolean;
}

/** What a wire format brings to the core. */
export interface WireFormat {
  /** The fault kinds `/_sim/fault` accepts. */
  readonly faultKinds: readonly FaultKind[];
  /** Serves one request the core did not (not a control request; the worker is up and awake). */
  route(path: string, method: string, req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** An error thrown while serving, before any header went out. */
  internalError(res: ServerResponse, message: string): void;
  /** A `/_sim/fault` body that is not a fault. */
  controlError(res: ServerResponse, message: string): void;
  /** A fault the core does not apply itself (`abort`, and `error` where the format has it). */
  engineFault(kind: FaultKind): void;
  /** A generation left the running set (the core has counted it). */
  ended(g: ScheduledGeneration, how: Ending): void;
  /** Starts what the format serves besides the main port (a P/D prefill's bootstrap server). */
  listen?(): Promise<void>;
  /** Stops it (the worker closes). */
  close?(): Promise<void>;
  /** The worker crashed: whatever else the format serves dies with it. */
  crashed?(): void;
  /** The format's own counts in /_sim/stats. */
  extraStats?(): Partial<SimStats>;
  /** A P/D worker's rooms in the order they came, from the `since`-th on (GET /_sim/rooms?since=K). */
  rooms?(since: number): { total: number; rooms: string[] } | null;
}

export const MAX_TOTAL_TOKENS = 1 << 20;
const MAX_RIDS = 10_000;
const MAX_SALTED_CACHES = 64;

export function json(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

const NOT_FOUND = JSON.stringify({ detail: 'Not Found' });
const NOT_ALLOWED = JSON.stringify({ detail: 'Method Not Allowed' });

/** FastAPI's 404 for a path no route serves. */
export function notFound(res: ServerResponse): void {
  json(res, 404, NOT_FOUND);
}

/** true if `method` is one of `methods`; else FastAPI's 405 has been sent. */
export function allow(res: ServerResponse, method: string, ...methods: string[]): boolean {
  if (methods.includes(method)) return true;
  json(res, 405, NOT_ALLOWED);
  return false;
}

/** A worker of one format on the core, listening; `pageSize` is its prefix cache's page (block) size. */
export async function startSimWorker(opts: CoreOptions, pageSize: number, plugIn: (core: WorkerCore) => WireFormat): Promise<SimWorker> {
  const core = new WorkerCore(opts, pageSize);
  const format = plugIn(core);
  core.serve(format);
  await core.listen(opts.host ?? '127.0.0.1', opts.port ?? 0);
  try {
    await format.listen?.();
  } catch (err) {
    await core.close();
    throw err;
  }
  return core.handle();
}

export class WorkerCore implements SchedulingHost {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly controlSockets = new Set<Socket>();
  /** Every running generation (each sample or choice of every call). */
  readonly running = new Set<ScheduledGeneration>();
  /** The prefix cache of unsalted prompts. */
  readonly cache: PrefixCache;
  private readonly salted = new Map<string, PrefixCache>();
  private readonly pageSize: number;
  readonly prefillUsPerToken: number;
  private readonly serialPrefill: boolean;
  /** When the last queued prefill ends (performance.now() ms), with --serial-prefill. */
  private prefillFreeAt = 0;
  /** The prefix cache's capacity in tokens (max_total_num_tokens). */
  readonly maxTotalTokens: number;
  private readonly baseInterval: number;
  tokenIntervalMs: number;
  private readonly schedule = new FaultSchedule();
  private hung = false;
  rejecting = false;
  private crashed = false;
  closing = false;
  /** Work frozen by `hang`, resumed by `clear`. */
  private readonly parked = new Set<() => void>();
  private readonly held: (() => void)[] = [];
  queued = 0;
  readonly counts = { requestsStarted: 0, requestsFinished: 0, requestsAborted: 0, clientDisconnects: 0, tokensGenerated: 0 };
  private readonly rids: string[] = [];
  private readonly constraints: { rid: string; fields: Record<string, unknown> }[] = [];
  private format!: WireFormat;
  url = '';
  port = 0;

  constructor(
    private readonly opts: CoreOptions,
    pageSize: number,
  ) {
    this.pageSize = pageSize;
    this.maxTotalTokens = opts.maxTotalTokens ?? MAX_TOTAL_TOKENS;
    if (!Number.isInteger(this.maxTotalTokens) || this.maxTotalTokens < 1) throw new Error(`max total tokens must be a positive integer, got ${this.maxTotalTokens}`);
    this.cache = new PrefixCache(this.maxTotalTokens, pageSize);
    this.prefillUsPerToken = opts.prefillUsPerToken ?? 20;
    this.serialPrefill = opts.serialPrefill ?? false;
    this.baseInterval = opts.tokenIntervalMs ?? 0;
    this.tokenIntervalMs = this.baseInterval;
    this.server = createServer((req, res) => this.onRequest(req, res));
    // uvicorn's keep-alive timeout as SGLang and vLLM launch it (SGLang's http_server.py
    // launch_server: `uvicorn.run(..., timeout_keep_alive=5)`; vLLM's default
    // VLLM_HTTP_TIMEOUT_KEEP_ALIVE=5), so idle pooled connections close alike.
    this.server.keepAliveTimeout = 5000;
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** Plugs the format in; once, before `listen`. */
  serve(format: WireFormat): void {
    this.format = format;
  }

  /** Up: neither rejecting (the `reject` fault) nor shutting down. */
  get healthy(): boolean {
    return !this.rejecting && !this.closing;
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
    for (const g of [...this.running]) g.stop();
    this.parked.clear();
    for (const s of this.sockets) s.destroy();
    await Promise.all([new Promise<void>((resolve) => this.server.close(() => resolve())), this.format.close?.()]);
  }

  /** The handle `startWorker` / `startVllmWorker` give out. */
  handle(): SimWorker {
    return { url: this.url, port: this.port, fault: (f) => this.fault(f), stats: () => this.stats(), close: () => this.close() };
  }

  stats(): SimStats {
    return {
      ...this.counts,
      inFlight: this.running.size,
      rids: [...this.rids],
      constraints: [...this.constraints],
      tokenIntervalMs: this.tokenIntervalMs,
      hung: this.hung,
      rejecting: this.rejecting,
      crashed: this.crashed,
      pendingFaults: this.schedule.size,
      ...this.format.extraStats?.(),
    };
  }

  prefillDelay(ms: number): number {
    if (!this.serialPrefill) return ms;
    const now = performance.now();
    const start = Math.max(now, this.prefillFreeAt);
    this.prefillFreeAt = start + ms;
    return this.prefillFreeAt - now;
  }

  /** A prefix cache per cache_salt: a salted prompt never hits another salt's blocks (null: the shared cache). */
  cacheFor(salt: string | null): PrefixCache {
    if (salt === null) return this.cache;
    let c = this.salted.get(salt);
    if (!c) {
      c = new PrefixCache(Math.floor(this.maxTotalTokens / MAX_SALTED_CACHES), this.pageSize);
      if (this.salted.size >= MAX_SALTED_CACHES) this.salted.delete(this.salted.keys().next().value!);
      this.salted.set(salt, c);
    }
    return c;
  }

  // ---- running generations ------------------------------------------------------------------

  /** A request id the generate endpoint accepted (stats().rids). */
  noteRid(rid: string): void {
    this.rids.push(rid);
    if (this.rids.length > MAX_RIDS) this.rids.splice(0, this.rids.length - MAX_RIDS);
  }

  /** The constraint fields a generate request carried (stats().constraints). */
  noteConstraint(rid: string, fields: Record<string, unknown> | null): void {
    if (fields === null) return;
    this.constraints.push({ rid, fields });
    if (this.constraints.length > 1000) this.constraints.shift();
  }

  /** A generation joins the running set. */
  started(g: ScheduledGeneration): void {
    this.running.add(g);
    this.counts.requestsStarted++;
  }

  generationEnded(g: ScheduledGeneration, how: Ending): void {
    this.running.delete(g);
    if (how === 'finished') this.counts.requestsFinished++;
    else if (how === 'aborted') this.counts.requestsAborted++;
    else if (how === 'disconnected') this.counts.clientDisconnects++;
    this.format.ended(g, how);
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
        if (this.opts.inProcess === false) process.kill(process.pid, 'SIGKILL');
        this.crashed = true;
        for (const g of [...this.running]) g.stop();
        this.parked.clear();
        this.held.length = 0;
        this.server.close();
        for (const s of this.sockets) s.destroy();
        this.format.crashed?.();
        return;
      case 'hang':
        this.hung = true;
        return;
      case 'reset':
        for (const g of [...this.running]) g.stop();
        for (const s of this.sockets) if (!s.destroyed && !this.controlSockets.has(s)) s.resetAndDestroy();
        return;
      case 'reject':
        this.rejecting = true;
        return;
      case 'slow':
        this.tokenIntervalMs = f.intervalMs!;
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
      default:
        this.format.engineFault(f.kind);
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
    void this.format.route(path, req.method ?? 'GET', req, res).catch((err: unknown) => {
      if (!res.headersSent) this.format.internalError(res, (err as Error).message ?? String(err));
      else res.destroy();
    });
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
    if (path === '/_sim/stats' && req.method === 'GET') return json(res, 200, JSON.stringify(this.stats()));
    if (path === '/_sim/rooms' && req.method === 'GET') {
      const since = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('since') ?? '0');
      const rooms = this.format.rooms?.(Number.isInteger(since) && since >= 0 ? since : 0) ?? null;
      if (rooms === null) return notFound(res);
      return json(res, 200, JSON.stringify(rooms));
    }
    if (path === '/_sim/cache_match' && req.method === 'POST') {
      // The oracle's view (the control API): how much of these tokens this worker's cache holds
      // now, read without touching its LRU order.
      let ids: unknown;
      try {
        ids = (JSON.parse(await readBody(req)) as { input_ids?: unknown }).input_ids;
      } catch (err) {
        return this.format.controlError(res, (err as Error).message);
      }
      if (!Array.isArray(ids) || !ids.every((t) => Number.isInteger(t))) return this.format.controlError(res, 'input_ids must be a list of integers');
      return json(res, 200, JSON.stringify({ cached_tokens: this.cache.peek(ids as number[]), cache_tokens: this.cache.tokens, capacity_tokens: this.maxTotalTokens }));
    }
    if (path === '/_sim/fault' && req.method === 'POST') {
      let fault: Fault;
      try {
        fault = parseFault(JSON.parse(await readBody(req)), this.format.faultKinds);
      } catch (err) {
        return this.format.controlError(res, (err as Error).message);
      }
      // Answer first: a `crash` or `reset` applied now would otherwise eat its own reply.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, fault }), () => this.fault(fault));
      return;
    }
    notFound(res);
  }
}
