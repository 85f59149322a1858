// One upstream worker as the pool sees it: its connection pool, what probing learned about it,
// and its health, bench and circuit state.
import { Pool } from 'undici';
import type { WorkerHealth, WorkerInfo } from '../events/types.ts';
import { CircuitBreaker, type CircuitOptions } from './circuit-breaker.ts';

export class Worker {
  readonly pool: Pool;
  healthy = true; // optimistic until a check or a connect error says otherwise
  dead = false; // connect refused: gone until a health check answers
  benchedUntil = 0;
  draining = false;
  inFlight = 0;
  tokenOnly: boolean | null = null;
  incremental: boolean | null = null;
  /** preferred_sampling_params.max_new_tokens, when advertised. */
  defaultMaxNewTokens: number | null = null;
  probed = false;
  healthFailures = 0;
  readonly circuit: CircuitBreaker;

  constructor(
    readonly id: string,
    readonly url: string,
    circuit: CircuitOptions,
    connectTimeoutMs: number,
    readonly simulated = false,
    readonly simIndex: number | null = null,
  ) {
    this.circuit = new CircuitBreaker(circuit);
    // Timeouts on the body and headers are the router's own (inter-token timeout, swept per
    // frame), because undici's would also fire while the router pauses a worker for a slow client.
    this.pool = new Pool(url, {
      connections: 512,
      pipelining: 1,
      connect: { timeout: connectTimeoutMs },
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 30_000,
    });
  }

  health(now = Date.now()): WorkerHealth {
    if (this.draining) return 'draining';
    if (this.dead) return 'dead';
    if (!this.healthy) return 'unhealthy';
    if (this.circuit.state(now) === 'open') return 'circuit_open';
    if (this.benchedUntil > now) return 'benched';
    return 'healthy';
  }

  /** May take new attempts now. */
  eligible(now = Date.now()): boolean {
    return !this.draining && !this.dead && this.healthy && this.benchedUntil <= now && this.circuit.allows(now);
  }

  info(): WorkerInfo {
    return {
      id: this.id,
      url: this.url,
      health: this.health(),
      circuit: this.circuit.state(),
      token_only: this.tokenOnly,
      incremental: this.incremental,
      in_flight: this.inFlight,
      simulated: this.simulated,
      sim_index: this.simIndex,
      draining: this.draining,
    };
  }
}
