// P/D (docs/pd.md) as the Workers view and the banner need it. The router counts an attempt's
// load on its decode worker only (`worker`), so a prefill server reads 0 in flight while it
// prefills every request: its own load is the attempts whose prefill leg is on it. Pure.
import type { RequestView } from './request-view.ts';

export interface PrefillLoad {
  /** Running attempts whose prefill leg is on the server. */
  inFlight: number;
  /** Attempts whose prefill leg was on it that started within the window. */
  recent: number;
}

/** Each prefill server's own load (by URL), from the requests this page holds. */
export function prefillLoad(requests: Iterable<RequestView>, now: number, windowMs = 60_000): Map<string, PrefillLoad> {
  const out = new Map<string, PrefillLoad>();
  for (const r of requests) {
    for (const a of r.attempts) {
      const url = a.row?.prefill_worker ?? a.prefillWorker;
      if (!url) continue;
      const load = out.get(url) ?? { inFlight: 0, recent: 0 };
      if (a.outcome === 'running' && r.status === 'running') load.inFlight++;
      if (a.startedAt >= now - windowMs) load.recent++;
      out.set(url, load);
    }
  }
  return out;
}

interface RoleWorker { id: string; health: string; draining: boolean; pd_role?: 'prefill' | 'decode' }

/**
 * P/D roles with servers in the fleet but none healthy (and not draining), each with its servers'
 * states (`p0 dead, p1 dead`): every P/D request fails with `no_worker` until one is back, while
 * the other role's cards may still read healthy.
 */
export function pdShortage(workers: readonly RoleWorker[]): { role: 'prefill' | 'decode'; workers: string }[] {
  const out: { role: 'prefill' | 'decode'; workers: string }[] = [];
  for (const role of ['prefill', 'decode'] as const) {
    const ws = workers.filter((w) => w.pd_role === role);
    if (ws.length === 0 || ws.some((w) => w.health === 'healthy' && !w.draining)) continue;
    out.push({ role, workers: ws.map((w) => `${w.id} ${w.draining && w.health === 'healthy' ? 'draining' : w.health}`).join(', ') });
  }
  return out;
}
