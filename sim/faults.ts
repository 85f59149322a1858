// Faults a simulated worker can be told to suffer, now or after N more tokens (counted over all of
// the worker's streams). Parsing and the countdown are pure; the worker applies them.

/**
 * `error` is served by simulated vLLM workers only (their engine's retryable `finish_reason:
 * "error"`); SGLang workers refuse it, as FAULT_KINDS does not list it.
 */
export type FaultKind = 'crash' | 'hang' | 'reset' | 'reject' | 'slow' | 'abort' | 'clear' | 'error';

export interface Fault {
  kind: FaultKind;
  /** Apply after this many more generated tokens (0 or absent: now). */
  afterTokens?: number;
  /** For `slow`: the new interval between tokens, ms. */
  intervalMs?: number;
}

export const FAULT_KINDS: readonly FaultKind[] = ['crash', 'hang', 'reset', 'reject', 'slow', 'abort', 'clear'];
/** The kinds a simulated vLLM worker accepts: the SGLang worker's plus `error`. */
export const VLLM_FAULT_KINDS: readonly FaultKind[] = [...FAULT_KINDS, 'error'];

/** Reads a fault from the HTTP control body: `{"kind", "after_tokens"?, "interval_ms"?}` (camelCase accepted too). */
export function parseFault(body: unknown, kinds: readonly FaultKind[] = FAULT_KINDS): Fault {
  if (typeof body !== 'object' || body === null) throw new Error('fault body must be a JSON object');
  const b = body as Record<string, unknown>;
  const kind = b.kind;
  if (typeof kind !== 'string' || !kinds.includes(kind as FaultKind)) throw new Error(`kind must be one of ${kinds.join(', ')}`);
  const fault: Fault = { kind: kind as FaultKind };
  const after = b.after_tokens ?? b.afterTokens;
  if (after !== undefined && after !== null) {
    if (typeof after !== 'number' || !Number.isInteger(after) || after < 0) throw new Error('after_tokens must be an integer >= 0');
    fault.afterTokens = after;
  }
  const interval = b.interval_ms ?? b.intervalMs;
  if (interval !== undefined && interval !== null) {
    if (typeof interval !== 'number' || !Number.isFinite(interval) || interval < 0) throw new Error('interval_ms must be a number >= 0');
    fault.intervalMs = interval;
  }
  if (fault.kind === 'slow' && fault.intervalMs === undefined) throw new Error('slow needs interval_ms');
  return fault;
}

/** Faults waiting for their token count. */
export class FaultSchedule {
  private pending: { left: number; fault: Fault }[] = [];

  get size(): number {
    return this.pending.length;
  }

  add(fault: Fault): void {
    this.pending.push({ left: fault.afterTokens ?? 0, fault });
  }

  /** One more token went out; returns the faults now due, in the order they were scheduled. */
  tick(): Fault[] {
    if (this.pending.length === 0) return [];
    const due: Fault[] = [];
    this.pending = this.pending.filter((p) => {
      p.left--;
      if (p.left > 0) return true;
      due.push(p.fault);
      return false;
    });
    return due;
  }

  clear(): void {
    this.pending = [];
  }
}
