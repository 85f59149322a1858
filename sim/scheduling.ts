// The scheduling every format's generation shares: queued until its prefill delay has passed,
// then one step per token interval, waiting out a hang and a client that reads slowly
// (backpressure) rather than buffering without bound. A format's generation (generation.ts,
// vllm/generation.ts) brings what a step computes and renders.

import type { ServerResponse } from 'node:http';

export type Ending = 'finished' | 'aborted' | 'disconnected' | 'killed';

/** What a generation needs from the worker core (core.ts) that runs it. */
export interface SchedulingHost {
  readonly prefillUsPerToken: number;
  /**
   * How long from now a prefill of `ms` ends: `ms` when prefills overlap (the default), or after
   * the prefills queued before it when the worker prefills one at a time (--serial-prefill).
   */
  prefillDelay(ms: number): number;
  readonly tokenIntervalMs: number;
  queued: number;
  /** Counts a token; returns faults that came due, to run once its frame is on the wire. */
  tokenGenerated(): (() => void) | undefined;
  /** Runs `step` now, or once a hang is lifted. */
  whenAwake(step: () => void): void;
  generationEnded(g: ScheduledGeneration, how: Ending): void;
}

/** One generate call as scheduling sees it: its response, and whether it has ended. */
export interface CallState {
  res: ServerResponse;
  /** Ended by us or by the client: no more writes, no more generation. */
  done: boolean;
}

export abstract class ScheduledGeneration<C extends CallState = CallState> {
  protected timer: NodeJS.Timeout | NodeJS.Immediate | null = null;
  protected ended = false;
  protected prefilled = false;

  constructor(
    protected readonly host: SchedulingHost,
    readonly call: C,
    /** A streamed call: its writes can block on a slow reader. */
    private readonly stream: boolean,
  ) {}

  /** Prompt plus generated tokens: the KV this generation holds. */
  abstract get contextTokens(): number;

  /** Generates one token (and decides whether it is the last). */
  protected abstract step(): void;

  /** Queues the prefill of `uncached` prompt tokens; `prefill` runs once it is done. */
  protected enqueue(uncached: number, prefill: () => void): void {
    this.host.queued++;
    this.schedule(this.host.prefillDelay((uncached * this.host.prefillUsPerToken) / 1000), prefill);
  }

  /** The prefill is done: the generation leaves the queue. */
  protected prefillDone(): void {
    this.host.queued--;
    this.prefilled = true;
  }

  /** Schedules the step after this one: one token interval on, once the client has drained. */
  protected stepAgain(): void {
    const next = () => this.host.whenAwake(() => this.step());
    if (this.stream && this.call.res.writableNeedDrain) this.call.res.once('drain', () => this.schedule(this.host.tokenIntervalMs, next));
    else this.schedule(this.host.tokenIntervalMs, next);
  }

  /** The first step: now, or once a hang is lifted. */
  protected awaitStep(): void {
    this.host.whenAwake(() => this.step());
  }

  private schedule(ms: number, fn: () => void): void {
    this.timer = ms >= 1 ? setTimeout(fn, ms) : setImmediate(fn);
  }

  protected clearTimer(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer as NodeJS.Timeout);
    clearImmediate(this.timer as NodeJS.Immediate);
    this.timer = null;
  }

  /** The client went away: stop at once, nothing more to write. */
  disconnect(): void {
    if (this.ended) return;
    this.halt();
    this.host.generationEnded(this, 'disconnected');
  }

  /** A crash, reset or shutdown took the connection: stop without a word. */
  stop(): void {
    if (this.ended) return;
    this.halt();
    this.call.done = true;
    this.host.generationEnded(this, 'killed');
  }

  protected halt(): void {
    this.ended = true;
    this.clearTimer();
    if (!this.prefilled) this.host.queued--;
  }
}
