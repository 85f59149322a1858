// Spare connections' upkeep across the pool (each worker's spares: spares.ts): sized to the burst
// a worker would take if the busiest other worker died now, ticking only while there is traffic.
import type { SpareStats } from '../metrics.ts';
import type { Worker } from './worker.ts';

/**
 * How often spare connections are resized to the load and renewed, while there is traffic or a
 * spare to age out (SpareUpkeep.wake).
 */
const SPARE_INTERVAL_MS = 100;

export class SpareUpkeep {
  private timer: NodeJS.Timeout | null = null;
  /** Between start() and stop(): upkeep may run. */
  private on = false;

  constructor(
    /** The registry's workers, read in place. */
    private readonly workers: ReadonlyMap<string, Worker>,
    /** Most spare connections per worker; 0 = off. */
    private readonly cap: number,
  ) {}

  start(): void {
    this.on = this.cap > 0;
    this.wake();
  }

  stop(): void {
    this.on = false;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Spare upkeep ticks while there is traffic or a spare left to age out. On an idle router a
   * tick finds neither and does nothing, yet wakes the process 10 times a second, in every
   * replica: the tick that finds nothing stops the timer, and the next pick (a request about to
   * start an attempt, before its worker's in-flight count moves) starts it again, so the first
   * tick of a burst comes within SPARE_INTERVAL_MS of it, as it did from a timer that never stopped.
   */
  wake(): void {
    if (!this.on || this.timer !== null) return;
    this.timer = setInterval(() => {
      if (!this.maintain() && this.timer !== null) {
        clearInterval(this.timer);
        this.timer = null;
      }
    }, SPARE_INTERVAL_MS);
    this.timer.unref();
  }

  /** Whether upkeep is ticking (false on an idle router: wake). */
  get ticking(): boolean {
    return this.timer !== null;
  }

  /**
   * Size each worker's spares for the burst it would take if the busiest other worker died now:
   * all of that worker's streams, plus one (the policy may send every continuation to the least
   * loaded survivor, often a worker that has just come back). No traffic, no new spares.
   * Returns whether a later tick has anything to do: a stream in flight, or a spare kept.
   */
  maintain(now = Date.now()): boolean {
    let busiest = 0;
    let second = 0;
    let kept = false;
    for (const w of this.workers.values()) {
      if (w.inFlight >= busiest) {
        second = busiest;
        busiest = w.inFlight;
      } else if (w.inFlight > second) second = w.inFlight;
    }
    for (const w of this.workers.values()) {
      if (!w.spares) continue;
      const other = w.inFlight === busiest ? second : busiest;
      const eligible = w.eligible(now);
      w.spares.target = other === 0 || !eligible ? 0 : Math.min(this.cap, other + 1);
      // A worker out of service loses its spares now; without traffic they age out (spares.ts).
      w.spares.maintain(now, !eligible);
      if (w.spares.size > 0) kept = true;
    }
    return busiest > 0 || kept;
  }

  /**
   * A worker back in service gets its spares now, not at the next tick: it is the least loaded,
   * so the next burst of continuations goes to it.
   */
  recovered(w: Worker): void {
    if (!w.spares) return;
    w.spares.recovered();
    this.maintain();
  }

  stats(): SpareStats[] {
    const out: SpareStats[] = [];
    for (const w of this.workers.values()) {
      if (w.spares) out.push({ worker: w.url, idle: w.spares.size, taken: w.spares.taken, reused: w.spares.reused, missed: w.spares.missed });
    }
    return out;
  }
}
