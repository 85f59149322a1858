// A bad setting: `baton router` and `baton serve` print it as one line (a usage error). Its own
// module so that what only throws or catches it (telemetry's settings, the trace file, the hub)
// does not load the config's checks, and through them the pool's policies.
export class ConfigError extends Error {}
