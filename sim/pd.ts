// Prefill/decode disaggregation for the simulated SGLang worker, after SGLang's
// python/sglang/srt/disaggregation/ (docs/simulator.md, "P/D roles", cites each piece):
// - a prefill worker runs a bootstrap server on its own port (common/conn.py
//   CommonKVBootstrapServer: GET /health, GET/PUT /route), and, on that port, the sim's stand-in
//   for the KV transfer itself (SGLang moves the KV over Mooncake/NIXL, GPU to GPU; the sim's
//   decode pulls the prefill's one sampled token and its metadata over HTTP: POST /_sim/kv/ROOM);
// - every P/D request carries a bootstrap room; both sides keep the book of the rooms they have
//   seen, and a room that is already active crashes the worker (sglang#40125);
// - the decode's bounded wait for its room's KV and the messages of a failed transfer
//   (decode.py DecodeTransferQueue.pop_transferred, mooncake/conn.py poll).

import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TopEntry } from './model.ts';
import { pyRepr, RequestError } from './request.ts';
import { readBody } from './responses.ts';

export type DisaggregationMode = 'null' | 'prefill' | 'decode';
export const DISAGGREGATION_MODES: readonly DisaggregationMode[] = ['null', 'prefill', 'decode'];

/** SGLang's --disaggregation-bootstrap-port default (server_args.py). */
export const SGLANG_BOOTSTRAP_PORT = 8998;
/** SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT and SGLANG_DISAGGREGATION_WAITING_TIMEOUT: 300 s (environ.py). */
export const SGLANG_PD_TIMEOUT_MS = 300_000;
/** disaggregation/utils.py FAKE_BOOTSTRAP_HOST: a request with this host transfers nothing (warmups). */
export const FAKE_BOOTSTRAP_HOST = '2.2.2.2';
/** Rooms remembered for the duplicate check; past this the oldest are forgotten. */
const MAX_ROOMS_SEEN = 1_000_000;

/** The bootstrap fields of one sample. The room is kept as its decimal text: rooms are 64-bit. */
export interface Bootstrap {
  host: string;
  port: number;
  room: string;
}

/** What the prefill hands the decode for a room: the one token it sampled, and its metadata (MetadataBuffers). */
export interface KvTransfer {
  bootstrap_room: string;
  output_id: number;
  logprob: number;
  top: TopEntry[];
  ids_logprobs: number[];
  cached_tokens: number;
}

/**
 * Python's json.loads reads a 64-bit bootstrap_room exactly, JSON.parse would round it: the
 * rooms (one integer, or a list of them) are turned into strings before the body is parsed.
 */
export function quoteRooms(text: string): string {
  if (!text.includes('"bootstrap_room"')) return text;
  return text
    .replace(/("bootstrap_room"\s*:\s*)(-?\d+)(?=\s*[,}])/g, '$1"$2"')
    .replace(/("bootstrap_room"\s*:\s*)\[([-\d\s,]*)\]/g, (_m, head: string, list: string) => `${head}[${list.split(',').map((x) => (x.trim() === '' ? x : `"${x.trim()}"`)).join(',')}]`);
}

const isRoom = (v: unknown): v is string => typeof v === 'string' && /^\d+$/.test(v);

/**
 * The bootstrap fields of batch item `item` of a parsed body, as io_struct.py GenerateReqInput
 * carries them: one value, or a list with one per prompt. A P/D worker refuses a request without
 * a room, as SGLang does ("Disaggregated request received without bootstrap room id", a 400).
 */
export function bootstrapOf(raw: Record<string, unknown>, item: number, ownHost: string): Bootstrap {
  const pick = (v: unknown): unknown => (Array.isArray(v) ? v[item] : v);
  const room = pick(raw.bootstrap_room);
  if (room === undefined || room === null) throw new RequestError('Disaggregated request received without bootstrap room id');
  if (!isRoom(room)) throw new RequestError(`bootstrap_room must be a non-negative integer, got ${JSON.stringify(room)}`);
  const host = pick(raw.bootstrap_host) ?? (ownHost.includes(':') ? `[${ownHost}]` : ownHost);
  if (typeof host !== 'string' || host === '') throw new RequestError(`bootstrap_host must be a string, got ${JSON.stringify(host)}`);
  const port = pick(raw.bootstrap_port) ?? SGLANG_BOOTSTRAP_PORT;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) throw new RequestError(`bootstrap_port must be a port number, got ${JSON.stringify(port)}`);
  return { host, port, room };
}

/** `KVTransferError(bootstrap_room=R): reason`, as str() of SGLang's exception prints (base/conn.py). */
export const kvTransferError = (room: string, reason: string) => `KVTransferError(bootstrap_room=${room}): ${reason}`;

/** prefill.py PrefillBootstrapQueue.pop_bootstrapped: no decode came for the room in time. */
export function prefillBootstrapFailed(rid: string, room: string, waitedMs: number): string {
  return `Prefill bootstrap failed for request rank=0 req.rid=${pyRepr(rid)} req.bootstrap_room=${room} with exception ${kvTransferError(room, `Request ${room} timed out after ${(waitedMs / 1000).toFixed(1)}s in KVPoll.Bootstrapping`)}`;
}

/** prefill.py process_disagg_prefill_inflight_queue: the decode went away before the KV was sent. */
export function prefillTransferFailed(rid: string, room: string): string {
  return `Prefill transfer failed for request rank=0 req.rid=${pyRepr(rid)} req.bootstrap_room=${room} with exception ${kvTransferError(room, 'Decode instance could be dead, remote session is not alive')}`;
}

/** decode.py DecodeTransferQueue.pop_transferred: the in-band abort of a decode whose KV never came. */
export function decodeTransferFailed(rid: string, room: string, reason: string): string {
  return `Decode transfer failed for request rank=0 decode_req.req.rid=${pyRepr(rid)} decode_req.req.bootstrap_room=${room} with exception ${kvTransferError(room, reason)}`;
}

/** What the worker reports of its rooms (/_sim/stats `pd`): "no room ever seen twice" is checked on it. */
export interface RoomStats {
  mode: DisaggregationMode;
  /** The bootstrap server's port (prefill), else the advertised default. */
  bootstrapPort: number;
  roomsSeen: number;
  roomsActive: number;
  /** Rooms a second request carried (a duplicate while active crashes the worker first). */
  duplicateRooms: string[];
}

/**
 * The rooms one worker has seen. A room that is active again is the duplicate that crashes
 * SGLang's schedulers (sglang#40125: the prefill's KeyError in MooncakeKVSender.poll, the
 * decode's ValueError); one seen before but finished is counted, so a check can still see it.
 */
export class RoomBook {
  private readonly seen = new Set<string>();
  private readonly active = new Set<string>();
  readonly duplicates: string[] = [];
  /** Every room entered, in order (GET /_sim/rooms), and how many were dropped from its start. */
  private readonly log: string[] = [];
  private dropped = 0;

  /** Records `room`; false when it is active already (the caller crashes). */
  enter(room: string): boolean {
    this.log.push(room);
    if (this.log.length > MAX_ROOMS_SEEN) {
      const cut = this.log.length - MAX_ROOMS_SEEN;
      this.log.splice(0, cut);
      this.dropped += cut;
    }
    if (this.seen.has(room)) {
      this.duplicates.push(room);
      if (this.duplicates.length > 1000) this.duplicates.shift();
    } else {
      this.seen.add(room);
      if (this.seen.size > MAX_ROOMS_SEEN) this.seen.delete(this.seen.values().next().value!);
    }
    if (this.active.has(room)) return false;
    this.active.add(room);
    return true;
  }

  leave(room: string): void {
    this.active.delete(room);
  }

  /** The rooms entered from the `since`-th on (counting from this worker's start), and the total. */
  since(since: number): { total: number; rooms: string[] } {
    return { total: this.dropped + this.log.length, rooms: this.log.slice(Math.max(0, since - this.dropped)) };
  }

  get seenCount(): number {
    return this.seen.size;
  }

  get activeCount(): number {
    return this.active.size;
  }
}

// ---- prefill side ---------------------------------------------------------------------------

/** A room on the prefill side: its prefill request and the decode that pulls its KV. */
interface PrefillRoom {
  /** The prefill request's side: set when it arrives. */
  prefill: { decodeArrived: () => void } | null;
  /** The decode's pull, answered once the prefill has its token. */
  pull: ServerResponse | null;
  /** The pull's connection closed before the transfer. */
  pullGone: boolean;
  onPullGone: (() => void) | null;
}

/** The prefill worker's view of one room, for its generation. */
export interface PrefillLeg {
  readonly room: string;
  /** Resolves true once a decode pulls this room, false after `timeoutMs`. */
  awaitDecode(timeoutMs: number): Promise<boolean>;
  /** Sends the KV (the token and its metadata); resolves true once written, false if the decode is gone. */
  transfer(kv: KvTransfer): Promise<boolean>;
  /** The prefill request ended: the room is released. */
  release(): void;
}

/**
 * The prefill worker's bootstrap server (common/conn.py CommonKVBootstrapServer, on
 * --disaggregation-bootstrap-port; it runs in its own thread in SGLang, so a hung scheduler still
 * answers it) and the sim's KV transfer endpoint.
 */
export class BootstrapServer {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly rooms = new Map<string, PrefillRoom>();
  port = 0;

  constructor(
    private readonly host: string,
    private readonly info: { rankPort: () => number; pageSize: number },
  ) {
    this.server = createServer((req, res) => void this.serve(req, res));
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.host, () => {
        this.server.off('error', reject);
        const addr = this.server.address();
        this.port = typeof addr === 'object' && addr ? addr.port : port;
        resolve();
      });
    });
  }

  /** Stops at once, as a crash would: every pull in flight is cut. */
  destroy(): void {
    this.server.close();
    for (const s of this.sockets) s.destroy();
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
  }

  private slot(room: string): PrefillRoom {
    let r = this.rooms.get(room);
    if (!r) {
      r = { prefill: null, pull: null, pullGone: false, onPullGone: null };
      this.rooms.set(room, r);
    }
    return r;
  }

  /** The prefill request of `room` arrived (the caller has checked the room is not active). */
  leg(room: string): PrefillLeg {
    const r = this.slot(room);
    let arrived: (() => void) | null = null;
    r.prefill = { decodeArrived: () => arrived?.() };
    return {
      room,
      awaitDecode: (timeoutMs) =>
        new Promise<boolean>((resolve) => {
          if (r.pull !== null) return resolve(true);
          const timer = setTimeout(() => resolve(false), timeoutMs);
          arrived = () => {
            clearTimeout(timer);
            resolve(true);
          };
        }),
      transfer: (kv) =>
        new Promise<boolean>((resolve) => {
          const pull = r.pull;
          if (pull === null || r.pullGone || pull.destroyed) return resolve(false);
          const text = JSON.stringify(kv);
          r.onPullGone = () => resolve(false);
          pull.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
          pull.end(text, () => {
            r.onPullGone = null;
            resolve(true);
          });
        }),
      release: () => {
        if (this.rooms.get(room) === r) this.rooms.delete(room);
        // Ended before its transfer (aborted, its client gone): the prefill reports the room
        // failed to its decode, which records "Failed to get kvcache from prefill instance, it
        // might be dead" (mooncake/conn.py, the decode's status listener on KVPoll.Failed).
        const pull = r.pull;
        if (pull !== null && !r.pullGone && !pull.headersSent && !pull.destroyed) {
          const reason = 'Failed to get kvcache from prefill instance, it might be dead';
          pull.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(reason) }).end(reason);
        }
      },
    };
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const text = (status: number, body: string): void => void res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
    if (url.pathname === '/health' && req.method === 'GET') return text(200, 'OK');
    if (url.pathname === '/route') {
      if (req.method === 'PUT') {
        await readBody(req).catch(() => '');
        return text(200, 'OK');
      }
      if (req.method !== 'GET') return text(405, 'Method not allowed');
      const q = ['prefill_dp_rank', 'prefill_cp_rank', 'target_tp_rank', 'target_pp_rank'].map((k) => url.searchParams.get(k));
      if (q.some((v) => !v)) return text(400, 'Missing inputs for bootstrap server.');
      const body = q.every((v) => Number(v) === -1)
        ? { attn_tp_size: 1, attn_cp_size: 1, dp_size: 1, pp_size: 1, page_size: this.info.pageSize, kv_cache_dtype: 'auto', follow_bootstrap_room: true }
        : q.every((v) => Number(v) === 0)
          ? { rank_ip: this.host, rank_port: this.info.rankPort() }
          : null;
      if (body === null) return text(404, `Bootstrap info not found for dp_rank=${q[0]} cp_rank=${q[1]} tp_rank=${q[2]} pp_rank=${q[3]}`);
      const s = JSON.stringify(body);
      return void res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(s) }).end(s);
    }
    const m = /^\/_sim\/kv\/(\d+)$/.exec(url.pathname);
    if (m && req.method === 'POST') {
      await readBody(req).catch(() => '');
      const room = m[1]!;
      const r = this.slot(room);
      if (r.pull !== null && !r.pullGone) return text(409, `bootstrap_room ${room} already has a decode`);
      r.pull = res;
      r.pullGone = false;
      res.on('close', () => {
        if (res.writableFinished) return;
        r.pullGone = true;
        r.onPullGone?.();
        // A decode that gave up before any prefill came leaves nothing behind.
        if (r.prefill === null && this.rooms.get(room) === r) this.rooms.delete(room);
      });
      r.prefill?.decodeArrived();
      return;
    }
    text(404, 'Not Found');
  }
}

// ---- decode side ----------------------------------------------------------------------------

export type PullResult = { ok: true; kv: KvTransfer } | { ok: false; reason: string };

/** The decode's pull of its room's KV; `cancel` gives it up (the decode request ended). */
export interface KvPull {
  result: Promise<PullResult>;
  cancel(): void;
}

/**
 * Pulls `b.room`'s KV from the prefill at `b.host:b.port`, waiting at most `timeoutMs`
 * (SGLANG_DISAGGREGATION_WAITING_TIMEOUT). A prefill that dies (its connection refused or cut)
 * fails the room as SGLang's heartbeat does ("Failed to get kvcache from prefill instance, it
 * might be dead"); one that never sends times out "in KVPoll.WaitingForInput".
 *
 * The address is written as SGLang's decode writes it: `bootstrap_addr = f"{bootstrap_host}:
 * {bootstrap_port}"` (decode.py DecodePreallocQueue, before `NetworkAddress`), then
 * `f"http://{bootstrap_addr}/route?..."` (common/conn.py CommonKVReceiver), so an IPv6 host must
 * come in brackets, as the gateway and mini_lb send it; a bare one is no address, and the room
 * fails at once as the receiver fails it ("Could not fetch prefill parallel info from
 * bootstrap_addr: ...", mooncake/conn.py MooncakeKVReceiver).
 */
export function pullKv(b: Bootstrap, rid: string, timeoutMs: number): KvPull {
  const addr = `${b.host}:${b.port}`;
  let url: URL;
  try {
    url = new URL(`http://${addr}/_sim/kv/${b.room}`);
  } catch {
    return { result: Promise.resolve({ ok: false, reason: `Could not fetch prefill parallel info from bootstrap_addr: ${addr}` }), cancel: () => undefined };
  }
  let settle!: (r: PullResult) => void;
  const result = new Promise<PullResult>((resolve) => (settle = resolve));
  let done = false;
  const finish = (r: PullResult) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    settle(r);
  };
  const started = performance.now();
  const dead = 'Failed to get kvcache from prefill instance, it might be dead';
  const body = JSON.stringify({ rid });
  const req = httpRequest(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => (text += c));
    res.on('end', () => {
      if (res.statusCode !== 200) return finish({ ok: false, reason: text || `bootstrap server answered ${res.statusCode}` });
      try {
        const kv = JSON.parse(text) as KvTransfer;
        // decode.py _commit_transfer_to_req checks the metadata's room against the request's.
        if (kv.bootstrap_room !== b.room) return finish({ ok: false, reason: 'Metadata corruption detected - bootstrap_room mismatch' });
        finish({ ok: true, kv });
      } catch {
        finish({ ok: false, reason: dead });
      }
    });
    res.on('error', () => finish({ ok: false, reason: dead }));
    res.on('close', () => finish({ ok: false, reason: dead }));
  });
  req.on('error', () => finish({ ok: false, reason: dead }));
  const timer = setTimeout(() => {
    finish({ ok: false, reason: `Request ${b.room} timed out after ${((performance.now() - started) / 1000).toFixed(1)}s in KVPoll.WaitingForInput` });
    req.destroy();
  }, timeoutMs);
  req.end(body);
  return {
    result,
    cancel: () => {
      finish({ ok: false, reason: 'Aborted by AbortReq.' });
      req.destroy();
    },
  };
}
