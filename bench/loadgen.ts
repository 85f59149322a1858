// The load generator: its own process (so its CPU never counts against a proxy and a busy proxy
// cannot slow the clock that times it), driven over IPC by the bench. Closed loop: `concurrency`
// slots, each starting its next request when the last ends, until the run's time is up; then it
// waits for the requests in flight. Requests go through undici's dispatch API with one connection
// per slot, the cheapest client Node has, and it reports its own CPU so the bench can show that
// it was not the bottleneck.
import { Pool, type Dispatcher } from 'undici';
import { Histogram, type HistogramData } from './histogram.ts';
import { generatePath, requestBody, type Workload } from './workloads.ts';

export interface RunCommand {
  type: 'run';
  id: number;
  /** One URL (a proxy) or several (direct: requests go round-robin over the workers). */
  urls: string[];
  workload: Workload;
  durationMs: number;
  /** Spread the first request of each slot over this many ms, so streams do not tick in step. */
  rampMs: number;
  ridPrefix: string;
  /** Keep a summary per request (W4), fetched afterwards with a `records` command. */
  record: boolean;
}

export interface RecordsCommand {
  type: 'records';
  id: number;
  rids: string[];
}

/** `halt` ends the current run now (W4 runs until the kills are done); `stop` ends the process. */
export type LoadgenCommand = RunCommand | RecordsCommand | { type: 'halt' } | { type: 'stop' };

export interface RunResult {
  type: 'result';
  id: number;
  wallMs: number;
  requests: number;
  ok: number;
  errors: number;
  /** A few error messages, to say what went wrong. */
  errorSamples: string[];
  /** Sum of the completion_tokens of the final chunks of successful requests (SGLang's meta_info, vLLM's usage). */
  tokens: number;
  bytes: number;
  chunks: number;
  /** Time to first body chunk, µs. */
  ttft: HistogramData;
  /** Time between the ends of consecutive SSE frames of one response, µs (0 within a chunk). */
  gap: HistogramData;
  /** This process's CPU during the run, µs. */
  cpuUs: number;
  /** The counts per URL of `urls` (requests go to them in turn): the paired runs of tracing's cost. */
  byUrl?: UrlCounts[];
}

export interface UrlCounts {
  requests: number;
  ok: number;
  tokens: number;
  bytes: number;
}

/** One request's view from the client (W4). Times are µs on this process's clock. */
export interface RequestRecord {
  rid: string;
  ok: boolean;
  startedUs: number;
  ttftUs: number;
  /** The longest wait the client had for the next chunk, counting the wait for the first. */
  maxWaitUs: number;
  tokens: number;
}

export interface RecordsResult {
  type: 'records';
  id: number;
  records: RequestRecord[];
}

const COMPLETION_KEY = Buffer.from('"completion_tokens":');
const TAIL_BYTES = 1024;
const LF = 0x0a;
const LFLF = Buffer.from('\n\n');
const MAX_ERROR_SAMPLES = 5;

/** completion_tokens of the last chunk in `buf` (SGLang's meta_info, vLLM's usage frame), or -1. */
export function lastCompletionTokens(buf: Buffer): number {
  const k = buf.lastIndexOf(COMPLETION_KEY);
  if (k < 0) return -1;
  let i = k + COMPLETION_KEY.length;
  while (buf[i] === 0x20) i++;
  let n = 0;
  const from = i;
  for (; i < buf.length && buf[i]! >= 0x30 && buf[i]! <= 0x39; i++) n = n * 10 + (buf[i]! - 0x30);
  return i > from ? n : -1;
}

class Run {
  readonly ttft = new Histogram();
  readonly gap = new Histogram();
  requests = 0;
  ok = 0;
  errors = 0;
  errorSamples: string[] = [];
  tokens = 0;
  bytes = 0;
  chunks = 0;
  seq = 0;
  readonly records = new Map<string, RequestRecord>();
  constructor(readonly cmd: RunCommand) {}

  error(message: string): void {
    this.errors++;
    if (this.errorSamples.length < MAX_ERROR_SAMPLES && !this.errorSamples.includes(message)) this.errorSamples.push(message);
  }
}

/** How many SSE frames end in `chunk` (a blank line); `lfAtEnd`: the chunk before ended with a lone LF. */
export function frameEnds(chunk: Buffer, lfAtEnd: boolean): number {
  let ends = 0;
  let from = 0;
  if (lfAtEnd && chunk[0] === LF) {
    ends++;
    from = 1;
  }
  for (let i = chunk.indexOf(LFLF, from); i >= 0; i = chunk.indexOf(LFLF, i + 2)) ends++;
  return ends;
}

/** The chunk ends with an LF that does not end a blank line (the frame's end may be in the next). */
export function endsWithLoneLf(chunk: Buffer): boolean {
  const n = chunk.length;
  return n > 0 && chunk[n - 1] === LF && !(n > 1 && chunk[n - 2] === LF);
}

/** One request as an undici dispatch handler: timestamps every body chunk, keeps only the tail. */
class Call implements Dispatcher.DispatchHandler {
  private status = 0;
  private first = true;
  /** When the last whole frame arrived. */
  private last = 0;
  private frames = 0;
  /** The last chunk ended with a lone LF: a frame ends if the next starts with one. */
  private lfAtEnd = false;
  private maxWait = 0;
  private ttftUs = 0;
  /**
   * The stream's last TAIL_BYTES, however it was chunked: the final frame's completion_tokens
   * sits a few dozen bytes before its end, and a proxy may cut the last bytes into tiny chunks.
   */
  private tail: Buffer | null = null;
  private readonly t0 = performance.now();

  constructor(
    private readonly run: Run,
    private readonly rid: string,
    private readonly done: () => void,
    /** Where this call's own counts go (per URL). */
    private readonly counts: UrlCounts | null = null,
  ) {}

  onRequestStart(): void {}

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    const now = performance.now();
    const r = this.run;
    if (this.first) {
      this.first = false;
      this.ttftUs = (now - this.t0) * 1000;
      this.maxWait = this.ttftUs;
      r.ttft.add(this.ttftUs);
    }
    // Inter-frame gaps: the time between the ends of consecutive SSE frames, as a client reading
    // tokens sees them. Frames that came in one chunk are 0 apart; a chunk that ends no frame adds
    // none. (Per frame, not per chunk: a proxy that writes a read's frames as one chunk, and one
    // that writes them one by one in the same packet, deliver the same tokens at the same times.)
    const ends = frameEnds(chunk, this.lfAtEnd);
    this.lfAtEnd = endsWithLoneLf(chunk);
    for (let k = 0; k < ends; k++) {
      if (this.frames++ > 0) {
        const us = k === 0 ? (now - this.last) * 1000 : 0;
        r.gap.add(us);
        if (us > this.maxWait) this.maxWait = us;
      }
      this.last = now;
    }
    r.bytes += chunk.length;
    r.chunks++;
    if (this.counts) this.counts.bytes += chunk.length;
    // A view when the chunk alone is long enough; a small copy otherwise.
    if (chunk.length >= TAIL_BYTES || this.tail === null) this.tail = chunk.length > TAIL_BYTES ? chunk.subarray(chunk.length - TAIL_BYTES) : chunk;
    else {
      const joined = Buffer.concat([this.tail, chunk]);
      this.tail = joined.length > TAIL_BYTES ? joined.subarray(joined.length - TAIL_BYTES) : joined;
    }
  }

  onResponseEnd(): void {
    const r = this.run;
    let tokens = -1;
    if (this.status === 200 && this.tail) {
      tokens = lastCompletionTokens(this.tail);
    }
    const ok = tokens === r.cmd.workload.newTokens;
    if (ok) {
      r.ok++;
      r.tokens += tokens;
      if (this.counts) {
        this.counts.ok++;
        this.counts.tokens += tokens;
      }
    } else if (this.status !== 200) {
      r.error(`status ${this.status}: ${this.tail?.toString('utf8', 0, 200) ?? ''}`);
    } else {
      r.error(tokens < 0 ? 'no completion_tokens in the last chunk' : `completion_tokens ${tokens} != ${r.cmd.workload.newTokens}`);
      if (tokens > 0) r.tokens += tokens;
    }
    this.finish(ok, Math.max(0, tokens));
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.run.error(`${(err as NodeJS.ErrnoException).code ?? err.name}: ${err.message}`);
    this.finish(false, 0);
  }

  private finish(ok: boolean, tokens: number): void {
    this.tail = null;
    if (this.run.cmd.record) {
      this.run.records.set(this.rid, { rid: this.rid, ok, startedUs: this.t0 * 1000, ttftUs: this.ttftUs, maxWaitUs: this.maxWait, tokens });
    }
    this.done();
  }
}

const pools = new Map<string, Pool>();

function poolFor(url: string, connections: number): Pool {
  const key = `${url}#${connections}`;
  let p = pools.get(key);
  if (!p) {
    p = new Pool(url, { connections, pipelining: 1, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 60_000 });
    pools.set(key, p);
  }
  return p;
}

let runCounter = 0;
let haltCurrent: (() => void) | null = null;

/** End the run in progress: no new requests; it resolves once those in flight are done. */
export function halt(): void {
  haltCurrent?.();
}

export async function execute(cmd: RunCommand): Promise<{ result: RunResult; records: Map<string, RequestRecord> }> {
  const run = new Run(cmd);
  const w = cmd.workload;
  const perUrl = Math.ceil(w.concurrency / cmd.urls.length);
  const targets = cmd.urls.map((u) => poolFor(u, perUrl));
  const path = generatePath(w);
  const byUrl: UrlCounts[] = cmd.urls.map(() => ({ requests: 0, ok: 0, tokens: 0, bytes: 0 }));
  const prefix = `${cmd.ridPrefix}-${++runCounter}`;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let deadline = t0 + cmd.durationMs;
  haltCurrent = () => (deadline = 0);
  let next = 0;

  await new Promise<void>((resolve) => {
    let open = 0;
    const start = () => {
      if (performance.now() >= deadline) {
        if (open === 0) resolve();
        return;
      }
      const seq = run.seq++;
      const rid = `${prefix}-${seq}`;
      const k = next++ % targets.length;
      const pool = targets[k]!;
      open++;
      run.requests++;
      byUrl[k]!.requests++;
      const call = new Call(run, rid, () => {
        open--;
        start();
      }, byUrl[k]!);
      pool.dispatch(
        { path, method: 'POST', headers: { 'content-type': 'application/json' }, body: requestBody(w, seq, rid) },
        call,
      );
    };
    for (let i = 0; i < w.concurrency; i++) {
      const delay = cmd.rampMs > 0 ? (i * cmd.rampMs) / w.concurrency : 0;
      if (delay === 0) start();
      else setTimeout(start, delay);
    }
  });

  haltCurrent = null;
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    records: run.records,
    result: {
      type: 'result',
      id: cmd.id,
      wallMs,
      requests: run.requests,
      ok: run.ok,
      errors: run.errors,
      errorSamples: run.errorSamples,
      tokens: run.tokens,
      bytes: run.bytes,
      chunks: run.chunks,
      ttft: run.ttft.toJSON(),
      gap: run.gap.toJSON(),
      cpuUs: cpu.user + cpu.system,
      byUrl,
    },
  };
}
