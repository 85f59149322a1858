// Preloaded into the Node proxies the bench starts (`node --expose-gc --import tsx --import
// bench/proxy-probe.ts bin/baton.js router ...`; the bare proxy too), for what only the process
// itself can tell:
// - W3: the memory it retains, after a full GC, so that garbage not yet collected does not count
//   as memory per stream;
// - W4 (Baton): the time of a migration, from inside the router without the router knowing:
//   the diagnostics channels of Baton's upstream client (router/upstream/h1.ts) say, with a µs
//   clock, when an upstream request failed (the dead worker's connection closed under it), when
//   the continuation's request was written to the survivor's socket, and when the survivor's
//   first chunk came back.
// The channels are subscribed only while W4 runs: a subscriber on the per-chunk channel costs
// a little on every chunk, and the other workloads measure Baton's CPU.
import diagnosticsChannel from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { parseUpstreamRid } from '../router/migration/rid.ts';

/** One continuation, on the router's clock (µs). */
export interface GapRecord {
  /** The continuation's upstream rid (`<request id>~m<n>~<nonce>`, see router/migration/rid.ts; vLLM's request_id has the same shape). */
  rid: string;
  /** The failed attempt's request ended with an error (its connection closed). */
  failedUs: number | null;
  /** The continuation was handed to the upstream client (the router's loop is done with it; a connection may still be needed). */
  createdUs: number | null;
  /** The continuation's request headers were written to the survivor's socket (the body follows in the same call). */
  sentUs: number;
  /** The survivor's first body chunk: its first token (the simulated worker sends headers at once). */
  firstChunkUs: number | null;
}

export type ProbeCommand = { type: 'probe'; on: boolean } | { type: 'mem' } | { type: 'profile'; on: boolean; file?: string; heap?: boolean };
export type ProbeReply = { type: 'probe-records'; records: GapRecord[] };
/** `profile` off: where the CPU profile was written (null: no profile was running, or it failed). */
export type ProfileReply = { type: 'profile'; file: string | null; error?: string };

/** Memory after a full GC (when the process runs with --expose-gc), bytes. */
export interface MemReply {
  type: 'mem';
  gc: boolean;
  rss: number;
  /** V8 heap in use + memory outside it held by JS objects (buffers, ArrayBuffers). */
  retained: number;
}

export function memReply(): MemReply {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  const m = process.memoryUsage();
  return { type: 'mem', gc: gc !== undefined, rss: m.rss, retained: m.heapUsed + m.external };
}

/** What the client's channels carry (router/upstream/h1.ts): the exchange, whose body is the request's. */
interface Exchange {
  body?: unknown;
}

/** Where an upstream body names its attempt: SGLang's `rid`, vLLM's `request_id` (ASCII: as long in bytes as in characters). */
const RID_KEYS = ['"rid":"', '"request_id":"'];

/**
 * The upstream rid in a request body (SGLang's `rid` or vLLM's `request_id`), or null. Baton
 * writes its keys compact and its rids plain ASCII (router/migration/rid.ts), so the key and its
 * value appear exactly as written here; a vLLM abort's `request_ids` list does not match. The
 * last occurrence: attempt 0's SGLang body is the client's bytes with Baton's rid appended (the
 * worker, like any JSON reader, keeps the last of duplicate keys), after any rid of the client's.
 * A string body (a continuation's) is searched as it is, not copied to a buffer first: this runs
 * inside the migration window it measures.
 */
export function ridOf(body: unknown): string | null {
  if (typeof body !== 'string' && !Buffer.isBuffer(body)) return null;
  for (const key of RID_KEYS) {
    const k = body.lastIndexOf(key);
    if (k < 0) continue;
    const from = k + key.length;
    const end = body.indexOf('"', from);
    if (end < 0) return null;
    return typeof body === 'string' ? body.slice(from, end) : body.toString('utf8', from, end);
  }
  return null;
}

/** The attempt an upstream rid belongs to, as a key: `<request id> <attempt>`; null for other rids. */
export function attemptKey(rid: string): string | null {
  const p = parseUpstreamRid(rid);
  return p === null ? null : `${p.id}\u0000${p.attempt}`;
}

/** The key of the attempt a continuation follows (attempt n follows attempt n - 1); null for attempt 0. */
export function previousAttemptKey(rid: string): string | null {
  const p = parseUpstreamRid(rid);
  return p === null || p.attempt === 0 ? null : `${p.id}\u0000${p.attempt - 1}`;
}


const nowUs = () => performance.now() * 1000;

let failures = new Map<string, number>();
let records: GapRecord[] = [];
let waiting = new WeakMap<object, GapRecord>();
let created = new WeakMap<object, number>();

// Each handler reads the clock first: what it does after (finding the rid in a body, which
// copies a string body) runs inside the router's window and must not count in it.
function onError(msg: unknown): void {
  const t = nowUs();
  const rid = ridOf((msg as { exchange: Exchange }).exchange.body);
  const key = rid === null ? null : attemptKey(rid);
  if (key !== null && !failures.has(key)) failures.set(key, t);
}

function onCreate(msg: unknown): void {
  created.set((msg as { exchange: object }).exchange, nowUs());
}

function onSend(msg: unknown): void {
  const t = nowUs();
  const request = (msg as { exchange: Exchange }).exchange;
  const rid = ridOf(request.body);
  const prev = rid === null ? null : previousAttemptKey(rid);
  if (rid === null || prev === null) return;
  const rec: GapRecord = {
    rid,
    failedUs: failures.get(prev) ?? null,
    createdUs: created.get(request) ?? null,
    sentUs: t,
    firstChunkUs: null,
  };
  records.push(rec);
  waiting.set(request, rec);
}

function onChunk(msg: unknown): void {
  const request = (msg as { exchange: object }).exchange;
  const rec = waiting.get(request);
  if (!rec) return;
  rec.firstChunkUs = nowUs();
  waiting.delete(request);
}

const CHANNELS: [string, (msg: unknown) => void][] = [
  ['baton:h1:create', onCreate],
  ['baton:h1:error', onError],
  ['baton:h1:send', onSend],
  ['baton:h1:data', onChunk],
];

// A CPU profile of a stretch of the process's life (bench/pair.ts --profile): the V8 sampling
// profiler that `node --cpu-prof` runs, started and stopped on command, so that the profile holds
// the measured runs and not the start-up and warm-up. Written as a .cpuprofile (Chrome DevTools,
// bench/profile-top.ts).
let profiler: Session | null = null;

let heapProfile = false;

function profile(on: boolean, file: string | undefined, heap: boolean): void {
  if (on) {
    if (profiler) return;
    profiler = new Session();
    profiler.connect();
    heapProfile = heap;
    if (heap) {
      // Allocations, sampled every 16 KiB on average, counting what the GC has collected since:
      // where the garbage comes from, not only what is still alive.
      profiler.post('HeapProfiler.enable');
      profiler.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
      return;
    }
    profiler.post('Profiler.enable');
    // 100 µs, a tenth of --cpu-prof's default interval: a W1 request is ~300-500 µs of CPU.
    profiler.post('Profiler.setSamplingInterval', { interval: 100 });
    profiler.post('Profiler.start');
    return;
  }
  const s = profiler;
  profiler = null;
  if (!s) {
    process.send!({ type: 'profile', file: null } satisfies ProfileReply);
    return;
  }
  s.post(heapProfile ? 'HeapProfiler.stopSampling' : 'Profiler.stop', (err, res) => {
    let reply: ProfileReply;
    try {
      if (err) throw err;
      if (!file) throw new Error('no file given');
      writeFileSync(file, JSON.stringify((res as { profile: unknown }).profile));
      reply = { type: 'profile', file };
    } catch (e) {
      reply = { type: 'profile', file: null, error: (e as Error).message };
    }
    s.disconnect();
    process.send!(reply);
  });
}

if (process.send) {
  process.on('message', (msg: ProbeCommand) => {
    if (msg?.type === 'mem') {
      process.send!(memReply());
      return;
    }
    if (msg?.type === 'profile') {
      profile(msg.on, msg.file, msg.heap === true);
      return;
    }
    if (msg?.type !== 'probe') return;
    if (msg.on) {
      failures = new Map();
      records = [];
      waiting = new WeakMap();
      created = new WeakMap();
      for (const [name, fn] of CHANNELS) diagnosticsChannel.subscribe(name, fn);
      return;
    }
    for (const [name, fn] of CHANNELS) diagnosticsChannel.unsubscribe(name, fn);
    const reply: ProbeReply = { type: 'probe-records', records };
    process.send!(reply);
  });
  // The bench is gone (even killed): so is this router.
  process.on('disconnect', () => process.exit(0));
}
