// The helper process of host/replicas-process.ts: the primary of the router replicas
// (router/replicas/primary.ts), obeying its parent over IPC. It lives in its own process group
// with its replicas, so a terminal's Ctrl-C reaches only the parent, which stops its traffic
// before it asks for the replicas to stop.
import { DEFAULTS, type RouterConfig } from '../router/config.ts';
import { ReplicaStartError, startPrimary, type PrimaryHandle } from '../router/replicas/primary.ts';
import type { ReplicasHelperCall, ReplicasHelperMessage } from './replicas-process.ts';

const send = (m: ReplicasHelperMessage, then: () => void = () => undefined) => {
  if (process.connected) process.send!(m, () => then());
  else then();
};

async function main(): Promise<void> {
  const partial = JSON.parse(process.argv[2] ?? '{}') as Partial<RouterConfig>;
  // As startRouter completes a partial config (router/index.ts), here for the primary's own use.
  const config: RouterConfig = { ...DEFAULTS, ...partial, workers: partial.workers ?? [], tokenizers: partial.tokenizers ?? [] };
  let primary: PrimaryHandle | null = null;
  let stopping: Promise<void> | null = null;
  // SIGINT to the replicas: they close at once, as the embedded router's close() does; the
  // traffic the host sends has stopped before.
  const stop = () => (stopping ??= (primary ? primary.stop(0, 'SIGINT') : Promise.resolve()).finally(() => process.exit(0)));
  // Signals are the parent's to act on; the parent gone (its channel closed) means stop.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => void stop());
  process.on('disconnect', () => void stop());
  process.on('message', (m: ReplicasHelperCall) => {
    if (m.op === 'stop') void stop();
  });
  try {
    primary = await startPrimary(config, {
      log: (line) => send({ type: 'log', line }),
      onAllCrashed: () => send({ type: 'log', line: 'every router replica is in a crash loop: none is left to route' }),
    });
  } catch (err) {
    send({ type: 'failed', message: (err as Error).message, usage: err instanceof ReplicaStartError && err.usage }, () => process.exit(1));
    return;
  }
  send({ type: 'ready', url: primary.url, mode: primary.mode, replicas: primary.list() });
}

await main();
