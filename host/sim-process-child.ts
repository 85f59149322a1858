// The helper process of host/sim-process.ts: runs a simulated cluster (sim/cluster.ts) and obeys
// its parent over IPC. It lives in its own process group, so a terminal's Ctrl-C reaches only the
// parent, which stops the router before it asks for the workers to stop.
import { startCluster, type ClusterChange, type ClusterOptions, type SimCluster } from '../sim/cluster.ts';
import type { HelperCall, HelperMessage, SimFormatChoice } from './sim-process.ts';

/** What the helper needs of a cluster: one, or the two of a mixed one seen as one. */
type HelperCluster = Pick<SimCluster, 'workers' | 'kill' | 'restart' | 'fault' | 'stop' | 'onChange'>;

/**
 * A mixed cluster: SGLang workers first (the larger half), then vLLM ones, under one index space,
 * so the dashboard's worker actions address them alike.
 */
async function startMixed(opts: Omit<ClusterOptions, 'format'>): Promise<HelperCluster> {
  const vllmCount = Math.floor(opts.workers / 2);
  const sg = await startCluster({ ...opts, workers: opts.workers - vllmCount, format: 'sglang' });
  let vl: SimCluster;
  try {
    vl = await startCluster({ ...opts, workers: vllmCount, format: 'vllm' });
  } catch (err) {
    await sg.stop();
    throw err;
  }
  const offset = () => sg.workers().length;
  const route = (i: number): [SimCluster, number] => (i < offset() ? [sg, i] : [vl, i - offset()]);
  return {
    workers: () => [...sg.workers(), ...vl.workers().map((w) => ({ ...w, index: w.index + offset() }))],
    kill: (i) => { const [c, j] = route(i); return c.kill(j); },
    restart: (i) => { const [c, j] = route(i); return c.restart(j); },
    fault: (i, f) => { const [c, j] = route(i); return c.fault(j, f); },
    stop: async () => { await Promise.all([sg.stop(), vl.stop()]); },
    onChange: (l: (c: ClusterChange) => void) => {
      const a = sg.onChange(l);
      const b = vl.onChange((c) => l({ ...c, index: c.index + offset() }));
      return () => { a(); b(); };
    },
  };
}

const send = (m: HelperMessage) => {
  if (process.connected) process.send!(m);
};

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2] ?? '{}') as Omit<ClusterOptions, 'format'> & { format?: SimFormatChoice };
  let cluster: HelperCluster;
  try {
    cluster = opts.format === 'mixed' ? await startMixed(opts) : await startCluster(opts as ClusterOptions);
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
