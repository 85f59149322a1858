// A worker's URL as the router keys it: the origin (scheme, host, port) of an http(s) URL without
// a path. Its own module so that what only reads worker URLs (GET /traces' filter, the file
// discovery source, the hub) does not load the pool.
export function normalizeWorkerUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new Error(`invalid worker URL '${raw}'`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`worker URL must be http(s): '${raw}'`);
  if (u.pathname !== '/' || u.search || u.hash) throw new Error(`worker URL must be an origin without a path: '${raw}'`);
  return u.origin;
}
