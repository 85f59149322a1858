// The dashboard hub's side of `baton chaos --replicas N` (ReplicaCampaignHooks): a hub
// (host/hub/) follows the router's primary as the dashboard would, and the campaign asks it what
// an operator would have seen: the SIGKILLed replica marked lost within 2 s, shown back once the
// primary restarted it, no sequence gap on any stream, and at the end the hub's merged request
// count equal to the sum of the replicas' own /traces.
import { startHub, type HubHandle } from '../host/hub/server.ts';
import type { RouterLinkStatus } from '../host/contract.ts';
import type { ReplicaEntry } from '../router/replicas/identity.ts';
import type { ReplicaCampaignHooks } from './replicas.ts';

/** How soon the hub must show a dead replica as lost (the hub's promise: within this bound). */
export const LOST_WITHIN_MS = 2_000;
/** How long the hub may take, after the traffic, to hold every replica's rows. */
const CATCH_UP_MS = 10_000;
const POLL_MS = 50;

export interface HubCheck extends ReplicaCampaignHooks {
  /** Stops the hub (the campaign's finally calls it whatever happened). */
  close(): Promise<void>;
}

async function requestIds(url: string): Promise<string[]> {
  const res = await fetch(`${url}/traces?format=jsonl&kind=request`);
  if (!res.ok) throw new Error(`${url}/traces answered ${res.status}`);
  return (await res.text()).split('\n').filter((l) => l.length > 0).map((l) => (JSON.parse(l) as { request_id: string }).request_id);
}

async function requestCount(url: string): Promise<number> {
  return (await requestIds(url)).length;
}

/** Which requests the hub and a replica's /traces disagree on: the first few of each side, to say what went wrong. */
async function disagreement(handle: HubHandle, up: ReplicaEntry[]): Promise<string[]> {
  const out: string[] = [];
  for (const r of up) {
    const link = handle.status().routers.find((l) => l.replica?.index === r.index && l.state !== 'lost');
    if (!link) continue;
    const since = handle.hub.allLinks().find((l) => l.label === link.label)?.stats?.started_at ?? 0;
    const hub = new Set(handle.hub.rows().filter((row) => row.kind === 'request' && row.ended_at >= since && row.request_id.startsWith(`${link.label}/`)).map((row) => row.request_id.slice(link.label.length + 1)));
    const own = new Set(await requestIds(r.url));
    const missing = [...own].filter((id) => !hub.has(id));
    const extra = [...hub].filter((id) => !own.has(id));
    if (missing.length > 0 || extra.length > 0) out.push(`replica ${r.index} (${link.label}): not at the hub ${missing.length} (${missing.slice(0, 5).join(', ')}), only at the hub ${extra.length} (${extra.slice(0, 5).join(', ')})`);
  }
  return out;
}

export function hubCheck(log: (line: string) => void = () => undefined): HubCheck {
  let handle: HubHandle | null = null;
  let poller: NodeJS.Timeout | null = null;
  let killed: { index: number; epoch: number; at: number } | null = null;
  let lostAt: number | null = null;
  let backAt: number | null = null;

  const ofReplica = (index: number): RouterLinkStatus[] => handle!.status().routers.filter((r) => r.replica?.index === index);

  const watch = () => {
    if (!handle || !killed) return;
    const links = ofReplica(killed.index);
    if (lostAt === null && links.some((l) => l.state === 'lost' && (l.replica?.epoch ?? -1) <= killed!.epoch)) lostAt = Date.now();
    if (lostAt !== null && backAt === null && links.some((l) => l.state === 'connected' && (l.replica?.epoch ?? -1) > killed!.epoch)) backAt = Date.now();
  };

  return {
    async start(routerUrl: string) {
      handle = await startHub({ routers: [routerUrl], port: 0, host: '127.0.0.1', staticRoot: null });
      poller = setInterval(watch, POLL_MS);
      log(`hub ${handle.url} follows ${routerUrl}`);
    },
    replicaKilled(replica: ReplicaEntry, at: number) {
      killed = { index: replica.index, epoch: replica.epoch, at };
    },
    async finish(end: ReplicaEntry[]) {
      const violations: string[] = [];
      if (!handle) return { checks: {}, violations: ['the hub never started'] };
      // The restarted replica may still be settling in: give the hub a moment to show it back.
      const settle = Date.now() + CATCH_UP_MS;
      while (killed && backAt === null && Date.now() < settle) await new Promise((r) => setTimeout(r, POLL_MS));
      watch();
      const up = end.filter((r) => r.state === 'up');
      let expected = 0;
      for (const r of up) expected += await requestCount(r.url);
      // Rows reach the hub over the event streams: wait for them to catch up, then compare.
      let merged = handle.status().merged.requests;
      while (merged !== expected && Date.now() < settle + CATCH_UP_MS) {
        await new Promise((r) => setTimeout(r, 200));
        expected = 0;
        for (const r of up) expected += await requestCount(r.url);
        merged = handle.status().merged.requests;
      }
      const status = handle.status();
      const lostAfterMs = killed && lostAt !== null ? lostAt - killed.at : null;
      const backAfterMs = killed && backAt !== null ? backAt - killed.at : null;
      if (killed && lostAfterMs === null) violations.push(`replica ${killed.index} was never shown lost`);
      else if (lostAfterMs !== null && lostAfterMs > LOST_WITHIN_MS) violations.push(`replica ${killed!.index} shown lost ${lostAfterMs} ms after its SIGKILL (limit ${LOST_WITHIN_MS} ms)`);
      if (killed && backAfterMs === null) violations.push(`replica ${killed.index} was never shown back after its restart`);
      if (status.merged.gaps > 0) violations.push(`${status.merged.gaps} sequence gaps on the routers' event streams`);
      if (merged !== expected) violations.push(`the hub merged ${merged} requests, the live replicas' /traces hold ${expected}`, ...(await disagreement(handle, up)));
      return {
        checks: {
          lost_after_ms: lostAfterMs, back_after_ms: backAfterMs, gaps: status.merged.gaps, events: status.merged.events,
          merged_requests: merged, replicas_traces_requests: expected,
          routers: status.routers.map((r) => ({ label: r.label, replica: r.replica?.index ?? null, epoch: r.replica?.epoch ?? null, state: r.state, requests: r.requests, reconnects: r.reconnects })),
        },
        violations,
      };
    },
    async close() {
      if (poller) clearInterval(poller);
      poller = null;
      await handle?.close();
      handle = null;
    },
  };
}
