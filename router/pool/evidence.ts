// Evidence against a worker, for a failure that does not carry its own (core/failure.ts
// `needsEvidence`): what other requests saw on it, and a health probe run right then.
import { Client } from 'undici';
import type { WorkerEvidence } from '../core/failure.ts';
import type { ErrorKind } from '../trace/row.ts';

interface TokenedFailure {
  at: number;
  kind: ErrorKind;
  tokens: number;
}

/**
 * The latest failure, per worker, of an attempt whose request had output tokens and whose failure
 * blames the worker. A request with no token yet is never recorded, whatever it did: the evidence
 * a client could produce by repeating a bad request is none.
 */
export class TokenedFailures {
  private readonly last = new Map<string, TokenedFailure>();

  note(workerId: string, kind: ErrorKind, tokens: number, at = Date.now()): void {
    if (tokens <= 0) return;
    this.last.set(workerId, { at, kind, tokens });
  }

  /** The latest such failure at or after `since`, as evidence. */
  since(workerId: string, since: number): WorkerEvidence['corroboration'] {
    const f = this.last.get(workerId);
    return f && f.at >= since ? { kind: f.kind, tokens: f.tokens, afterMs: f.at - since } : null;
  }

  forget(workerId: string): void {
    this.last.delete(workerId);
  }
}

/**
 * `GET /health` on a connection of its own: whether the worker answers now. A fresh connection,
 * not one from the pool, so that an idle keep-alive connection the worker is closing cannot make
 * a healthy worker look dead, and so that a refused connection is seen as such.
 */
export async function probeHealth(url: string, timeoutMs: number): Promise<NonNullable<WorkerEvidence['probe']>> {
  const client = new Client(url, { connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, pipelining: 0 });
  try {
    const res = await client.request({ path: '/health', method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    return { ok: res.statusCode === 200, refused: false, detail: `GET /health answered ${res.statusCode}` };
  } catch (err) {
    const e = err as { code?: string; name?: string; message?: string };
    const code = e.code ?? e.name ?? 'Error';
    return { ok: false, refused: code === 'ECONNREFUSED', detail: `GET /health failed: ${code}${e.message ? ` ${e.message}` : ''}` };
  } finally {
    void client.destroy().catch(() => undefined);
  }
}

/**
 * The worker's load report (`path`: its format's, WireFormat.load; SGLang's `GET /get_load`), on a
 * connection of its own: whether the server's scheduler answers it now. The report comes from the scheduler itself (http_server.py
 * `get_load` → TokenizerManager.get_load, a request the scheduler answers between batches), so
 * a server busy with a queue answers it and one whose scheduler is stuck does not, even when its
 * HTTP process still answers `/health` (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false). Any
 * HTTP answer counts as answered: a server without the endpoint (a 404) tells nothing.
 */
export async function probeLoad(url: string, path: string, timeoutMs: number): Promise<{ answered: boolean; detail: string }> {
  const client = new Client(url, { connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, pipelining: 0 });
  try {
    const res = await client.request({ path, method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    return { answered: true, detail: `GET ${path} answered ${res.statusCode}` };
  } catch (err) {
    const e = err as { code?: string; name?: string; message?: string };
    return { answered: false, detail: `GET ${path} failed: ${e.code ?? e.name ?? 'Error'}${e.message ? ` ${e.message}` : ''}` };
  } finally {
    void client.destroy().catch(() => undefined);
  }
}

/**
 * What the router reads about a prefill server whose leg passed the P/D first-token deadline
 * unanswered (PoolHealth.waitingEvidence), to tell a queue from a fault (migration/pd.ts judgeWaiting).
 */
export interface WaitingEvidence {
  /** The router's own health checks have taken the server out (dead, unhealthy); null: in service. */
  outOfService: string | null;
  /** `GET /health` on a connection of its own, bounded by the health timeout (null: not probed). */
  probe: { ok: boolean; refused: boolean; detail: string } | null;
  /** Its load report (SGLang: `GET /get_load`) on a connection of its own, bounded alike: its scheduler's answer (null: not probed). */
  load: { answered: boolean; detail: string } | null;
}
