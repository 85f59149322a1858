// Whether a host name or address is this machine's loopback: what the router may serve without a
// key (router/index.ts, cli/router.ts) and what the edge's guards trust (http/guards.ts). Its own
// module so that the edge's servers (the hub's too) do not load the config's checks.
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}
