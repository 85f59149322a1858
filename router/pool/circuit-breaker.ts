// A per-worker circuit breaker, as in SGLang's gateway: open after N consecutive failures,
// half-open after a cool-down (one trial at a time), closed again after M successes.
export type CircuitState = 'closed' | 'open' | 'half_open';

export interface CircuitOptions {
  failureThreshold: number;
  openMs: number;
  successThreshold: number;
}

export class CircuitBreaker {
  private failures = 0;
  private successes = 0;
  private openedAt = 0;
  private _state: CircuitState = 'closed';

  constructor(private readonly opts: CircuitOptions) {}

  state(now = Date.now()): CircuitState {
    if (this._state === 'open' && now - this.openedAt >= this.opts.openMs) {
      this._state = 'half_open';
      this.successes = 0;
    }
    return this._state;
  }

  /** Whether a new attempt may be sent now. */
  allows(now = Date.now()): boolean {
    return this.state(now) !== 'open';
  }

  recordSuccess(): void {
    this.failures = 0;
    if (this.state() === 'half_open' && ++this.successes >= this.opts.successThreshold) this._state = 'closed';
  }

  recordFailure(now = Date.now()): void {
    this.successes = 0;
    const s = this.state(now);
    if (s === 'half_open' || ++this.failures >= this.opts.failureThreshold) {
      this._state = 'open';
      this.openedAt = now;
      this.failures = 0;
    }
  }
}
