// Behind the dashboard hub (host/hub/) a request's id is `<label>/<id>`: the hub's key, which
// neither the router nor the client knows. These read the label apart from the id the client
// sent, name the address a replay goes to, and say the hub's routers and matrix as they are. Pure.
import type { HubState, RouterLinkStatus, WorkerMatrixRow } from '../../../host/contract.ts';

export interface HubId {
  /** The hub's label of the router that owns it (r0, r1, ...); null with one router. */
  router: string | null;
  /** The id as the client sent it and the router knows it. */
  clientId: string;
}

/** A page id read apart: `r1/abc` behind a hub with a router r1 is router r1, id `abc`; else the id itself. */
export function splitHubId(id: string, hub: HubState | null): HubId {
  if (hub) {
    const cut = id.indexOf('/');
    if (cut > 0 && hub.routers.some((r) => r.label === id.slice(0, cut))) return { router: id.slice(0, cut), clientId: id.slice(cut + 1) };
  }
  return { router: null, clientId: id };
}

/**
 * Where a replay of a request is sent: the routers' shared port when they have one (`--replicas`),
 * else its own router's URL (`serve --router`: the page's address is the hub's, which serves no
 * requests), else the page's router.
 */
export function replayAddress(id: string, hub: HubState | null, routerUrl: string | null): string | null {
  if (!hub) return routerUrl;
  if (hub.front) return hub.front;
  const { router } = splitHubId(id, hub);
  const owner = router === null ? undefined : hub.routers.find((r) => r.label === router);
  return owner ? owner.url : routerUrl;
}

/**
 * What the header calls the page's address: the router, or, behind a hub with no shared port
 * (`serve --router`), the hub; clients cannot send to it.
 */
export function addressName(hub: HubState | null): 'router' | 'hub' {
  return hub && hub.front === null ? 'hub' : 'router';
}

/**
 * `replica 1 epoch 0`, for a replica of a set of several (or one restarted: epoch > 0); null for a
 * plain router, which a --replicas 1 primary also answers as replica 0 epoch 0.
 */
export function replicaNote(r: RouterLinkStatus, all: readonly RouterLinkStatus[]): string | null {
  if (!r.replica) return null;
  const plural = r.replica.index > 0 || r.replica.epoch > 0 || all.some((o) => o.replica !== null && o.replica.index > 0);
  return plural ? `replica ${r.replica.index} epoch ${r.replica.epoch}` : null;
}

/**
 * A worker's health across the routers, counting a lost router: the hub leaves a lost router's
 * view out (it is stale), which alone would read "healthy on 1 of 1" with one of two routers gone.
 */
export function matrixHealth(w: WorkerMatrixRow, routers: readonly RouterLinkStatus[]): { words: string; lost: string[] } {
  const lost = routers.filter((r) => r.state === 'lost' && w.health[r.label] === undefined).map((r) => r.label);
  const of = w.of + lost.length;
  return { words: `healthy on ${w.healthy} of ${of}${lost.length ? ` (${lost.join(', ')} lost)` : ''}`, lost };
}
