// The discovery sources a config asks for, started against one reconciler. A source kind is one
// factory in SOURCES: it reads its settings from RouterConfig and returns null when they are off.
import { ConfigError } from '../config-error.ts';
import type { RouterConfig } from '../config.ts';
import type { Reconciler } from './reconciler.ts';

export { Reconciler } from './reconciler.ts';
import type { DiscoverySource } from './types.ts';
import { FileSource } from './file-source.ts';
import { k8sRoleSource, k8sSource } from './k8s.ts';

export type SourceFactory = (config: RouterConfig) => DiscoverySource | null;

export const SOURCES: SourceFactory[] = [
  (c) => (c.workerFile !== null ? new FileSource(c.workerFile, c.workerFileIntervalMs) : null),
  (c) => k8sSource(c),
  (c) => k8sRoleSource(c, 'prefill'),
  (c) => k8sRoleSource(c, 'decode'),
];

export interface Discovery {
  readonly sources: readonly DiscoverySource[];
  stop(): Promise<void>;
}

/**
 * Start every source the config turns on, each with its own sink. A source whose start fails
 * stops the ones started before it and throws: a bad --worker-file fails the router's start.
 */
export async function startDiscovery(config: RouterConfig, reconciler: Reconciler, factories: readonly SourceFactory[] = SOURCES): Promise<Discovery> {
  const started: DiscoverySource[] = [];
  const stop = async () => {
    await Promise.all(started.map((s) => s.stop().catch(() => undefined)));
  };
  try {
    for (const make of factories) {
      const source = make(config);
      if (source === null) continue;
      started.push(source); // stopped too if its own start fails halfway
      await source.start(reconciler.sink(source.name));
    }
  } catch (err) {
    await stop();
    // A usage error (the CLI prints one line and exits 2), naming the source.
    throw new ConfigError(`discovery (${started.at(-1)?.name ?? 'source'}): ${(err as Error).message}`);
  }
  return { sources: started, stop };
}
