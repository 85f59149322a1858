// The P/D dispatch (docs/pd.md): an attempt is a pair, a decode worker whose stream the client
// reads and a prefill leg on a prefill server, both sent the same body with a room no attempt
// used before (pd.ts: rooms, the leg, which leg a failure is). Here: the room's life, the prefill
// leg's, the decode frames held for the prefill's answer when the format merges its input
// logprobs, the first-token deadline, and the failure's leg.
import { MIGRATES, type Failure } from '../core/failure.ts';
import { UpstreamCall } from '../upstream/attempt.ts';
import type { StallWatch } from '../upstream/stall-watch.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { Worker } from '../pool/worker.ts';
import type { AttemptState } from './attempt-state.ts';
import type { Dispatch, LeftOut, PairRowFacts } from './dispatch.ts';
import { PD_PEER_GRACE_MS, PrefillLeg, ROOMS, attributeLeg, blamesDecodePeer, bootstrapHost, deadlineFailure, judgeWaiting, prefillFailure, withBootstrap } from './pd.ts';

export class PdDispatch implements Dispatch {
  readonly kind = 'pd';
  private a!: AttemptState;
  /** The prefill leg, once bound to its attempt. */
  leg!: PrefillLeg;
  /** The leg a failure was attributed to. */
  failedLeg: 'prefill' | 'decode' | null = null;
  private timer: NodeJS.Timeout | null = null;
  /**
   * Frames of the decode leg kept until the prefill leg answers, for a format that needs its
   * answer (`FormatAttempt.awaitsPrefill`: SGLang's input logprobs); null: frames go straight on.
   */
  private held: Buffer[] | null = null;

  constructor(
    /** The decode worker. */
    readonly worker: Worker,
    readonly prefill: Worker,
    private readonly pool: WorkerPool,
    /** The first-token deadline (docs/pd.md); 0: off. */
    private readonly deadlineMs: number,
  ) {}

  bind(a: AttemptState, body: string | Buffer, path: string): string | Buffer {
    this.a = a;
    // The same body to both legs, with a room no attempt used before (pd.ts ROOMS).
    const room = ROOMS.issue();
    let paired: string | Buffer;
    try {
      paired = withBootstrap(body, bootstrapHost(this.prefill), this.prefill.bootstrapPort, room);
    } catch (err) {
      ROOMS.release(room);
      throw err;
    }
    this.leg = new PrefillLeg(this.prefill, path, paired, room, onPrefillEnd.bind(null, this));
    return paired;
  }

  open(path: string, body: string | Buffer, stalls: StallWatch): UpstreamCall {
    const a = this.a;
    if (a.reader.awaitsPrefill !== true) return new UpstreamCall(this.worker, path, body, (buf, start, end) => a.reader.onFrame(buf, start, end), stalls);
    // The gateway too reads the prefill's answer before the decode's stream when it merges
    // logprobs (pd_router.rs execute_dual_dispatch_internal). The check costs the held path only.
    this.held = [];
    const call = new UpstreamCall(this.worker, path, body, (buf, start, end) => {
      if (this.held !== null) this.held.push(Buffer.from(buf.subarray(start, end)));
      else a.reader.onFrame(buf, start, end);
    }, stalls);
    call.hold();
    return call;
  }

  started(continuation: boolean, headers: Record<string, string> | null): void {
    this.leg.start(continuation, headers);
    if (this.deadlineMs > 0) this.timer = setTimeout(onDeadline, this.deadlineMs, this);
  }

  firstFrame(): void {
    this.clearTimer();
  }

  /**
   * The attempt ended: its prefill leg ends too (aborted at the prefill server if it still waits),
   * and its room is no longer in flight (pd.ts RoomIssuer keeps it a while longer).
   */
  end(): void {
    this.clearTimer();
    const leg = this.leg;
    const waiting = leg.state === 'waiting';
    leg.stop();
    if (waiting) this.a.sendAbort(leg.worker);
    ROOMS.release(leg.room);
  }

  attribute(failure: Failure, hadFrame: boolean): Failure {
    if (this.failedLeg !== null) return failure;
    // Which leg failed (pd.ts attributeLeg): a decode waiting on a dead prefill is innocent.
    const att = attributeLeg(failure, this.leg, hadFrame);
    this.failedLeg = att.leg;
    return att.failure;
  }

  leaveOut(failure: Failure, out: LeftOut, pool: WorkerPool): void {
    if (this.failedLeg !== 'prefill') {
      out.workers.add(this.worker.id);
      return;
    }
    // The prefill leg's: that server is left out of this request's pairs, and benched when it
    // failed (a slow leg moved by a timeout is not); the decode worker is neither benched nor
    // excluded.
    if (failure.kind === 'prefill_failed') pool.blame(this.prefill, this.leg.failure?.kind === 'connect', 'prefill_failed', 0);
    out.prefill.add(this.prefill.id);
  }

  rowFacts(): PairRowFacts {
    return { prefill_worker: this.prefill.url, decode_worker: this.worker.url, bootstrap_room: this.leg.room.toString(), prefill_ended_at: this.leg.ownEnd, ...(this.failedLeg !== null ? { failed_leg: this.failedLeg } : {}) };
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * The prefill leg ended. Failed before the decode's first token: the attempt is the prefill leg's
   * failure, unless the prefill server says its decode peer is gone (`graceOver`: that was waited on).
   */
  prefillEnded(graceOver: boolean): void {
    const a = this.a;
    const leg = this.leg;
    if (leg.state === 'done' && this.held !== null) {
      // Its answer first, then the decode frames that waited for it, then the decode's end if it came.
      const frames = this.held;
      this.held = null;
      a.reader.prefillAnswered?.(leg.answerMeta);
      for (const f of frames) if (!a.call.ended) a.reader.onFrame(f, 0, f.length);
      a.call.release();
      return;
    }
    if (leg.state !== 'failed' || leg.failure === null || a.call.ended || a.firstFrameAt !== null) return;
    if (!graceOver && blamesDecodePeer(leg.failure)) {
      // The decode leg's own connection tells whether the decode is gone: reset or refused, it is
      // the decode's failure (attributeLeg); its in-band "Decode transfer failed" leaves it to the
      // prefill, as does silence past the grace. The first-token deadline gives way to the grace.
      this.clearTimer();
      this.timer = setTimeout(onPeerGraceOver, PD_PEER_GRACE_MS, this);
      return;
    }
    this.failedLeg = 'prefill';
    // A request's own refusal (a 4xx) is passed on as the prefill server wrote it.
    a.failed(MIGRATES[leg.failure.kind] ? prefillFailure(leg) : leg.failure);
    a.sendAbort(); // the stranded decode attempt: freed at the decode worker now
  }

  /** The grace for the decode leg's own word ran out: the prefill leg's failure stands. */
  graceOver(): void {
    this.timer = null;
    this.prefillEnded(true);
  }

  /**
   * The first-token deadline passed (docs/pd.md). A decode waiting after its prefill leg answered
   * moves on, blaming nobody. A prefill leg still unanswered is judged by evidence about its
   * server, never by the wait alone (pd.ts judgeWaiting): a faulty server's leg failed (a new
   * pair); a server working through its queue keeps the attempt, judged again a deadline later.
   */
  deadlinePassed(): void {
    this.timer = null;
    const a = this.a;
    const leg = this.leg;
    if (a.call.ended || a.firstFrameAt !== null) return;
    const ms = this.deadlineMs;
    if (leg.state === 'done') {
      this.failedLeg = 'decode';
      a.failed(deadlineFailure(leg, ms));
      a.sendAbort();
      return;
    }
    if (leg.state !== 'waiting') return; // its failure is prefillEnded's
    void this.pool.waitingEvidence(leg.worker).then((evidence) => {
      // The attempt may have moved on while the server was read (its token came, a leg failed).
      if (a.call.ended || a.firstFrameAt !== null || leg.state !== 'waiting' || this.timer !== null) return;
      const verdict = judgeWaiting(evidence);
      if (!verdict.blame) {
        this.timer = setTimeout(onDeadline, ms, this);
        return;
      }
      this.failedLeg = 'prefill';
      a.failed(deadlineFailure(leg, ms, verdict));
      a.sendAbort();
    });
  }
}

function onPrefillEnd(d: PdDispatch): void {
  d.prefillEnded(false);
}

function onPeerGraceOver(d: PdDispatch): void {
  d.graceOver();
}

function onDeadline(d: PdDispatch): void {
  d.deadlinePassed();
}
