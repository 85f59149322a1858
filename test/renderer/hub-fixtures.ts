// A hub's state for the renderer's tests: its routers as the hub reports them.
import type { HubState, RouterLinkStatus } from '../../host/contract.ts';

export function link(label: string, url: string, over: Partial<RouterLinkStatus> = {}): RouterLinkStatus {
  return {
    label, url, state: 'connected', instance: 'i', replica: null, epoch: 1, seq: 0, last_seen: 0, offset_ms: 0, rtt_ms: 1, events: 0, gaps: 0,
    reconnects: 0, requests: 0, error: null, ...over,
  };
}

export function hubOf(routers: RouterLinkStatus[], front: string | null): HubState {
  return { routers, workers: [], owner_lost: [], front };
}
