// The router as a library: what `startRouter()` (router/index.ts) returns. The Electron main
// process, `baton serve`, the CLI and the tests all hold the router through this interface.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BatonEvent, RouterStats, WorkerInfo } from './events/types.ts';
import type { TraceRow } from './trace/row.ts';
import type { RequestOutput } from './trace/outputs.ts';

export interface TraceFilter {
  request?: string;
  worker?: string;
  outcome?: string;
  kind?: 'attempt' | 'request';
  since?: number; // epoch ms, rows that ended at or after
}

/** A synchronous listener; it must not block (the router calls it on the token path). */
export type EventListener = (event: BatonEvent) => void;

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, params: Record<string, string>) => void | Promise<void>;

export interface RouterHandle {
  readonly url: string; // http://host:port
  readonly host: string;
  readonly port: number;
  /** Subscribe to every event; returns unsubscribe. Listeners run synchronously and must be cheap. */
  subscribe(listener: EventListener): () => void;
  workers(): WorkerInfo[];
  addWorker(url: string, opts?: { simulated?: boolean; simIndex?: number }): Promise<WorkerInfo>;
  removeWorker(id: string): boolean;
  drainWorker(id: string, draining?: boolean): boolean;
  /** Trace rows still in the in-memory ring, oldest first. */
  traceRows(filter?: TraceFilter): TraceRow[];
  /** Output token ids of a recent finished request, with where each attempt's tokens start. */
  requestOutput(id: string): RequestOutput | undefined;
  /** The router's identity, totals since it started and its workers now (optional: stand-ins may lack it). */
  stats?(): Promise<RouterStats>;
  /** Extra HTTP routes on the router's own server (the dashboard host adds its API this way). */
  addRoute(method: string, path: string, handler: RouteHandler): void;
  close(): Promise<void>;
  /**
   * SIGTERM: /readyz turns 503, requests in flight get up to `graceMs` (default
   * --shutdown-grace-ms) to end, then the router closes. True: every request ended in time.
   */
  shutdown?(graceMs?: number): Promise<boolean>;
  /**
   * A replica retiring in a reload: stop accepting on the router's port (the other replicas take
   * the new connections) and keep serving the open ones; resolves once each has ended.
   */
  stopAccepting?(): Promise<void>;
  /** A replica's own port: stop listening on it (open connections stay) or listen on it again. */
  ownPort?(listen: boolean): Promise<void>;
}
