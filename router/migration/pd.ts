// Prefill/decode disaggregation (docs/pd.md): an attempt on a decode worker has a second leg on a
// prefill server. Both get the same body with `bootstrap_host`, `bootstrap_port` and a fresh
// `bootstrap_room` (sgl-model-gateway pd_router.rs `inject_bootstrap_into_value`); the decode
// leg pulls the prompt's KV from the prefill server's bootstrap server and streams the answer,
// and the prefill leg answers with its one token only after that transfer
// (python/sglang/srt/disaggregation/prefill.py). What fails before the transfer is the prefill
// leg's: a decode worker waiting for KV that never comes is innocent. The attempt's pair is a
// dispatch of the loop (dispatch-pd.ts); here are its pieces: rooms, the prefill leg, and the
// decisions of whose failure it was.
import { randomFillSync } from 'node:crypto';
import { UpstreamCall, type AttemptResult } from '../upstream/attempt.ts';
import { StallWatch } from '../upstream/stall-watch.ts';
import type { Worker } from '../pool/worker.ts';
import type { WaitingEvidence } from '../pool/evidence.ts';
import type { JsonObject } from '../core/types.ts';
import { classifyTransportFact, type Failure, type Verdict } from '../core/failure.ts';

// --- Rooms ------------------------------------------------------------------------------------

const ROOM_MASK = 0x7fff_ffff_ffff_ffffn;
/**
 * Rooms kept after their attempt ended: the router has let go (closed both legs, sent
 * `/abort_request`), but a worker holds the room until the abort reaches its scheduler.
 */
const RECENT_KEPT = 4096;

/**
 * Fresh bootstrap rooms. A room active twice crashes both SGLang schedulers (sglang #40125), so
 * no two live attempts share one: random 63-bit as the gateway draws them (pd_types.rs
 * `generate_room_id`: `rand::random::<u64>() & i64::MAX`, matching Python's
 * `random.randint(0, 2**63 - 1)`), which keeps rooms of several router replicas apart (two of a
 * million rooms collide with odds ~1e-7), plus this router's own check: a draw that is the room of
 * an attempt in flight, or of one of the last RECENT_KEPT that ended, is drawn again. What it
 * keeps is bounded by the attempts in flight plus that ring, not by the rooms ever issued.
 */
export class RoomIssuer {
  /** Rooms of attempts in flight (issued, not yet released). */
  private readonly live = new Set<bigint>();
  /** Rooms released lately: `ring` in release order, `recent` to look them up. */
  private readonly recent = new Set<bigint>();
  private readonly ring: (bigint | undefined)[];
  private next = 0;
  private readonly buf = Buffer.alloc(8);
  /** Draws that hit a room in flight or lately released (redrawn): for tests and metrics. */
  redraws = 0;

  constructor(
    private readonly random: (buf: Buffer) => void = (b) => void randomFillSync(b),
    recentKept = RECENT_KEPT,
  ) {
    this.ring = new Array<bigint | undefined>(recentKept);
  }

  issue(): bigint {
    for (;;) {
      this.random(this.buf);
      const room = this.buf.readBigUInt64BE(0) & ROOM_MASK;
      if (this.live.has(room) || this.recent.has(room)) {
        this.redraws++;
        continue;
      }
      this.live.add(room);
      return room;
    }
  }

  /** The attempt that held `room` ended: it joins the ring of lately released rooms. */
  release(room: bigint): void {
    if (!this.live.delete(room) || this.ring.length === 0) return;
    const old = this.ring[this.next];
    if (old !== undefined) this.recent.delete(old);
    this.ring[this.next] = room;
    this.recent.add(room);
    this.next = (this.next + 1) % this.ring.length;
  }

  /** Rooms of attempts in flight. */
  get inFlight(): number {
    return this.live.size;
  }

  /** Rooms held for the check: those in flight plus the ring. */
  get remembered(): number {
    return this.live.size + this.recent.size;
  }
}

/** The router's rooms: one issuer per process, shared by every request. */
export const ROOMS = new RoomIssuer();

/**
 * The body with the bootstrap fields appended as its last keys (Python's json keeps the last of
 * duplicate keys, so a client's own bootstrap fields are overridden, as the gateway's insert
 * does). The room is written as its decimal digits: it may exceed 2^53, and SGLang reads it as
 * a Python int.
 */
export function withBootstrap(body: string | Buffer, host: string, port: number | null, room: bigint): string | Buffer {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  const close = text.lastIndexOf('}');
  if (close < 0) throw new Error('attempt body is not a JSON object');
  let before = close - 1;
  while (before >= 0 && /\s/.test(text[before]!)) before--;
  const sep = text[before] === '{' ? '' : ',';
  const fields = `${sep}"bootstrap_host":${JSON.stringify(host)},"bootstrap_port":${port === null ? 'null' : String(port)},"bootstrap_room":${room.toString()}`;
  const out = text.slice(0, close) + fields + text.slice(close);
  return typeof body === 'string' ? out : Buffer.from(out);
}

/**
 * The host a decode worker reaches a prefill server's bootstrap server on: its URL's host, an
 * IPv6 address in brackets. The gateway sends `url::Url::host_str()` of the prefill's URL
 * (sgl-model-gateway core/worker_builder.rs `build`: `bootstrap_host`), which keeps an IPv6
 * host's brackets, and mini_lb sends `maybe_wrap_ipv6_address(urlparse(url).hostname)`
 * (disaggregation/mini_lb.py); SGLang's decode builds `f"{bootstrap_host}:{bootstrap_port}"`
 * (decode.py, before `NetworkAddress`), so a bare IPv6 host is no address there. The WHATWG
 * hostname keeps the brackets too.
 */
export function bootstrapHost(w: Worker): string {
  return new URL(w.url).hostname;
}

// --- The prefill leg --------------------------------------------------------------------------

/** The prefill leg waits for the decode leg's transfer; only the P/D deadline bounds it. */
const NO_STALLS = new StallWatch(0, 0);

export type PrefillState = 'waiting' | 'done' | 'failed';

/**
 * One attempt's prefill leg: the same generate body on the prefill server, read to its end. Its
 * answer is one frame (the first token, `finish_reason {"type":"length","length":0}`) or a
 * failure; `inputLogprobs` keeps the prompt's logprobs it computed (the gateway puts them in front
 * of the decode's: pd_router.rs `merge_logprobs_in_json`).
 */
export class PrefillLeg {
  state: PrefillState = 'waiting';
  failure: Failure | null = null;
  inputLogprobs: unknown[] | null = null;
  /** The meta_info of its answer (the prompt's logprobs the decode attempt merges: docs/pd.md). */
  answerMeta: JsonObject | null = null;
  readonly call: UpstreamCall;
  readonly startedAt = Date.now();
  endedAt: number | null = null;
  /** The attempt's end closed it while it still waited: it did not end on its own. */
  private closedWaiting = false;

  constructor(
    readonly worker: Worker,
    path: string,
    body: string | Buffer,
    readonly room: bigint,
    onEnd: (leg: PrefillLeg) => void,
  ) {
    this.call = new UpstreamCall(worker, path, body, (buf, start, end) => this.onFrame(buf, start, end), NO_STALLS);
    void this.call.result.then((r) => {
      this.settle(r);
      onEnd(this);
    });
  }

  start(continuation: boolean, headers: Record<string, string> | null): void {
    this.worker.inFlight++;
    this.call.start(continuation, headers);
  }

  /** Stop the leg (the attempt ended): closing its connection is SGLang's abort too. */
  stop(): void {
    if (this.state === 'waiting') this.closedWaiting = true;
    this.call.abort({ kind: 'cancelled' });
  }

  /**
   * When it ended on its own, answered or failed (epoch ms; the attempt row's `prefill_ended_at`);
   * null while it waits, and when the attempt's end closed it still waiting.
   */
  get ownEnd(): number | null {
    return this.closedWaiting ? null : this.endedAt;
  }

  private settle(r: AttemptResult): void {
    this.worker.inFlight--;
    this.endedAt = Date.now();
    if (r.kind === 'finished') {
      this.state = 'done';
      return;
    }
    if (r.kind === 'cancelled') {
      if (this.state === 'waiting') this.state = 'failed';
      return;
    }
    this.state = 'failed';
    this.failure = r.kind === 'transport' ? classifyTransportFact(r.fact) : r.failure;
  }

  /** Its frames are few (one token, then [DONE]): each is parsed. */
  private onFrame(buf: Buffer, start: number, end: number): void {
    let text = buf.toString('utf8', start, end).trim();
    if (text.startsWith('data:')) text = text.slice(5).trim();
    if (text === '' || text === '[DONE]') return;
    let j: Record<string, unknown>;
    try {
      j = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return; // not a frame of an answer (a comment, a cut frame): the end decides
    }
    if ('error' in j) {
      const e = j.error as Record<string, unknown> | string;
      const msg = typeof e === 'string' ? e : String(e?.message ?? JSON.stringify(e));
      this.call.abort({ kind: 'failed', failure: { kind: 'engine_abort', message: `prefill ${this.worker.url}: ${msg}`, status: 502, evidence: 'an {"error"} frame on the prefill leg' } });
      return;
    }
    const meta = j.meta_info as Record<string, unknown> | undefined;
    const fr = meta?.finish_reason as Record<string, unknown> | null | undefined;
    if (!fr) return;
    if (fr.type === 'abort') {
      this.call.abort({ kind: 'failed', failure: { kind: 'engine_abort', message: `prefill ${this.worker.url} aborted: ${String(fr.message ?? '')}`, status: typeof fr.status_code === 'number' ? fr.status_code : 500, evidence: `abort finish on the prefill leg${typeof fr.status_code === 'number' ? ` (status_code ${fr.status_code})` : ''}` } });
      return;
    }
    const lps = meta?.input_token_logprobs;
    if (Array.isArray(lps)) this.inputLogprobs = lps;
    this.answerMeta = (meta as JsonObject | undefined) ?? null;
    this.call.end({ kind: 'finished' }); // the rest of its stream ([DONE]) is read and dropped
  }
}

/**
 * The failure of a P/D attempt, attributed to a leg. `decodeFailure`: how the decode leg ended
 * (null: it has not failed, the prefill leg's own failure or the deadline ended the attempt).
 * Before the decode's first token, a decode that reports an in-band abort (SGLang's "Decode
 * transfer failed ...", status 500: decode.py) while the prefill leg has not answered is waiting
 * on the prefill server, which failed it: the prefill leg failed. One that only waits past the
 * first-token timeout is waiting on the prefill leg too, which is slow, not shown faulty: the
 * attempt moves, attributed to the prefill leg, nobody blamed. Anything the decode leg's own
 * transport shows (refused, reset, a 5xx head) is the decode worker's.
 */
export function attributeLeg(decodeFailure: Failure, leg: PrefillLeg, decodeHadFrame: boolean): { failure: Failure; leg: 'prefill' | 'decode' } {
  if (decodeFailure.kind === 'prefill_failed') return { failure: decodeFailure, leg: 'prefill' };
  if (decodeHadFrame || leg.state === 'done') return { failure: decodeFailure, leg: 'decode' };
  const why = leg.state === 'failed' ? `the prefill leg had failed (${leg.failure?.evidence ?? leg.failure?.kind ?? 'ended'})` : 'the prefill leg had not answered';
  if (decodeFailure.kind === 'engine_abort') {
    return {
      failure: {
        kind: 'prefill_failed',
        message: `prefill ${leg.worker.url} did not transfer the KV of room ${leg.room}: ${decodeFailure.message}`,
        status: 502,
        evidence: `decode leg: ${decodeFailure.evidence ?? decodeFailure.kind} before its first token while ${why}: the prefill leg's fault`,
      },
      leg: 'prefill',
    };
  }
  if (decodeFailure.kind === 'first_token_timeout') {
    return { failure: { ...decodeFailure, evidence: `${decodeFailure.evidence ?? decodeFailure.kind} while ${why}: slow, not shown faulty` }, leg: 'prefill' };
  }
  return { failure: decodeFailure, leg: 'decode' };
}

/**
 * How long a prefill leg's failure that accuses its decode peer waits for the decode leg's own
 * connection to say whether the decode is gone. A killed decode's connection resets at once; the
 * prefill notices its dead peer at its next transfer or heartbeat, so under load either comes
 * first.
 */
export const PD_PEER_GRACE_MS = 1000;

/**
 * The prefill server's report that its decode peer is unreachable: SGLang's KV sender fails the
 * room with "Decode instance could be dead, remote <mooncake|p2p> session <addr> is not alive"
 * (python/sglang/srt/disaggregation/mooncake/conn.py, MooncakeKVManager's transfer worker:
 * `record_failure` when the session is in `failed_sessions`), logged as "Prefill transfer failed
 * ... KVTransferError". Both sides of a broken session accuse each other, so this alone does not
 * blame the decode: its own connection decides (dispatch-pd.ts PdDispatch.prefillEnded).
 */
export function blamesDecodePeer(f: Failure): boolean {
  return DECODE_PEER_GONE.test(f.message) || DECODE_PEER_GONE.test(f.evidence ?? '');
}

const DECODE_PEER_GONE = /Decode instance could be dead/;

/** The prefill leg failed on its own before the decode's first token. */
export function prefillFailure(leg: PrefillLeg): Failure {
  const f = leg.failure;
  return {
    kind: 'prefill_failed',
    message: `prefill ${leg.worker.url} failed before the KV transfer of room ${leg.room}: ${f?.message ?? 'ended'}`,
    status: 502,
    evidence: `prefill leg: ${f?.evidence ?? f?.kind ?? 'ended without its token'}, before the decode leg's first token`,
  };
}

/**
 * Whether a prefill leg still unanswered at the deadline is its server's fault. The wait alone is
 * not: a prefill waits behind the prompts queued before it on its server (SGLang's scheduler runs
 * one prefill batch at a time), or in its bootstrap queue for a decode short of KV memory
 * (decode.py DecodePreallocQueue), and the gateway has no such deadline at all. Evidence is the
 * server's health (the router's health checks, or a probe now) and its scheduler's load report;
 * a server that answers both is working through a queue.
 */
export function judgeWaiting(e: WaitingEvidence): Verdict {
  if (e.outOfService !== null) return { blame: true, dead: false, evidence: `the router's health checks have it ${e.outOfService}` };
  if (e.probe !== null && !e.probe.ok) return { blame: true, dead: e.probe.refused, evidence: `its health check failed (${e.probe.detail})` };
  if (e.load !== null && !e.load.answered) return { blame: true, dead: false, evidence: `its scheduler answered no load report (${e.load.detail})` };
  const read = [e.probe?.detail, e.load?.detail].filter((x) => x !== undefined).join(', ');
  return { blame: false, dead: false, evidence: `it answers its health check and its load report${read ? ` (${read})` : ''}: a queue, not a fault` };
}

/**
 * The P/D first-token deadline passed with no first token from the decode leg: when the prefill
 * leg had answered, the decode leg's (moved, not blamed); when it had not, the prefill leg's, only
 * on evidence against its server (`verdict`, judgeWaiting).
 */
export function deadlineFailure(leg: PrefillLeg, ms: number, verdict: Verdict | null = null): Failure {
  if (leg.state === 'done') {
    return { kind: 'first_token_timeout', message: `no first token from the decode leg within ${ms} ms after the prefill leg answered`, status: 504, evidence: `P/D first-token deadline (${ms} ms): the prefill leg had answered` };
  }
  return {
    kind: 'prefill_failed',
    message: `no KV transfer from prefill ${leg.worker.url} (room ${leg.room}) within ${ms} ms`,
    status: 504,
    evidence: `P/D first-token deadline (${ms} ms): the prefill leg ${leg.state === 'failed' ? 'had failed' : 'had not answered'}${verdict ? `, and ${verdict.evidence}` : ''}`,
  };
}
