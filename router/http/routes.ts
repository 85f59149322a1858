// A tiny route table: exact paths and `:param` segments. The router has a handful of routes and
// the dashboard host adds a few; a framework would be more code than this.
import type { RouteHandler } from '../api.ts';
import type { Access } from './guards.ts';

interface Route {
  method: string;
  parts: string[];
  handler: RouteHandler;
  /** Who may call it (guards.ts Access). */
  access: Access;
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export class Routes {
  private readonly routes: Route[] = [];
  /**
   * Paths without parameters, by path then method, each with its match ready: a request to
   * /generate finds its route with two map lookups and allocates nothing.
   */
  private readonly exact = new Map<string, Map<string, { route: Route; params: Record<string, string> }>>();

  /** `admin`: true for an admin route, false for the data plane, or the route's Access. */
  add(method: string, path: string, handler: RouteHandler, admin: boolean | Access): void {
    const access: Access = admin === true ? 'admin' : admin === false ? 'data' : admin;
    const route = { method: method.toUpperCase(), parts: path.split('/').slice(1), handler, access };
    this.routes.push(route);
    if (route.parts.some((p) => p.startsWith(':'))) return;
    // A route with parameters added before, for this method, would match this path first.
    const shadowed = this.routes.some((r) => r !== route && r.method === route.method && r.parts.length === route.parts.length
      && r.parts.every((p, i) => (p.startsWith(':') ? route.parts[i] !== '' : p === route.parts[i])));
    if (shadowed) return;
    let byMethod = this.exact.get(path);
    if (!byMethod) this.exact.set(path, (byMethod = new Map()));
    // The first route added for a path and method wins, as in the scan below.
    if (!byMethod.has(route.method)) byMethod.set(route.method, Object.freeze({ route, params: NO_PARAMS }));
  }

  /** The route for a path: `allowed` lists the methods when the path exists but not the method. */
  match(method: string, pathname: string): { route: Route; params: Record<string, string> } | { allowed: string[] } | null {
    const hit = this.exact.get(pathname)?.get(method);
    if (hit) return hit;
    // Exact segments, as Starlette matches them: `/generate/` and `//generate` are other paths.
    const parts = pathname.split('/').slice(1);
    const allowed: string[] = [];
    for (const r of this.routes) {
      if (r.parts.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < parts.length; i++) {
        const want = r.parts[i]!;
        if (want.startsWith(':')) {
          if (parts[i] === '') {
            ok = false;
            break;
          }
          try {
            params[want.slice(1)] = decodeURIComponent(parts[i]!);
          } catch {
            ok = false;
            break;
          }
        } else if (want !== parts[i]) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      if (r.method === method) return { route: r, params };
      allowed.push(r.method);
    }
    return allowed.length > 0 ? { allowed } : null;
  }
}
