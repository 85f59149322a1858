// The Responses store: the responses this router produced with `store` on (OpenAI's default), so
// that a later request can name them by `previous_response_id` or name their items by
// `item_reference` (Vercel's @ai-sdk/openai does from its second step), and GET/DELETE
// /v1/responses/{id} can find them. vLLM keeps such a store in an unbounded dict behind
// VLLM_ENABLE_RESPONSES_API_STORE (vllm/entrypoints/openai/responses/serving.py
// OpenAIServingResponses.__init__: "this may cause a memory leak since we never remove responses
// from the store"); this one is bounded by count and by bytes, and forgets a response once its
// retention time has passed.
//
// A record is kept as JSON text, not as objects: text costs what it weighs (an object graph costs
// several times its JSON), its size is known for the byte bound, and a GET answers it as it is.
// Records are kept in insertion order, which is also their expiry order (one retention time for
// all), so both eviction and expiry take from the head.
import { randomBytes } from 'node:crypto';

export interface StoreLimits {
  /** Most responses kept; 0 turns the store off. */
  maxResponses: number;
  /** Most bytes kept, counting each record's JSON text (UTF-8) and RECORD_OVERHEAD; 0 turns the store off. */
  maxBytes: number;
  /** A response is forgotten this long after it was stored. */
  ttlMs: number;
}

/** What one record costs beyond its text: the map entry, the record and its strings' headers. */
export const RECORD_OVERHEAD = 256;

export interface StoredResponse {
  /** `resp_<key>`. */
  readonly id: string;
  /** The Response object as it was answered (JSON text). */
  readonly response: string;
  /** The input items the answer was generated from (JSON text of a list): the previous response's chain, then this request's input, references resolved. */
  readonly input: string;
  readonly bytes: number;
  readonly storedAt: number;
}

export class ResponseStore {
  private readonly records = new Map<string, StoredResponse>();
  private total = 0;

  constructor(
    readonly limits: StoreLimits,
    private readonly now: () => number = Date.now,
  ) {}

  get enabled(): boolean {
    return this.limits.maxResponses > 0 && this.limits.maxBytes > 0;
  }

  get size(): number {
    return this.records.size;
  }

  get bytes(): number {
    return this.total;
  }

  /**
   * Keep a response, evicting the oldest ones to fit. False when it is not kept: the store is off,
   * or the record alone is over the byte bound.
   */
  put(id: string, response: string, input: string): boolean {
    if (!this.enabled) return false;
    const bytes = Buffer.byteLength(response) + Buffer.byteLength(input) + RECORD_OVERHEAD;
    if (bytes > this.limits.maxBytes) return false;
    this.delete(id);
    this.expire();
    this.records.set(id, { id, response, input, bytes, storedAt: this.now() });
    this.total += bytes;
    while (this.records.size > this.limits.maxResponses || this.total > this.limits.maxBytes) this.evictOldest();
    return true;
  }

  /** The response stored under `id`, or null (never stored, evicted, expired or deleted). */
  get(id: string): StoredResponse | null {
    this.expire();
    return this.records.get(id) ?? null;
  }

  delete(id: string): boolean {
    const r = this.records.get(id);
    if (!r) return false;
    this.records.delete(id);
    this.total -= r.bytes;
    return true;
  }

  /** Drop the expired records: they are the oldest, so the head of the map. */
  private expire(): void {
    const cutoff = this.now() - this.limits.ttlMs;
    for (const r of this.records.values()) {
      if (r.storedAt > cutoff) return;
      this.delete(r.id);
    }
  }

  private evictOldest(): void {
    const first = this.records.values().next();
    if (!first.done) this.delete(first.value.id);
  }
}

// --- ids ------------------------------------------------------------------------------------------
//
// A response's key is 24 hex: the replica id of the router process that made it (4 hex,
// router/replicas/identity.ts), 8 random hex drawn once per process, and a 12-hex counter. The
// response is `resp_<key>`, its output items `<rs|msg|fc>_<key>_<n>`, its input items
// `<kind>_<key>_i<n>`. So any id this router issued names its response, and the response names the
// replica that holds it: a replica that does not hold it asks that one (fronts/openai/responses-api.ts).

const KEY = /^[0-9a-f]{24}$/;
const RESPONSE_ID = /^resp_([0-9a-f]{24})$/;
const ITEM_ID = /^[a-z]+_([0-9a-f]{24})_i?\d+$/;

/** Makes the keys of one router process's responses. */
export class ResponseKeys {
  private readonly prefix: string;
  private counter = 0;

  constructor(replicaId: string) {
    if (!/^[0-9a-f]{4}$/.test(replicaId)) throw new Error(`replica id must be 4 lowercase hex digits, got '${replicaId}'`);
    this.prefix = replicaId + randomBytes(4).toString('hex');
  }

  next(): string {
    this.counter++;
    return this.prefix + this.counter.toString(16).padStart(12, '0');
  }
}

/** The key of a response id this router issued (`resp_<key>`), or null. */
export function keyOfResponseId(id: string): string | null {
  return RESPONSE_ID.exec(id)?.[1] ?? null;
}

/** The key of the response an item id this router issued belongs to, or null. */
export function keyOfItemId(id: string): string | null {
  return ITEM_ID.exec(id)?.[1] ?? null;
}

/** The replica id (4 hex) of the router process that made a key. */
export function replicaOfKey(key: string): string | null {
  return KEY.test(key) ? key.slice(0, 4) : null;
}
