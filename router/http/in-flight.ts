// The logical requests in flight at the router, keyed by logical id: what lets a cluster behind
// Baton answer rids as one SGLang worker does.
//
// - Duplicate rids: SGLang refuses a request whose rid is already in flight ("Duplicate request
//   ID detected: <rid>", tokenizer_manager.py), a ValueError. Here the rids a request *claims* are
//   the ones a worker would hold for it: its body's rid (or a batch's rid list, or `<rid>_<i>`
//   for a batch's string rid). An id taken from a header (x-request-id, x-correlation-id,
//   x-trace-id, request-id) or made up by the router claims nothing: clients share correlation
//   headers, and SGLang never sees those ids as rids.
// - /abort_request {"rid"}: SGLang's tokenizer manager goes on only when some request in flight
//   has exactly that rid (`if not abort_all and rid not in self.rid_to_state: return`), then its
//   scheduler aborts every request whose rid starts with it (`req.rid.startswith(recv_req.rid)`).
//   `toAbort` applies both rules to logical ids and claimed rids.

import type { Worker } from '../pool/worker.ts';

export interface InFlight {
  /** The logical id: what the client sees in meta_info.id and x-request-id. */
  readonly id: string;
  /**
   * 'logical': served by a LogicalRequest, upstream under per-attempt rids of Baton's own; its
   * logical id is its name at the router. 'passthrough': a batch, n > 1 or unparsed request on
   * one worker under the client's own rids (or rids the worker made up), which only that worker
   * can match: /abort_request is forwarded to it.
   */
  readonly kind: 'logical' | 'passthrough';
  /** Rids a worker holds for this request as SGLang names them (see above); may be empty. */
  readonly rids: readonly string[];
  /** A passthrough request's worker, once picked (null for a logical request). */
  worker: Worker | null;
  /** Abort a logical request as SGLang's /abort_request would (the request ends with the worker's abort finish). */
  abort(): void;
}

export class RequestRegistry {
  /** Every request in flight (several may share a logical id: ids from headers claim nothing). */
  private readonly entries = new Set<InFlight>();
  /** Claimed rid → its request (claims are unique: a second claim is the duplicate). */
  private readonly claims = new Map<string, InFlight>();

  get size(): number {
    return this.entries.size;
  }

  /** The first of `rids` already claimed by a request in flight, or null. */
  duplicateOf(rids: readonly string[]): string | null {
    for (const r of rids) if (this.claims.has(r)) return r;
    return null;
  }

  /** Register a request; returns a duplicate rid instead (and registers nothing) when it has one. */
  add(entry: InFlight): string | null {
    if (entry.rids.length > 0) {
      const dup = this.duplicateOf(entry.rids);
      if (dup !== null) return dup;
      for (const r of entry.rids) this.claims.set(r, entry);
    }
    this.entries.add(entry);
    return null;
  }

  /** The request ended (finished, failed, cancelled, aborted): forget it and free its rids. */
  delete(entry: InFlight): void {
    this.entries.delete(entry);
    for (const r of entry.rids) if (this.claims.get(r) === entry) this.claims.delete(r);
  }

  has(entry: InFlight): boolean {
    return this.entries.has(entry);
  }

  all(): InFlight[] {
    return [...this.entries];
  }

  /**
   * The logical requests `/abort_request {"rid": rid}` aborts: none unless a request in flight is
   * named exactly `rid` (a logical request's id, or a rid some request claims); then every logical
   * request whose id starts with `rid`. (Passthrough requests are matched by their worker, which
   * alone knows all their rids.)
   */
  toAbort(rid: string): InFlight[] {
    const logical = this.all().filter((e) => e.kind === 'logical');
    if (!this.claims.has(rid) && !logical.some((e) => e.id === rid)) return [];
    return logical.filter((e) => e.id.startsWith(rid));
  }
}
