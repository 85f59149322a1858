// The helper process of host/sim-process.ts: runs a simulated cluster (sim/cluster.ts) and obeys
// its parent over IPC. It lives in its own process group, so a terminal's Ctrl-C reaches only the
// parent, which stops the router before it asks for the workers to stop.
import { startCluster, type ClusterOptions, type SimCluster } from '../sim/cluster.ts';
import type { HelperCall, HelperMessage } from './sim-process.ts';

const send = (m: HelperMessage) => {
  if (process.connected) process.send!(m);
};

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2] ?? '{}') as ClusterOptions;
  let cluster: SimCluster;
  try {
    cluster = await startCluster(opts);
  } catch (err) {
    send({ type: 'failed', message: (err as Error).message });
    process.exit(1);
  }
  let stopping: Promise<void> | null = null;
  const stop = () => (stopping ??= cluster.stop().finally(() => process.exit(0)));
  // Signals are the parent's to act on; the parent gone (its channel closed) means stop.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => void stop());
  process.on('disconnect', () => void stop());
  cluster.onChange(() => send({ type: 'workers', workers: cluster.workers() }));
  process.on('message', (m: HelperCall) => {
    void (async () => {
      try {
        if (m.op === 'kill') await cluster.kill(m.args[0] as number);
        else if (m.op === 'restart') await cluster.restart(m.args[0] as number);
        else if (m.op === 'fault') await cluster.fault(m.args[0] as number, m.args[1] as never);
        else if (m.op === 'stop') {
          await cluster.stop();
          send({ type: 'reply', id: m.id, ok: true });
          process.exit(0);
        }
        send({ type: 'reply', id: m.id, ok: true });
      } catch (err) {
        send({ type: 'reply', id: m.id, ok: false, message: (err as Error).message });
      }
    })();
  });
  send({ type: 'ready', workers: cluster.workers() });
}

await main();
