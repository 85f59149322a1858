// A tiny route table: exact paths and `:param` segments. The router has a handful of routes and
// the dashboard host adds a few; a framework would be more code than this.
import type { RouteHandler } from '../api.ts';

interface Route {
  method: string;
  parts: string[];
  handler: RouteHandler;
  admin: boolean;
}

export class Routes {
  private readonly routes: Route[] = [];

  add(method: string, path: string, handler: RouteHandler, admin: boolean): void {
    this.routes.push({ method: method.toUpperCase(), parts: path.split('/').slice(1), handler, admin });
  }

  /** The route for a path: `allowed` lists the methods when the path exists but not the method. */
  match(method: string, pathname: string): { route: Route; params: Record<string, string> } | { allowed: string[] } | null {
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
