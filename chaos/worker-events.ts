// The router's own report of its workers, as it happens: the worker_state events of GET /events
// (the dashboard's stream). The router emits one each time it blames a worker, so the campaign
// sees every benching at the moment the router decided it, not at its next poll of /workers.

import { request } from 'undici';
import type { WorkerStateEvent } from './verify.ts';

export interface WorkerEventsWatch {
  readonly events: WorkerStateEvent[];
  /** Times the stream ended before stop() and was opened again (events may be missing around each). */
  readonly interruptions: number;
  stop(): Promise<void>;
}

/** Split SSE text into complete messages; returns the unfinished rest. */
export function sseMessages(text: string, onData: (data: string) => void): string {
  let rest = text;
  let cut: number;
  while ((cut = rest.indexOf('\n\n')) >= 0) {
    const message = rest.slice(0, cut);
    rest = rest.slice(cut + 2);
    for (const line of message.split('\n')) if (line.startsWith('data:')) onData(line.slice(line[5] === ' ' ? 6 : 5));
  }
  return rest;
}

/** The worker_state events of one message: its envelope's `events` (a JSON array of router events). */
export function workerStates(batch: string): WorkerStateEvent[] {
  const out: WorkerStateEvent[] = [];
  let events: unknown;
  try {
    events = JSON.parse(batch);
  } catch {
    return out;
  }
  if (events !== null && typeof events === 'object' && !Array.isArray(events)) events = (events as { events?: unknown }).events;
  if (!Array.isArray(events)) return out;
  for (const e of events as { type?: unknown; t?: unknown; worker?: { url?: unknown; health?: unknown; circuit?: unknown } }[]) {
    if (e?.type !== 'worker_state' || typeof e.t !== 'number' || typeof e.worker?.url !== 'string') continue;
    out.push({ t: e.t, url: e.worker.url, health: String(e.worker.health), circuit: String(e.worker.circuit) });
  }
  return out;
}

export function watchWorkerEvents(routerUrl: string, adminToken: string): WorkerEventsWatch {
  const events: WorkerStateEvent[] = [];
  const ac = new AbortController();
  let interruptions = 0;
  let stopped = false;
  const run = async () => {
    while (!stopped) {
      try {
        const res = await request(routerUrl + '/events', { headers: { authorization: `Bearer ${adminToken}` }, signal: ac.signal, headersTimeout: 10_000, bodyTimeout: 0 });
        if (res.statusCode !== 200) throw new Error(`GET /events: ${res.statusCode}`);
        let rest = '';
        for await (const chunk of res.body) {
          rest = sseMessages(rest + (chunk as Buffer).toString('utf8'), (data) => events.push(...workerStates(data)));
        }
      } catch {
        // closed by stop(), or the router dropped the stream: open it again below
      }
      if (stopped) return;
      interruptions++;
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const done = run();
  return {
    events,
    get interruptions() {
      return interruptions;
    },
    stop: async () => {
      stopped = true;
      ac.abort();
      await done;
    },
  };
}
