// Why a worker is unhealthy, in the operator's words: the router's health checks record only
// pass or fail, so for a worker the router reports as not healthy the host asks its /health
// itself (at most every few seconds, only while a page is watching) and keeps the error.
import type { WorkerInfo } from '../router/events/types.ts';
import type { ProbeNote } from './contract.ts';

const PROBED: ReadonlySet<string> = new Set(['dead', 'unhealthy', 'circuit_open', 'benched']);

export type Probe = (url: string, timeoutMs: number) => Promise<string | null>;

/** GET {url}/health: null when it answers 200, else what went wrong, in one line. */
export const probeHealth: Probe = async (url, timeoutMs) => {
  try {
    const res = await fetch(`${url.replace(/\/$/, '')}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer().catch(() => undefined);
    return res.ok ? null : `/health answered HTTP ${res.status}`;
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return `/health did not answer within ${timeoutMs} ms`;
    const cause = e.cause?.code ?? e.cause?.message;
    return `/health: ${cause ?? e.message}`;
  }
};

export class ProbeNotes {
  private readonly notes = new Map<string, ProbeNote>();
  private readonly lastTry = new Map<string, number>();
  private readonly running = new Set<string>();

  constructor(private readonly probe: Probe = probeHealth, private readonly everyMs = 3000, private readonly timeoutMs = 2000) {}

  /** Starts probes of workers that are not healthy (not waiting for them) and returns the notes so far. */
  update(workers: readonly WorkerInfo[], now = Date.now()): ProbeNote[] {
    const known = new Set(workers.map((w) => w.id));
    for (const id of this.notes.keys()) if (!known.has(id)) this.notes.delete(id);
    for (const w of workers) {
      if (!PROBED.has(w.health)) {
        this.notes.delete(w.id);
        continue;
      }
      if (this.running.has(w.id) || now - (this.lastTry.get(w.id) ?? -Infinity) < this.everyMs) continue;
      this.lastTry.set(w.id, now);
      this.running.add(w.id);
      void this.probe(w.url, this.timeoutMs)
        .then((error) => {
          if (error === null) this.notes.delete(w.id);
          else this.notes.set(w.id, { worker: w.id, url: w.url, at: Date.now(), error });
        })
        .finally(() => this.running.delete(w.id));
    }
    return [...this.notes.values()];
  }
}
