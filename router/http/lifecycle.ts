// The router's own liveness and readiness, and its shutdown: what an orchestrator (Kubernetes)
// probes, and what SIGTERM does (docs/reliability.md, "Shutdown").
//
// - GET /livez (alias /liveness, the SGLang model gateway's name): 200 while the process answers.
// - GET /readyz (alias /readiness): whether this router can take requests, about the router
//   itself: 200 once it listens with its config loaded and each discovery source has listed the
//   workers once; 503 before that and while it shuts down, with the reason. Not about the workers:
//   the gateway's `/readiness` answers 503 when no worker is healthy (sgl-model-gateway
//   src/server.rs `readiness`: "insufficient healthy workers"), which behind a Kubernetes Service
//   takes every router pod out at once during a short worker outage, so that clients get
//   connection refused instead of the router's own 503 (and no replay once a worker is back).
//   The workers' availability is `healthy_workers` here, and GET /health (admin-api.ts).
// - shutdown(grace): readiness turns 503 at once (the Service stops sending new connections),
//   requests still arriving are served, and the router waits for the requests in flight to end,
//   up to the grace period; then the caller closes it.
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { ServerResponse } from 'node:http';
import type { Routes } from './routes.ts';

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

export class Lifecycle {
  private shutdownSince: number | null = null;
  private waiting: Promise<boolean> | null = null;

  constructor(
    private readonly pool: WorkerPool,
    private readonly inFlight: () => number,
    /** Why discovery has not listed the workers yet (a source that never synced), or null. */
    private readonly discoveryPending: () => string | null = () => null,
  ) {}

  get shuttingDown(): boolean {
    return this.shutdownSince !== null;
  }

  addRoutes(routes: Routes): void {
    const live = (_req: unknown, res: ServerResponse) => sendJson(res, 200, { status: 'alive' });
    const ready = (_req: unknown, res: ServerResponse) => {
      const all = this.pool.list();
      const now = Date.now();
      const healthy = all.filter((w) => w.eligible(now)).length;
      const pending = this.shutdownSince === null ? this.discoveryPending() : null;
      const reason = this.shutdownSince !== null ? 'shutting down: requests in flight are finishing' : pending !== null ? `discovery has not listed the workers yet: ${pending}` : null;
      sendJson(res, reason === null ? 200 : 503, { status: reason === null ? 'ready' : 'not_ready', healthy_workers: healthy, total_workers: all.length, in_flight: this.inFlight(), ...(reason !== null ? { reason } : {}) });
    };
    // Data-plane access: probes carry no token (as /health).
    for (const p of ['/livez', '/liveness']) routes.add('GET', p, live, false);
    for (const p of ['/readyz', '/readiness']) routes.add('GET', p, ready, false);
  }

  /**
   * Turn unready and wait until no request is in flight or `graceMs` has passed. True: every
   * request ended in time.
   */
  shutdown(graceMs: number, first: () => Promise<void> = async () => undefined): Promise<boolean> {
    if (this.waiting) return this.waiting;
    this.shutdownSince = Date.now();
    // Discovery stops first (no worker changes while the last requests end).
    const stopped = first().catch(() => undefined);
    const end = this.shutdownSince + graceMs;
    this.waiting = new Promise<boolean>((resolve) => {
      const check = () => {
        if (this.inFlight() === 0) return resolve(true);
        if (Date.now() >= end) return resolve(false);
        setTimeout(check, Math.min(100, Math.max(1, end - Date.now())));
      };
      void stopped.then(check);
    });
    return this.waiting;
  }
}
